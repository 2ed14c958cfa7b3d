"""Proposition 1 (von Oswald et al. 2023): one LSA layer with these weights is one GD step.

With W_K = W_Q = [[I_dx, 0], [0, 0]], W_V = [[0, 0], [W0, -I_dy]] and P = (η/N) I, the layer maps every token
(x_j, y_j) to (x_j, y_j - ΔW x_j), ΔW = -(η/N) Σ_i (W0 x_i - y_i) x_iᵀ: one GD step with rate η on
L(W) = 1/(2N) Σ ‖W x_i - y_i‖². Stacking K such layers (tied, or with per-layer η_k) gives K GD steps, since the
context tokens' y slots then hold y_i - (W_k - W0) x_i.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predictions_per_step, gd_weights_per_step
from icl_gd.regression.lsa import LSAConfig, LSAModel, LSAWeights
from icl_gd.regression.tasks import LinearRegressionTask, RegressionBatch, Stream, UniformInputs
from icl_gd.regression.tokens import ConcatLayout

from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge


def gd_step_weights(
    d_x: int, d_y: int, n_context: int, eta: float, W0: torch.Tensor | None = None, n_heads: int = 1,
    dtype: torch.dtype = torch.float64,
) -> LSAWeights:
    """Proposition 1 weights, (H, D, D) blocks with D = d_x + d_y. With ``n_heads`` > 1 each head does η/H."""
    for name, value in (("d_x", d_x), ("d_y", d_y), ("n_context", n_context), ("n_heads", n_heads)):
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    D = d_x + d_y
    W_KQ = torch.zeros(D, D, dtype=dtype)
    W_KQ[:d_x, :d_x] = torch.eye(d_x, dtype=dtype)
    W_V = torch.zeros(D, D, dtype=dtype)
    if W0 is not None:
        if W0.shape != (d_y, d_x):
            raise ConfigError(f"W0 must have shape ({d_y}, {d_x}), got {tuple(W0.shape)}")
        W_V[d_x:, :d_x] = W0.to(dtype)
    W_V[d_x:, d_x:] = -torch.eye(d_y, dtype=dtype)
    P = torch.eye(D, dtype=dtype) * (eta / (n_context * n_heads))

    def heads(m: torch.Tensor) -> torch.Tensor:
        return m.expand(n_heads, D, D).clone()

    return LSAWeights(W_Q=heads(W_KQ), W_K=heads(W_KQ), W_V=heads(W_V), P=heads(P))


def stacked_model(layers: Sequence[LSAWeights], d_y: int, recurrent: bool = False,
                  dtype: torch.dtype = torch.float64) -> LSAModel:
    """An LSA model of len(layers) layers loaded with ``layers`` (each (H, D, D) blocks); ``recurrent``: one tied
    layer applied len(layers) times, which must then all be the same weights (the first is loaded)."""
    if not layers:
        raise ConfigError("a constructed model needs at least one layer")
    config = LSAConfig(d_model=layers[0].W_Q.shape[-1], d_y=d_y, n_layers=len(layers), recurrent=recurrent,
                       n_heads=layers[0].n_heads)
    model = LSAModel(config).to(dtype)
    return model.load_weights(list(layers[:1]) if recurrent else list(layers))


def gd_model(
    d_x: int, d_y: int, n_context: int, etas: Sequence[float], recurrent: bool = False,
    W0: torch.Tensor | None = None, dtype: torch.dtype = torch.float64,
) -> LSAModel:
    """An LSA model doing len(etas) GD steps: tied (one layer, one η) or separate layers (η_k per layer)."""
    etas = list(etas)
    if not etas:
        raise ConfigError("gd_model needs at least one step size")
    if recurrent and len(set(etas)) != 1:
        raise ConfigError(f"a recurrent (tied) model takes one η, got {etas}")
    return stacked_model([gd_step_weights(d_x, d_y, n_context, eta, W0, dtype=dtype) for eta in etas], d_y,
                         recurrent, dtype)


def tokens_with_initial_prediction(tokens: torch.Tensor, d_x: int, W0: torch.Tensor | None) -> torch.Tensor:
    """Put -W0 x_q in the query's y slot, so that reading -slot after the layers gives W_K x_q."""
    if W0 is None:
        return tokens
    tokens = tokens.clone()
    tokens[:, -1, d_x:] = -(tokens[:, -1, :d_x] @ W0.to(tokens).T)
    return tokens


def states_per_layer(model: LSAModel, batch: RegressionBatch, W0: torch.Tensor | None = None) -> torch.Tensor:
    """(L+1, B, N+1, D) token states of a constructed model on ``batch``'s concatenated tokens, before and after
    each of its L layers, with the query's y slot started at -W0 x_q."""
    d_x = batch.x.shape[-1]
    tokens = tokens_with_initial_prediction(ConcatLayout(d_x, batch.y.shape[-1]).tokens(batch), d_x, W0)
    _, states = model(tokens, return_tokens=True)
    return torch.stack(states)


def predictions_per_layer(model: LSAModel, batch: RegressionBatch, W0: torch.Tensor | None = None) -> torch.Tensor:
    """(L+1, B, d_y) query predictions ŷ = -(query's y slot) of ``states_per_layer``."""
    return -states_per_layer(model, batch, W0)[:, :, -1, batch.x.shape[-1]:]


def check_batch(d_x: int, d_y: int, n_context: int, batch: int, seed: int, with_W0: bool, inputs_width: float = 2.0,
                dtype: torch.dtype = torch.float64) -> tuple[RegressionBatch, torch.Tensor | None]:
    """A test batch of regression tasks (inputs U(-width/2, width/2)) and, ``with_W0``, a random small W0."""
    task = LinearRegressionTask(d=d_x, n_context=n_context, d_y=d_y, inputs=UniformInputs(inputs_width))
    data = task.sample(batch, seed=seed, stream=Stream.TEST, dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    W0 = torch.randn(d_y, d_x, generator=gen, dtype=dtype) * 0.1 if with_W0 else None
    return data, W0


# ---------------------------------------------------------------------------------------------------- checks
def check_one_step(
    d_x: int, d_y: int, n_context: int, batch: int, eta: float, with_W0: bool, seed: int,
    dtype: torch.dtype = torch.float64,
) -> CheckResult:
    """Every output token of the Prop. 1 layer against (x_j, y_j - ΔW x_j) computed by explicit GD."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randn(batch, n_context + 1, d_x + d_y, generator=gen, dtype=dtype)
    W0 = torch.randn(d_y, d_x, generator=gen, dtype=dtype) if with_W0 else None
    model = gd_model(d_x, d_y, n_context, [eta], W0=W0, dtype=dtype)
    _, states = model(tokens, return_tokens=True)
    x, y = tokens[..., :d_x], tokens[..., d_x:]
    W_init, W_one = gd_weights_per_step(x[:, :-1], y[:, :-1], [eta], W0)
    delta = W_one - W_init
    expected = torch.cat([x, y - x @ delta.transpose(1, 2)], dim=-1)
    return compare(states[-1], expected, tolerance=1e-12)


def check_k_steps(
    d_x: int, d_y: int, n_context: int, batch: int, etas: Sequence[float], recurrent: bool, with_W0: bool,
    seed: int, inputs_width: float = 2.0, dtype: torch.dtype = torch.float64, tolerance: float = 1e-12,
) -> CheckResult:
    """Query predictions after every layer against explicit GD after every step."""
    data, W0 = check_batch(d_x, d_y, n_context, batch, seed, with_W0, inputs_width, dtype)
    model = gd_model(d_x, d_y, n_context, etas, recurrent=recurrent, W0=W0, dtype=dtype)
    want = gd_predictions_per_step(data.x_context, data.y_context, data.x_query, etas, W0)
    return compare(predictions_per_layer(model, data, W0), want, tolerance)


def authors_demo_check(dtype: torch.dtype = torch.float64, tolerance: float = 1e-12) -> CheckResult:
    """The authors' demo: inputs U(-1, 1), 12 inputs -> 8 outputs, N = 45, η = 1, 100 tied layers = 100 steps."""
    return check_k_steps(12, 8, 45, batch=16, etas=[1.0] * 100, recurrent=True, with_W0=False, seed=7,
                         inputs_width=2.0, dtype=dtype, tolerance=tolerance)


def random_shapes(seed: int, n_trials: int, high: int = 16) -> Iterator[tuple[int, int, int, int, torch.Generator]]:
    """(trial, d_x, d_y, N, generator) for ``n_trials`` random sizes in [1, high), all drawn from one generator,
    which the caller goes on drawing a trial's other parameters from."""
    gen = torch.Generator().manual_seed(seed)
    for trial in range(n_trials):
        d_x, d_y, n = (int(v) for v in torch.randint(1, high, (3,), generator=gen))
        yield trial, d_x, d_y, n, gen


def _random_shapes_check() -> CheckResult:
    results = []
    for trial, d_x, d_y, n, gen in random_shapes(1234, 20):
        eta = float(torch.rand((), generator=gen) * 2)
        results.append(check_one_step(d_x, d_y, n, 8, eta, with_W0=bool(trial % 2), seed=trial))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("prop1: one LSA layer = one GD step (random shapes, W0)", _random_shapes_check),
    IdentityCheck(
        "prop1: 5 tied layers = 5 GD steps (d=10, N=10)",
        lambda: check_k_steps(10, 1, 10, 64, [0.6] * 5, recurrent=True, with_W0=True, seed=3, inputs_width=1.0),
    ),
    IdentityCheck(
        "prop1: 4 separate layers = 4 GD steps with per-step η",
        lambda: check_k_steps(7, 3, 20, 64, [0.3, 1.1, 0.7, 0.9], recurrent=False, with_W0=True, seed=4),
    ),
    IdentityCheck("prop1: authors' demo, 12->8, N=45, η=1, 100 steps", authors_demo_check),
)
