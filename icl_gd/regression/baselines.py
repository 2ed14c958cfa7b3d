"""Baselines. Every predictor, baseline or model, answers one call (``icl_gd.regression.metrics.Predictor``): tokens
(B, T, D) in, ŷ (B, d_y) out.

Baselines read the context back from the tokens through their layout's ``split``, so a constructed LSA model, a
trained one and explicit GD are compared by one loop (and differentiated by one autograd call for input
sensitivities). The GD and GD++ references (``GDPredictor``, ``GDPPPredictor``) compute in float64 whatever the
tokens' dtype (ŷ is returned in it): the reference is the yardstick, so its numbers carry no float32 round-off,
whose size grows with the step sizes (tuned per-step η reach the hundreds at K = 4).

Ridge regression's direct solve (``ridge_solve``) is the one both ``RidgePredictor`` and the ridge weights on every
prefix (``icl_gd.regression.online.algorithms.ridge_weights_per_prefix``) use; its λ is tuned on a grid
(``tune_ridge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import GDPPParams, gd_predict, gdpp_predictions_per_step
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.tasks import RegressionBatch
from icl_gd.regression.tokens import ConcatLayout

RIDGE_GRID = tuple(10.0 ** (k / 4) for k in range(-32, 9))  # λ from 1e-8 to 100, four per decade


class ContextLayout(Protocol):
    """A token layout that reads a task back from its tokens (``ConcatLayout``, ``SeparateLayout``)."""

    def split(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_context (B, N, d_x), y_context (B, N, d_y), x_query (B, d_x))."""
        ...


def _split_float64(layout: ContextLayout, tokens: torch.Tensor, W0: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(x_context, y_context, x_query, W0) of ``tokens``, all float64."""
    x, y, x_query = (t.double() for t in layout.split(tokens))
    return x, y, x_query, None if W0 is None else W0.double()


class GDPredictor(nn.Module):
    """K explicit GD steps (step sizes ``etas``) from W0 (d_y, d_x) on each task's context, then ŷ = W_K x_q
    (B, d_y), read from tokens of any ``layout``; float64 inside."""

    def __init__(self, layout: ContextLayout, etas: Sequence[float], W0: torch.Tensor | None = None) -> None:
        super().__init__()
        if len(etas) == 0:
            raise ConfigError("GDPredictor needs at least one step size")
        self.layout = layout
        self.etas = [float(e) for e in etas]
        self.W0 = W0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, x_query, W0 = _split_float64(self.layout, tokens, self.W0)
        return gd_predict(x, y, x_query, self.etas, W0).to(tokens.dtype)


class GDPPPredictor(nn.Module):
    """K GD++ steps (``params``) from W0 (d_y, d_x) on each task's context, read from tokens of any ``layout``:
    tokens (B, T, D) -> ŷ (B, d_y); float64 inside. ``clip``: every token coordinate clamped to ±clip after each
    step (``gd.gdpp_predictions_per_step``; W0 = 0 only), as the authors run GD++ beside a clipped model."""

    def __init__(self, layout: ContextLayout, params: GDPPParams, W0: torch.Tensor | None = None,
                 clip: float | None = None) -> None:
        super().__init__()
        if clip is not None and not (clip > 0 and W0 is None):
            raise ConfigError(f"a clipped GD++ predictor needs clip > 0 and W0 = 0, got clip {clip!r}")
        self.layout = layout
        self.params = params
        self.W0 = W0
        self.clip = clip

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_step(tokens)[-1]

    def predictions_per_step(self, tokens: torch.Tensor) -> torch.Tensor:
        """(K+1, B, d_y) predictions after each of k = 0..K steps."""
        x, y, x_query, W0 = _split_float64(self.layout, tokens, self.W0)
        etas, gammas = self.params.etas, self.params.gammas
        return gdpp_predictions_per_step(x, y, x_query, etas, gammas, W0, self.clip).to(tokens.dtype)


class InFloat64(nn.Module):
    """Any predictor run in float64 on tokens of any dtype (ŷ (B, d_y) returned in the tokens' dtype): constructed
    references computed without float32 round-off, still differentiable for sensitivities."""

    def __init__(self, predictor: nn.Module) -> None:
        super().__init__()
        self.predictor = predictor.double()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictor(tokens.double()).to(tokens.dtype)


class LeastSquaresPredictor(nn.Module):
    """Minimum-norm least squares on the context: W = Y X⁺."""

    def __init__(self, layout: ContextLayout) -> None:
        super().__init__()
        self.layout = layout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, xq = self.layout.split(tokens)
        w = torch.linalg.pinv(x) @ y  # (B, d, d_y)
        return (xq[:, None, :] @ w)[:, 0]


def ridge_solve(gram: torch.Tensor, moment: torch.Tensor, lam: float) -> torch.Tensor:
    """Ridge regression's weights (G + λ I)⁻¹ M (..., d, k), by a direct solve, from the Gram G = Σ x xᵀ
    (..., d, d) and the moment M = Σ x yᵀ (..., d, k) of a context (k = d_y)."""
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    return torch.linalg.solve(gram + lam * eye, moment)


class RidgePredictor(nn.Module):
    """Ridge regression: w = (XᵀX + λ I)⁻¹ Xᵀ y (``ridge_solve``)."""

    def __init__(self, layout: ContextLayout, lam: float) -> None:
        super().__init__()
        if not lam > 0:
            raise ConfigError(f"ridge λ must be positive, got {lam!r}")
        self.layout = layout
        self.lam = float(lam)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, xq = self.layout.split(tokens)
        w = ridge_solve(x.transpose(1, 2) @ x, x.transpose(1, 2) @ y, self.lam)  # (B, d, d_y)
        return (xq[:, None, :] @ w)[:, 0]


def tune_ridge(x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor,
               grid: Sequence[float] = RIDGE_GRID) -> float:
    """The λ of ``grid`` whose ridge regression has the least mean query loss on the given (held-out) tasks x
    (B, N, d), y (B, N, d_y), x_query (B, d), y_query (B, d_y)."""
    layout = ConcatLayout(x.shape[-1], y.shape[-1])
    tokens = layout.tokens(RegressionBatch(torch.cat([x, x_query[:, None]], 1), torch.cat([y, y_query[:, None]], 1),
                                           x.new_zeros(0)))
    with torch.no_grad():
        losses = [float(query_loss(RidgePredictor(layout, lam)(tokens), y_query)) for lam in grid]
    return grid[min(range(len(grid)), key=losses.__getitem__)]


class ZeroPredictor(nn.Module):
    """ŷ = 0 (the loss of predicting nothing; 0.5 d / 12 for the default task)."""

    def __init__(self, layout: ConcatLayout) -> None:
        super().__init__()
        self.layout = layout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # Multiplying by zero (instead of torch.zeros) keeps the graph, so sensitivities are defined (zero).
        return tokens[:, -1, : self.layout.d_y] * 0.0
