"""Interpolating a trained LSA layer with the constructed one (von Oswald et al. 2023, §3, App. A.3).

A layer is identifiable only up to a gauge: the products QK = W_Qᵀ W_K and PV = P W_V are what it computes.
Each trained head is rescaled so the mean of its QK x-diagonal matches the constructed head's (the inverse
scale moves into PV), then the products are averaged with mixing weight α (0 = trained, 1 = constructed).
"""

from __future__ import annotations

import dataclasses

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAModel, LSAWeights


def gauge_fixed_products(trained: LSAWeights, constructed: LSAWeights, d_x: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Trained (QK, PV), each (H, D, D), rescaled per head so mean diag(QK[x, x]) equals the constructed one's."""
    QK, PV = trained.products()
    QK_ref, _ = constructed.products()
    mean_diag = torch.diagonal(QK[:, :d_x, :d_x], dim1=-2, dim2=-1).mean(-1)
    target = torch.diagonal(QK_ref[:, :d_x, :d_x], dim1=-2, dim2=-1).mean(-1)
    if (mean_diag.abs() < 1e-12).any():
        raise ConfigError("cannot gauge-fix: a trained head has a zero QK x-diagonal (an unused head)")
    scale = (target / mean_diag)[:, None, None]
    return QK * scale, PV / scale


def interpolate_weights(trained: LSAWeights, constructed: LSAWeights, alpha: float, d_x: int) -> LSAWeights:
    """Weights whose products are (1-α)·gauge-fixed trained + α·constructed, head by head."""
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"mixing weight must be in [0, 1], got {alpha}")
    if trained.n_heads != constructed.n_heads:
        raise ConfigError(f"trained layer has {trained.n_heads} heads, constructed has {constructed.n_heads}")
    QK_t, PV_t = gauge_fixed_products(trained, constructed, d_x)
    QK_c, PV_c = constructed.to(QK_t.device, QK_t.dtype).products()
    return LSAWeights.from_products((1 - alpha) * QK_t + alpha * QK_c, (1 - alpha) * PV_t + alpha * PV_c)


def interpolate_models(trained: LSAModel, constructed: LSAModel, alpha: float) -> LSAModel:
    """A model whose every distinct layer is ``interpolate_weights`` of the matching trained/constructed layers
    (the input width d_x = d_model - d_y read from the trained model's config)."""
    if len(trained.layers) != len(constructed.layers):
        raise ConfigError(
            f"trained model has {len(trained.layers)} distinct layers, constructed has {len(constructed.layers)}")
    config = dataclasses.replace(trained.config, key_size=None)
    d_x = config.d_model - config.d_y
    param = next(trained.parameters())
    model = LSAModel(config).to(param.device, param.dtype)
    weights = [interpolate_weights(t, c, alpha, d_x) for t, c in zip(trained.weights(), constructed.weights())]
    return model.load_weights(weights)
