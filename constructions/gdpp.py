"""GD++ as LSA weights (von Oswald et al. 2023, §3, App. A.10 Eq. 23): Proposition 1's layer whose value also writes x.

W_K = W_Q = [[I_dx, 0], [0, 0]], W_V = [[-I_dx, 0], [W0, -I_dy]], P = diag(γ I_dx, (η/N) I_dy). The products are
QK = [[I, 0], [0, 0]] and PV = [[-γ I, 0], [(η/N) W0, -(η/N) I]], so every token (x_j, y_j) becomes

    (x_j - γ Σ_i x_i x_iᵀ x_j,  y_j - ΔW x_j),   ΔW = (η/N) Σ_i (y_i - W0 x_i) x_iᵀ,

one GD++ step of ``icl_gd.regression.gd`` (context y slots hold the residuals, the query's slot -ŷ): the Prop. 1 layer
(``icl_gd.constructions.prop1``) whose x blocks of W_V and P are filled in. With γ = 0 the products are Proposition 1's,
so the layer is a GD step. K layers, tied or separate, are K GD++ steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predictions_per_step, gdpp_params_from_weights, gdpp_predictions_per_step, gdpp_step
from icl_gd.regression.lsa import LSAModel, LSAWeights
from icl_gd.regression.spectral import TaskSpectrum, spectral_gdpp_predict

from icl_gd.constructions.prop1 import (check_batch, gd_model, gd_step_weights, predictions_per_layer, random_shapes, stacked_model,
                    states_per_layer)
from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge


def gdpp_step_weights(
    d_x: int, d_y: int, n_context: int, eta: float, gamma: float, W0: torch.Tensor | None = None,
    n_heads: int = 1, dtype: torch.dtype = torch.float64,
) -> LSAWeights:
    """GD++ layer weights, (H, D, D) blocks with D = d_x + d_y: Prop. 1's, with W_V's x block -I and P's x block
    γ I. With ``n_heads`` > 1 each head does 1/H."""
    prop1 = gd_step_weights(d_x, d_y, n_context, eta, W0, n_heads, dtype)
    W_V, P = prop1.W_V.clone(), prop1.P.clone()
    W_V[:, :d_x, :d_x] = -torch.eye(d_x, dtype=dtype)
    P[:, :d_x, :d_x] = torch.eye(d_x, dtype=dtype) * (gamma / n_heads)
    return LSAWeights(prop1.W_Q, prop1.W_K, W_V, P)


def gdpp_model(
    d_x: int, d_y: int, n_context: int, etas: Sequence[float], gammas: Sequence[float], recurrent: bool = False,
    W0: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
) -> LSAModel:
    """An LSA model doing len(etas) GD++ steps: tied (one (η, γ)) or separate layers ((η_k, γ_k) per layer)."""
    etas, gammas = [float(e) for e in etas], [float(g) for g in gammas]
    if not etas or len(etas) != len(gammas):
        raise ConfigError(f"gdpp_model needs as many η as γ (at least one), got {len(etas)} and {len(gammas)}")
    if recurrent and (len(set(etas)) != 1 or len(set(gammas)) != 1):
        raise ConfigError(f"a recurrent (tied) model takes one (η, γ), got η={etas}, γ={gammas}")
    layers = [gdpp_step_weights(d_x, d_y, n_context, e, g, W0, dtype=dtype) for e, g in zip(etas, gammas)]
    return stacked_model(layers, d_y, recurrent, dtype)


# ---------------------------------------------------------------------------------------------------- checks
def check_one_step(
    d_x: int, d_y: int, n_context: int, batch: int, eta: float, gamma: float, with_W0: bool, seed: int,
    n_heads: int = 1, dtype: torch.dtype = torch.float64, tolerance: float = 1e-12,
) -> CheckResult:
    """Every output token of one GD++ layer against one explicit ``gdpp_step`` on random tokens."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randn(batch, n_context + 1, d_x + d_y, generator=gen, dtype=dtype)
    W0 = torch.randn(d_y, d_x, generator=gen, dtype=dtype) if with_W0 else None
    model = stacked_model([gdpp_step_weights(d_x, d_y, n_context, eta, gamma, W0, n_heads, dtype)], d_y, dtype=dtype)
    _, states = model(tokens, return_tokens=True)
    x_all, y = tokens[..., :d_x], tokens[..., d_x:]
    W = torch.zeros(batch, d_y, d_x, dtype=dtype) if W0 is None else W0.expand(batch, d_y, d_x)
    x_next, r_next, pred_next = gdpp_step(x_all, y[:, :-1], -y[:, -1], eta, gamma, W)
    expected = torch.cat([x_next, torch.cat([r_next, -pred_next[:, None]], dim=1)], dim=-1)
    return compare(states[-1], expected, tolerance)


def check_k_steps(
    d_x: int, d_y: int, n_context: int, batch: int, etas: Sequence[float], gammas: Sequence[float],
    recurrent: bool, with_W0: bool, seed: int, inputs_width: float = 2.0, dtype: torch.dtype = torch.float64,
    tolerance: float = 1e-12,
) -> CheckResult:
    """Query predictions after every layer against explicit GD++ after every step."""
    data, W0 = check_batch(d_x, d_y, n_context, batch, seed, with_W0, inputs_width, dtype)
    model = gdpp_model(d_x, d_y, n_context, etas, gammas, recurrent=recurrent, W0=W0, dtype=dtype)
    want = gdpp_predictions_per_step(data.x_context, data.y_context, data.x_query, etas, gammas, W0)
    return compare(predictions_per_layer(model, data, W0), want, tolerance)


def check_gamma_zero_is_gd(
    d_x: int, d_y: int, n_context: int, batch: int, etas: Sequence[float], with_W0: bool, seed: int,
    dtype: torch.dtype = torch.float64, tolerance: float = 1e-12,
) -> CheckResult:
    """GD++ with γ = 0 is GD: the algorithms' per-step predictions, the layers' products and every token state
    of the two constructed models all agree."""
    data, W0 = check_batch(d_x, d_y, n_context, batch, seed, with_W0, 2.0, dtype)
    zeros = [0.0] * len(etas)
    algo = compare(gdpp_predictions_per_step(data.x_context, data.y_context, data.x_query, etas, zeros, W0),
                   gd_predictions_per_step(data.x_context, data.y_context, data.x_query, etas, W0), tolerance)
    products = []
    for eta in etas:
        pp = gdpp_step_weights(d_x, d_y, n_context, eta, 0.0, W0, dtype=dtype).products()
        gd = gd_step_weights(d_x, d_y, n_context, eta, W0, dtype=dtype).products()
        products += [compare(pp[0], gd[0], tolerance), compare(pp[1], gd[1], tolerance)]
    gdpp_states = states_per_layer(gdpp_model(d_x, d_y, n_context, etas, zeros, W0=W0, dtype=dtype), data, W0)
    gd_states = states_per_layer(gd_model(d_x, d_y, n_context, etas, W0=W0, dtype=dtype), data, W0)
    states = compare(gdpp_states, gd_states, tolerance)
    return merge([algo, states, *products])


def check_read_back(seed: int = 0, tolerance: float = 1e-12) -> CheckResult:
    """``gdpp_params_from_weights`` returns the (η, γ) a construction was built with, in any gauge b (QK · b,
    PV / b) and with several heads."""
    results = []
    for trial, d_x, d_y, n, gen in random_shapes(seed, 10, high=12):
        eta, gamma = float(torch.rand((), generator=gen) * 3), float(torch.rand((), generator=gen) - 0.5)
        b = float(torch.rand((), generator=gen) * 4 + 0.1) * (-1) ** trial
        w = gdpp_step_weights(d_x, d_y, n, eta, gamma, n_heads=1 + trial % 3)
        w = LSAWeights(w.W_Q * b, w.W_K, w.W_V, w.P / b)
        got = torch.tensor(gdpp_params_from_weights(w, d_x, d_y, n), dtype=torch.float64)
        results.append(compare(got, torch.tensor([eta, gamma], dtype=torch.float64), tolerance))
    return merge(results)


def check_eigenbasis(seed: int = 77, tolerance: float = 1e-12) -> CheckResult:
    """K GD++ steps computed in each task's eigenbasis (``icl_gd.regression.spectral``, the tuners' loss) against
    the step-by-step algorithm, from W0 = 0, on random shapes (N < d too) and K = 1..6, every prediction."""
    results = []
    for trial, d_x, d_y, n, gen in random_shapes(seed, 12):
        data, _ = check_batch(d_x, d_y, n, 16, seed + trial, with_W0=False)
        K = 1 + trial % 6
        etas = (torch.rand(K, generator=gen, dtype=torch.float64) + 0.2).tolist()
        gammas = ((torch.rand(K, generator=gen, dtype=torch.float64) - 0.3) / n).tolist()
        x, y, xq = data.x_context, data.y_context, data.x_query
        spectrum = TaskSpectrum.of(x, y, xq)
        results.append(compare(spectral_gdpp_predict(spectrum, etas, gammas),
                               gdpp_predictions_per_step(x, y, xq, etas, gammas)[-1], tolerance))
    return merge(results)


def _random_shapes_check() -> CheckResult:
    results = []
    for trial, d_x, d_y, n, gen in random_shapes(4321, 20):
        eta = float(torch.rand((), generator=gen) * 2)
        gamma = float(torch.rand((), generator=gen) - 0.5) / n
        results.append(check_one_step(d_x, d_y, n, 8, eta, gamma, with_W0=bool(trial % 2), seed=trial,
                                      n_heads=1 + trial % 3))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("gd++: one LSA layer = one GD++ step (random shapes, W0, heads)", _random_shapes_check),
    IdentityCheck(
        "gd++: 5 tied layers = 5 GD++ steps (d=10, N=10)",
        lambda: check_k_steps(10, 1, 10, 64, [0.6] * 5, [0.05] * 5, recurrent=True, with_W0=True, seed=3,
                              inputs_width=1.0),
    ),
    IdentityCheck(
        "gd++: 4 separate layers = 4 steps, per-step (η, γ)",
        lambda: check_k_steps(7, 3, 20, 64, [0.3, 1.1, 0.7, 0.9], [0.02, -0.01, 0.03, 0.0], recurrent=False,
                              with_W0=True, seed=4),
    ),
    IdentityCheck(
        "gd++: γ = 0 is GD (algorithm, products, token states)",
        lambda: check_gamma_zero_is_gd(6, 2, 15, 32, [0.4, 0.9, 0.6], with_W0=True, seed=5),
    ),
    IdentityCheck("gd++: (η, γ) read back from weights in any gauge", check_read_back),
    IdentityCheck("gd++: eigenbasis (the tuners' loss) = step by step (random shapes, K = 1..6)", check_eigenbasis),
)
