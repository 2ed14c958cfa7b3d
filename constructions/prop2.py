"""Proposition 2 (von Oswald et al. 2023): a feature map m followed by the Prop. 1 layer is one GD step on a
linear read-out of m(x), i.e. kernel regression with k(x, x') = m(x)ᵀ m(x').

Tokens (x_i, y_i) become (m(x_i), y_i); the Prop. 1 layer on width d_f + d_y writes -ŷ into the query with

    ŷ = W₀ m(x_q) + (η/N) Σ_i (y_i - W₀ m(x_i)) m(x_i)ᵀ m(x_q)
      = f₀(x_q) + (η/N) Σ_i (y_i - f₀(x_i)) k(x_i, x_q),        f₀ = W₀ m,

one GD step from W₀ on L(W) = 1/(2N) Σ ‖W m(x_i) - y_i‖², read as functional GD in the kernel's feature space.
Any m works (an MLP, random features, a trained model's own features).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from icl_gd.errors import ConfigError
from icl_gd.feature_models import FeatureLSAModel, FeatureMapConfig, MLPFeatureMap
from icl_gd.gd import gd_predict
from icl_gd.lsa import LSAConfig, LSAModel

from .gd import gd_step_weights
from .verify import CheckResult, IdentityCheck, compare, merge

Kernel = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def feature_gd_model(feature_map: nn.Module, d_x: int, d_features: int, d_y: int, n_context: int, eta: float,
                     W0: torch.Tensor | None = None, dtype: torch.dtype = torch.float64) -> FeatureLSAModel:
    """m followed by the Prop. 1 layer (rate η, initial read-out W₀ (d_y, d_f)): one GD step on the read-out."""
    if d_features <= 0 or d_x <= 0 or d_y <= 0 or n_context <= 0:
        raise ConfigError(f"sizes must be positive, got d_x={d_x}, d_features={d_features}, d_y={d_y}, "
                          f"n_context={n_context}")
    lsa = LSAModel(LSAConfig(d_model=d_features + d_y, d_y=d_y)).to(dtype)
    lsa.load_weights(gd_step_weights(d_features, d_y, n_context, eta, W0, dtype=dtype))
    return FeatureLSAModel(feature_map, lsa, d_x, W0=None if W0 is None else W0.to(dtype))


def feature_kernel(feature_map: nn.Module) -> Kernel:
    """k(x, x') = m(x)ᵀ m(x'): maps x (B, N, d_x) and x' (B, d_x) to (B, N)."""
    def kernel(x: torch.Tensor, x_prime: torch.Tensor) -> torch.Tensor:
        return (feature_map(x) @ feature_map(x_prime)[..., None])[..., 0]
    return kernel


def kernel_regression_prediction(
    kernel: Kernel, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, eta: float,
    prior: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """ŷ (B, d_y) = f₀(x_q) + (η/N) Σ_i (y_i - f₀(x_i)) k(x_i, x_q) for x (B, N, d_x), y (B, N, d_y), x_q (B, d_x);
    f₀ (``prior``) maps (..., d_x) -> (..., d_y), zero when None."""
    N = x.shape[1]
    k = kernel(x, x_query)  # (B, N)
    residual = y if prior is None else y - prior(x)
    update = (eta / N) * (residual.transpose(1, 2) @ k[..., None])[..., 0]
    return update if prior is None else prior(x_query) + update


# ---------------------------------------------------------------------------------------------------- checks
def random_mlp(d_x: int, d_features: int, hidden: int, activation: str, seed: int,
               dtype: torch.dtype = torch.float64) -> MLPFeatureMap:
    config = FeatureMapConfig(d_x=d_x, d_features=d_features, hidden=hidden, activation=activation)
    return MLPFeatureMap(config, torch.Generator().manual_seed(seed)).to(dtype)


def check_feature_gd(d_x: int, d_features: int, hidden: int, d_y: int, n_context: int, batch: int, eta: float,
                     activation: str, with_W0: bool, seed: int, dtype: torch.dtype = torch.float64,
                     tolerance: float = 1e-12) -> CheckResult:
    """The model's predictions against (a) explicit GD on the read-out of m and (b) kernel regression."""
    gen = torch.Generator().manual_seed(seed)
    m = random_mlp(d_x, d_features, hidden, activation, seed, dtype)
    x = torch.randn(batch, n_context + 1, d_x, generator=gen, dtype=dtype) * 2
    y = torch.randn(batch, n_context + 1, d_y, generator=gen, dtype=dtype)
    y[:, -1] = 0
    W0 = torch.randn(d_y, d_features, generator=gen, dtype=dtype) * 0.3 if with_W0 else None
    model = feature_gd_model(m, d_x, d_features, d_y, n_context, eta, W0, dtype)
    with torch.no_grad():
        got = model(torch.cat([x, y], dim=-1))
        features = m(x)
        readout_gd = gd_predict(features[:, :-1], y[:, :-1], features[:, -1], [eta], W0)
        prior = None if W0 is None else (lambda inputs: m(inputs) @ W0.T)
        kernel = kernel_regression_prediction(feature_kernel(m), x[:, :-1], y[:, :-1], x[:, -1], eta, prior)
    return merge([compare(got, readout_gd, tolerance), compare(got, kernel, tolerance)])


def _random_mlps_check() -> CheckResult:
    gen = torch.Generator().manual_seed(2024)
    results = []
    for trial in range(12):
        d_x, d_y = (int(v) for v in torch.randint(1, 5, (2,), generator=gen))
        d_f, hidden, n = (int(v) for v in torch.randint(1, 33, (3,), generator=gen))
        eta = float(torch.rand((), generator=gen) * 3)
        activation = ("relu", "gelu", "tanh")[trial % 3]
        results.append(check_feature_gd(d_x, d_f, hidden, d_y, n, 8, eta, activation, bool(trial % 2), trial))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("prop2: MLP + Prop. 1 layer = read-out GD = kernel regr.", _random_mlps_check),
    IdentityCheck(
        "prop2: sine setting, 1 -> 40 features, N=10, W0 = 0",
        lambda: check_feature_gd(1, 40, 160, 1, 10, 64, 0.7, "gelu", with_W0=False, seed=5),
    ),
)
