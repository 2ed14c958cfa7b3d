"""A trained linear-attention layer read in the closed forms' terms: the preconditioner Γ (d, d) it applies, exactly
from its weights, and the layer ŷ = x_qᵀ Γ h as a predictor under the one call (tokens in, ŷ out).

One LSA layer (``icl_gd.regression.lsa``, concatenated tokens e_i = (x_i, y_i), query (x_q, 0), ŷ minus the query's
y slot after the layer, no 1/N) predicts, per head h with QK_h = W_Qᵀ W_K and PV_h = P W_V (D = d + 1, y the last
coordinate),

    ŷ = - Σ_h Σ_i (PV_h[y, :] e_i) (e_qᵀ QK_h e_i)
      = x_qᵀ Γ h̄  +  r,     h̄ = (1/N) Σ_i y_i x_i,
    Γ = -N Σ_h (PV_h[y, y] QK_h[x, x] + QK_h[x, y] PV_h[y, x]),

where r collects the terms without exactly one label, -Σ_h Σ_i (PV_h[y, x]·x_i)(x_qᵀ QK_h[x, x] x_i) and
-Σ_h PV_h[y, y] Σ_i y_i² x_qᵀ QK_h[x, y]: both even in the task w while the target and the Γ term are odd, so on
any law with w symmetric the layer's expected loss is R(Γ) + ½ E r² exactly (R the closed form of
``one_layer.lsa_risk``). ``remainder_loss`` is that ½ E r² on given tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from icl_gd.core.config import require_positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.tokens import ConcatLayout


def lsa_preconditioner(weights: LSAWeights | Sequence[LSAWeights], d: int, n_context: int) -> torch.Tensor:
    """Γ (d, d), float64, of one LSA layer's ``weights`` (a one-layer model's list of one is accepted) on
    concatenated tokens with d inputs and one label, trained on contexts of N = ``n_context`` pairs (the module
    docstring). A layer of several layers, or of d_y > 1, is refused: Γ is one layer's, one label's."""
    if isinstance(weights, Sequence):
        if len(weights) != 1:
            raise ConfigError(f"Γ is read off one layer; the model has {len(weights)}")
        weights = weights[0]
    require_positive_int("d", d)
    require_positive_int("n_context", n_context)
    qk, pv = (t.double() for t in weights.products())
    if qk.shape[-1] != d + 1:
        raise ConfigError(f"the layer's tokens have width {qk.shape[-1]}, not d + 1 = {d + 1} (one label)")
    y = d
    gamma = pv[:, y, y, None, None] * qk[:, :d, :d] + qk[:, :d, y, None] * pv[:, y, None, :d]
    return -n_context * gamma.sum(0)


class PreconditionedStepPredictor(nn.Module):
    """ŷ = x_qᵀ Γ h, h = (1/M) Σ_i y_i x_i over the prompt's own M context pairs (Zhang, Frei & Bartlett's layer;
    Γ = η I is one GD step from 0): tokens (B, M+1, d+1) -> ŷ (B, 1), float64 inside. ``context_sum``: h without the
    1/M but with 1/``context_sum`` fixed instead, the project's LSA layer (which sums) trained on that length."""

    def __init__(self, gamma: torch.Tensor, layout: ConcatLayout, context_sum: int | None = None) -> None:
        super().__init__()
        if gamma.ndim != 2 or gamma.shape != (layout.d_x, layout.d_x) or layout.d_y != 1:
            raise ConfigError(f"Γ must be (d, d) = ({layout.d_x}, {layout.d_x}) for one label, got "
                              f"{tuple(gamma.shape)}")
        if context_sum is not None:
            require_positive_int("context_sum", context_sum)
        self.gamma, self.layout, self.context_sum = gamma.double(), layout, context_sum

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, x_query = (t.double() for t in self.layout.split(tokens))
        h = (y * x).sum(1) / (self.context_sum or x.shape[1])  # (B, d)
        return ((x_query @ self.gamma.to(tokens.device)) * h).sum(-1, keepdim=True).to(tokens.dtype)


def remainder_loss(model: nn.Module, gamma: torch.Tensor, layout: ConcatLayout, tokens: torch.Tensor,
                   n_context: int) -> float:
    """½ mean r² over ``tokens`` (B, N+1, d+1): the part of ``model``'s prediction that is not x_qᵀ Γ h, the
    layer's loss above R(Γ) on a law with symmetric w (the module docstring). 0 for a layer with no r."""
    with torch.no_grad():
        reference = PreconditionedStepPredictor(gamma, layout, context_sum=n_context)(tokens).double()
        return 0.5 * float(((model(tokens).double() - reference) ** 2).mean())
