"""The mesa layer (von Oswald et al. 2023, "Uncovering mesa-optimization algorithms in Transformers"): a layer whose
fast weights solve a regularised least-squares problem on the keys and values seen so far, exactly, at every token.

The context tokens e_t (D) write keys k_t = W_K e_t (d_k) and values v_t = W_V e_t (d_v); after t tokens the fast
weights are the ridge solution

    Φ_t = argmin_Φ ½ Σ_{s≤t} ‖v_s - Φ k_s‖² + (λ/2) ‖Φ‖²_F = Z_t P_t,   Z_t = Σ_{s≤t} v_s k_sᵀ,
    P_t = (Σ_{s≤t} k_s k_sᵀ + λ I)⁻¹,

kept by the Sherman-Morrison recurrence (recursive least squares), never by a solve:

    P_0 = I / λ,   P_t = P_{t-1} - P_{t-1} k_t k_tᵀ P_{t-1} / (1 + k_tᵀ P_{t-1} k_t),   Z_t = Z_{t-1} + v_t k_tᵀ.

The regulariser is written here as (λ/2)‖Φ‖²_F; the paper's own parametrisation of it is not restated. The last
token is the query: it reads ŷ = Φ_N q, q = W_Q e_{N+1}, and writes nothing (a language model's layer reads Φ_t q_t
at every position). Shapes: B tasks, N context tokens, D token width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.core.config import require_positive
from icl_gd.core.errors import ConfigError


@dataclass(frozen=True)
class MesaWeights:
    """W_Q (d_k, D), W_K (d_k, D), W_V (d_v, D) and the regulariser λ > 0."""

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    lam: float

    def __post_init__(self) -> None:
        require_positive("the mesa layer's regulariser λ", self.lam)
        if (self.W_K.ndim != 2 or self.W_Q.shape != self.W_K.shape or self.W_V.ndim != 2
                or self.W_V.shape[-1] != self.W_K.shape[-1]):
            raise ConfigError(f"mesa weights need W_Q and W_K (d_k, D), W_V (d_v, D), got {tuple(self.W_Q.shape)}, "
                              f"{tuple(self.W_K.shape)}, {tuple(self.W_V.shape)}")


def mesa_fast_weights(keys: torch.Tensor, values: torch.Tensor, lam: float) -> torch.Tensor:
    """(N+1, B, d_v, d_k) fast weights Φ_0 = 0, ..., Φ_N = Z_t P_t by the Sherman-Morrison recurrence (module
    docstring), from keys (B, N, d_k) and values (B, N, d_v)."""
    require_positive("the mesa layer's regulariser λ", lam)
    B, N, d_k = keys.shape
    P = torch.eye(d_k, dtype=keys.dtype, device=keys.device).expand(B, d_k, d_k) / lam
    Z = keys.new_zeros(B, values.shape[-1], d_k)
    out = [Z @ P]
    for t in range(N):
        k, v = keys[:, t, :, None], values[:, t, :, None]  # (B, d_k, 1), (B, d_v, 1)
        Pk = P @ k  # P symmetric: kᵀ P = (P k)ᵀ
        P = P - Pk @ Pk.transpose(1, 2) / (1 + k.transpose(1, 2) @ Pk)
        Z = Z + v @ k.transpose(1, 2)
        out.append(Z @ P)
    return torch.stack(out)


class MesaLayer(nn.Module):
    """The mesa layer of the module docstring: tokens (B, N+1, D), the query last, -> ŷ = Φ_N q (B, d_v). Any dtype
    and device: the weights follow the tokens."""

    def __init__(self, weights: MesaWeights) -> None:
        super().__init__()
        self.weights = weights

    def _project(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        w = self.weights
        if tokens.ndim != 3 or tokens.shape[-1] != w.W_K.shape[-1] or tokens.shape[1] < 1:
            raise ConfigError(f"the mesa layer reads tokens (B, N+1, {w.W_K.shape[-1]}), got {tuple(tokens.shape)}")
        context = tokens[:, :-1]
        return context @ w.W_K.to(tokens).T, context @ w.W_V.to(tokens).T, tokens[:, -1] @ w.W_Q.to(tokens).T

    def fast_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v, d_k) fast weights Φ_0, ..., Φ_N."""
        keys, values, _ = self._project(tokens)
        return mesa_fast_weights(keys, values, self.weights.lam)

    def predictions_per_token(self, tokens: torch.Tensor) -> torch.Tensor:
        """(N+1, B, d_v) read-outs Φ_t q after t = 0..N context tokens."""
        keys, values, query = self._project(tokens)
        return (mesa_fast_weights(keys, values, self.weights.lam) @ query[None, :, :, None])[..., 0]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictions_per_token(tokens)[-1]
