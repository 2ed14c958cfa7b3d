"""Proposition 2 (von Oswald et al. 2023): a feature map m followed by the Prop. 1 layer is one GD step on a
linear read-out of m(x), i.e. kernel regression with k(x, x') = m(x)ᵀ m(x').

Tokens (x_i, y_i) become (m(x_i), y_i); the Prop. 1 layer on width d_f + d_y writes -ŷ into the query with

    ŷ = W₀ m(x_q) + (η/N) Σ_i (y_i - W₀ m(x_i)) m(x_i)ᵀ m(x_q)
      = f₀(x_q) + (η/N) Σ_i (y_i - f₀(x_i)) k(x_i, x_q),        f₀ = W₀ m,

one GD step from W₀ on L(W) = 1/(2N) Σ ‖W m(x_i) - y_i‖², read as functional GD in the kernel's feature space.
Any m works (an MLP, random features, a trained model's own features). On a trained model (``FeatureLSAModel``)
the construction reads the model's own m and W₀ (``prop2_on_features``), and its layer's GD-like term gives the
kernel matrix S it actually uses (``trained_readout_kernel``, made PSD by ``psd_part``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.regression.sine.features import (EmbeddedTokenLSAModel, FeatureLSAModel, FeatureMapConfig, MetaLearnedReadout,
                                   MLPFeatureMap, embedded_token_lsa_model)
from icl_gd.regression.gd import gd_predict, optimal_one_step_eta
from icl_gd.regression.lsa import LSAConfig, LSAModel, LSAWeights

from icl_gd.constructions.prop1 import gd_step_weights
from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge

Kernel = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def feature_gd_model(feature_map: nn.Module, d_x: int, d_features: int, d_y: int, n_context: int, eta: float,
                     W0: torch.Tensor | None = None, metric: torch.Tensor | None = None,
                     dtype: torch.dtype = torch.float64) -> FeatureLSAModel:
    """m followed by the Prop. 1 layer (rate η, initial read-out W₀ (d_y, d_f)): one GD step on the read-out.

    With ``metric`` S (d_f, d_f, symmetric PSD) the query's weights become S (W_Q's feature block), so the scores
    are m(x_i)ᵀ S m(x_q): one GD step in the kernel k(x, x') = m(x)ᵀ S m(x') (GD on the read-out of S^{1/2} m),
    started from the function f₀ = W₀ m.
    """
    if d_features <= 0 or d_x <= 0 or d_y <= 0 or n_context <= 0:
        raise ConfigError(f"sizes must be positive, got d_x={d_x}, d_features={d_features}, d_y={d_y}, "
                          f"n_context={n_context}")
    weights = gd_step_weights(d_features, d_y, n_context, eta, W0, dtype=dtype)
    if metric is not None:
        if metric.shape != (d_features, d_features):
            raise ConfigError(f"metric must have shape ({d_features}, {d_features}), got {tuple(metric.shape)}")
        W_Q = weights.W_Q.clone()
        W_Q[0, :d_features, :d_features] = metric.to(dtype)
        weights = LSAWeights(W_Q, weights.W_K, weights.W_V, weights.P)
    lsa = LSAModel(LSAConfig(d_model=d_features + d_y, d_y=d_y)).to(dtype)
    lsa.load_weights(weights)
    return FeatureLSAModel(feature_map, lsa, d_x, W0=None if W0 is None else W0.to(dtype))


def feature_kernel(feature_map: nn.Module, metric: torch.Tensor | None = None) -> Kernel:
    """k(x, x') = m(x)ᵀ S m(x') (S = I when None): maps x (B, N, d_x) and x' (B, d_x) to (B, N)."""
    def kernel(x: torch.Tensor, x_prime: torch.Tensor) -> torch.Tensor:
        query = feature_map(x_prime)
        if metric is not None:
            query = query @ metric.T.to(query)
        return (feature_map(x) @ query[..., None])[..., 0]
    return kernel


def kernel_regression_prediction(
    kernel: Kernel, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, eta: float,
    prior: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """ŷ (B, d_y) = f₀(x_q) + (η/N) Σ_i (y_i - f₀(x_i)) k(x_i, x_q) for x (B, N, d_x), y (B, N, d_y), x_q (B, d_x);
    f₀ (``prior``) maps (..., d_x) -> (..., d_y), zero when None."""
    base, direction = _kernel_step(kernel, x, y, x_query, prior)
    return base + eta * direction


def _kernel_step(kernel: Kernel, x, y, x_query, prior) -> tuple[torch.Tensor, torch.Tensor]:
    """(f₀(x_q), (1/N) Σ_i (y_i - f₀(x_i)) k(x_i, x_q)), each (B, d_y): the step is ŷ = first + η · second."""
    k = kernel(x, x_query)  # (B, N)
    residual = y if prior is None else y - prior(x)
    direction = (residual.transpose(1, 2) @ k[..., None])[..., 0] / x.shape[1]
    base = torch.zeros_like(direction) if prior is None else prior(x_query)
    return base, direction


def optimal_kernel_eta(kernel: Kernel, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor,
                       y_query: torch.Tensor, prior: Callable[[torch.Tensor], torch.Tensor] | None = None) -> float:
    """The η minimising the mean one-step query loss on the given (held-out) tasks, in closed form:
    ŷ = a + η g is linear in η, so η* = Σ g·(y_q - a) / Σ g·g."""
    with torch.no_grad():
        a, g = (t.double() for t in _kernel_step(kernel, x, y, x_query, prior))
    denom = (g * g).sum()
    if not denom > 0:
        raise ConfigError("cannot tune η: the kernel step direction is zero on every task")
    return float((g * (y_query.double() - a)).sum() / denom)


# ---------------------------------------------------------------------------------------------------- trained features
def trained_readout_kernel(model: FeatureLSAModel) -> torch.Tensor:
    """S (d_f, d_f), float64: the kernel matrix of a one-output model's GD-like term, ŷ ⊃ Σ_i y_i m_iᵀ S m_q.

    The query's y slot gains Σ_h Σ_i (PV_h e_i)_y (e_iᵀ KQ_h e_q); its y_i·m_i·m_q part is
    Σ_h PV_h[y, y] m_iᵀ KQ_h[m, m] m_q, and ŷ is minus the slot.
    """
    d_y = model.lsa.config.d_y
    if d_y != 1:
        raise ConfigError(f"the read-out kernel is defined for one output, the model has d_y = {d_y}")
    d_f = model.lsa.config.d_model - d_y
    S = 0
    for w in model.lsa.weights():
        QK, PV = w.products()  # e_qᵀ QK_h e_i is the score, so KQ_h = QK_hᵀ
        S = S - (PV[:, d_f, d_f][:, None, None] * QK[:, :d_f, :d_f].transpose(-1, -2)).sum(0)
    return S.double()


def psd_part(S: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(S₊ (d, d), share of |eigenvalue| mass lost): the PSD part of the symmetric part of S (d, d), so that
    m(x)ᵀ S₊ m(x') is a kernel."""
    evals, evecs = torch.linalg.eigh(0.5 * (S + S.T))
    lost = float(evals.clamp_max(0).abs().sum() / evals.abs().sum().clamp_min(1e-300))
    return (evecs * evals.clamp_min(0)) @ evecs.T, lost


def prop2_on_features(model: FeatureLSAModel, tune_tokens: torch.Tensor, tune_targets: torch.Tensor,
                      metric: torch.Tensor | None = None) -> tuple[FeatureLSAModel, float]:
    """(the Prop. 2 model on ``model``'s feature map m and initial read-out W₀, its η): kernel mᵀ S m' (S =
    ``metric`` (d_f, d_f) or I), η tuned in closed form on held-out tasks, tokens (B, N+1, d_x + d_y) and targets
    (B, d_y). N comes from the tokens, d_f from the model; the model is built in the tokens' dtype and device."""
    n_context = tune_tokens.shape[1] - 1
    d_x, d_y = model.d_x, model.lsa.config.d_y
    d_features = model.lsa.config.d_model - d_y
    m = model.feature_map
    W0 = None if model.W0 is None else model.W0.detach()
    prior = None if W0 is None else (lambda inputs: m(inputs) @ W0.T)
    x, y, x_query = tune_tokens[:, :-1, :d_x], tune_tokens[:, :-1, d_x:], tune_tokens[:, -1, :d_x]
    eta = optimal_kernel_eta(feature_kernel(m, metric), x, y, x_query, tune_targets, prior)
    built = feature_gd_model(m, d_x, d_features, d_y, n_context, eta, W0, metric, dtype=tune_tokens.dtype)
    return built.to(tune_tokens.device), eta


def tuned_readout_eta(model: MetaLearnedReadout, tune_tokens: torch.Tensor, tune_targets: torch.Tensor) -> float:
    """The meta-learned baseline's one-step η re-tuned in closed form (its m and W₀ fixed) on held-out tasks,
    tokens (B, N+1, d_x + d_y) and targets (B, d_y)."""
    with torch.no_grad():
        m_context, y_context, m_query = model.features(tune_tokens)
    return optimal_one_step_eta(m_context, y_context, m_query, tune_targets, W0=model.W0.detach())


class TunedReadout(nn.Module):
    """The meta-learned baseline evaluated with a fixed (re-tuned) η: tokens (B, N+1, D) -> ŷ (B, d_y)."""

    def __init__(self, model: MetaLearnedReadout, eta: float) -> None:
        super().__init__()
        self.model, self.eta = model, eta

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model.predict(tokens, self.eta)


# ---------------------------------------------------------------------------------------------------- whole tokens
def frozen_gd_baseline(width: int, hidden: int, n_context: int, eta: float, d_in: int = 2, activation: str = "gelu",
                       seed: int = 0, init_scale: float = 0.002, authors_init: bool = False) -> EmbeddedTokenLSAModel:
    """The authors' sine baseline: the whole-token embedding + MLP (trainable) followed by the Prop. 1 layer on its
    width, frozen: the first width-1 coordinates act as features m, the last as the label slot, P = η/N. The layer
    then takes one GD step of rate η on a linear read-out of m, from the initial prediction -e_q[-1].
    ``authors_init``: the embedding + MLP start as the authors' baseline does (``authors_baseline_init_``), not as
    the trained model."""
    model = embedded_token_lsa_model(width, hidden, d_in, activation, seed, init_scale)
    if authors_init:
        model.embedding.authors_baseline_init_(torch.Generator().manual_seed(seed + 2))
    set_frozen_eta(model, n_context, eta)
    return model


def set_frozen_eta(model: EmbeddedTokenLSAModel, n_context: int, eta: float) -> EmbeddedTokenLSAModel:
    """Load the Prop. 1 weights (rate η) into ``model``'s single LSA layer and freeze them."""
    width = model.lsa.config.d_model
    dtype = next(model.parameters()).dtype
    model.lsa.load_weights(gd_step_weights(width - 1, 1, n_context, eta, dtype=dtype))
    for p in model.lsa.parameters():
        p.requires_grad_(False)
    return model


def tune_frozen_eta(model: EmbeddedTokenLSAModel, tune_tokens: torch.Tensor, tune_targets: torch.Tensor) -> float:
    """The η of ``model``'s Prop. 1 layer minimising the mean query loss on held-out tasks (tokens (B, T, d_in),
    targets (B, 1)), its embedding fixed: ŷ = a + η g is affine in η (P = η/N), so η* = Σ g·(y - a) / Σ g·g."""
    n_context = tune_tokens.shape[1] - 1
    probe = copy.deepcopy(model)
    with torch.no_grad():
        a = set_frozen_eta(probe, n_context, 0.0)(tune_tokens).double()
        g = set_frozen_eta(probe, n_context, 1.0)(tune_tokens).double() - a
    denom = (g * g).sum()
    if not denom > 0:
        raise ConfigError("cannot tune η: the GD step direction is zero on every task")
    return float((g * (tune_targets.double() - a)).sum() / denom)


# ---------------------------------------------------------------------------------------------------- checks
def random_mlp(d_x: int, d_features: int, hidden: int, activation: str, seed: int,
               dtype: torch.dtype = torch.float64) -> MLPFeatureMap:
    config = FeatureMapConfig(d_x=d_x, d_features=d_features, hidden=hidden, activation=activation)
    return MLPFeatureMap(config, torch.Generator().manual_seed(seed)).to(dtype)


def check_feature_gd(d_x: int, d_features: int, hidden: int, d_y: int, n_context: int, batch: int, eta: float,
                     activation: str, with_W0: bool, seed: int, with_metric: bool = False,
                     dtype: torch.dtype = torch.float64, tolerance: float = 1e-12) -> CheckResult:
    """The model's predictions against (a) explicit GD on the read-out of m (of S^{1/2} m with a metric S, from
    the same f₀) and (b) kernel regression."""
    gen = torch.Generator().manual_seed(seed)
    m = random_mlp(d_x, d_features, hidden, activation, seed, dtype)
    x = torch.randn(batch, n_context + 1, d_x, generator=gen, dtype=dtype) * 2
    y = torch.randn(batch, n_context + 1, d_y, generator=gen, dtype=dtype)
    y[:, -1] = 0
    W0 = torch.randn(d_y, d_features, generator=gen, dtype=dtype) * 0.3 if with_W0 else None
    S = None
    if with_metric:
        A = torch.randn(d_features, d_features, generator=gen, dtype=dtype)
        S = A @ A.T / d_features
    model = feature_gd_model(m, d_x, d_features, d_y, n_context, eta, W0, S, dtype)
    with torch.no_grad():
        got = model(torch.cat([x, y], dim=-1))
        features = m(x)
        prior = None if W0 is None else (lambda inputs: m(inputs) @ W0.T)
        if S is None:
            readout_gd = gd_predict(features[:, :-1], y[:, :-1], features[:, -1], [eta], W0)
        else:  # GD on the read-out of L m, S = Lᵀ L, from W = 0, on the residuals of f₀
            evals, evecs = torch.linalg.eigh(S)
            L = (evecs * evals.clamp_min(0).sqrt()) @ evecs.T
            lifted = features @ L.T
            residual = y[:, :-1] if prior is None else y[:, :-1] - prior(x[:, :-1])
            readout_gd = gd_predict(lifted[:, :-1], residual, lifted[:, -1], [eta])
            if prior is not None:
                readout_gd = readout_gd + prior(x[:, -1])
        kernel = kernel_regression_prediction(feature_kernel(m, S), x[:, :-1], y[:, :-1], x[:, -1], eta, prior)
    return merge([compare(got, readout_gd, tolerance), compare(got, kernel, tolerance)])


def _random_mlps_check() -> CheckResult:
    gen = torch.Generator().manual_seed(2024)
    results = []
    for trial in range(12):
        d_x, d_y = (int(v) for v in torch.randint(1, 5, (2,), generator=gen))
        d_f, hidden, n = (int(v) for v in torch.randint(1, 33, (3,), generator=gen))
        eta = float(torch.rand((), generator=gen) * 3)
        activation = ("relu", "gelu", "tanh")[trial % 3]
        results.append(check_feature_gd(d_x, d_f, hidden, d_y, n, 8, eta, activation, bool(trial % 2), trial,
                                        with_metric=trial % 4 >= 2))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("prop2: MLP + Prop. 1 layer = read-out GD = kernel regr.", _random_mlps_check),
    IdentityCheck(
        "prop2: sine setting, 1 -> 40 features, N=10, W0 = 0",
        lambda: check_feature_gd(1, 40, 160, 1, 10, 64, 0.7, "gelu", with_W0=False, seed=5),
    ),
    IdentityCheck(
        "prop2: kernel mᵀSm' (PSD metric S) from f₀ = W₀ m",
        lambda: check_feature_gd(2, 24, 48, 2, 12, 32, 0.9, "tanh", with_W0=True, seed=6, with_metric=True),
    ),
)
