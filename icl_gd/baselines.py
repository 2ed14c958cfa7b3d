"""Baselines. Every predictor, baseline or model, answers one call: tokens (B, T, D) in, ŷ (B, d_y) out.

Baselines read the context back from the concatenated layout, so a constructed LSA model, a trained one and
explicit GD are compared by one loop (and differentiated by one autograd call for input sensitivities).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import nn

from .errors import ConfigError
from .gd import gd_predict
from .tokens import ConcatLayout


class Predictor(Protocol):
    def __call__(self, tokens: torch.Tensor) -> torch.Tensor: ...


class GDPredictor(nn.Module):
    """K explicit GD steps (step sizes ``etas``) from W0 on each task's context, then W_K x_q; computed in float64
    whatever the tokens' dtype (ŷ comes back in it), like every reference algorithm (see ``GDPPPredictor``)."""

    def __init__(self, layout: ConcatLayout, etas: Sequence[float], W0: torch.Tensor | None = None) -> None:
        super().__init__()
        if len(etas) == 0:
            raise ConfigError("GDPredictor needs at least one step size")
        self.layout = layout
        self.etas = [float(e) for e in etas]
        self.W0 = W0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, xq = (t.double() for t in self.layout.split(tokens))
        W0 = None if self.W0 is None else self.W0.double()
        return gd_predict(x, y, xq, self.etas, W0).to(tokens.dtype)


class LeastSquaresPredictor(nn.Module):
    """Minimum-norm least squares on the context: W = Y X⁺."""

    def __init__(self, layout: ConcatLayout) -> None:
        super().__init__()
        self.layout = layout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, xq = self.layout.split(tokens)
        w = torch.linalg.pinv(x) @ y  # (B, d, d_y)
        return (xq[:, None, :] @ w)[:, 0]


class RidgePredictor(nn.Module):
    """Ridge regression: w = (XᵀX + λ I)⁻¹ Xᵀ y."""

    def __init__(self, layout: ConcatLayout, lam: float) -> None:
        super().__init__()
        if not lam > 0:
            raise ConfigError(f"ridge λ must be positive, got {lam!r}")
        self.layout = layout
        self.lam = float(lam)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, xq = self.layout.split(tokens)
        eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
        w = torch.linalg.solve(x.transpose(1, 2) @ x + self.lam * eye, x.transpose(1, 2) @ y)
        return (xq[:, None, :] @ w)[:, 0]


class ZeroPredictor(nn.Module):
    """ŷ = 0 (the loss of predicting nothing; 0.5 d / 12 for the default task)."""

    def __init__(self, layout: ConcatLayout) -> None:
        super().__init__()
        self.layout = layout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # Multiplying by zero (instead of torch.zeros) keeps the graph, so sensitivities are defined (zero).
        return tokens[:, -1, : self.layout.d_y] * 0.0
