"""Linear probes of a causal model's residual stream, per layer and per position (von Oswald et al. 2023b, §4: what
a linear read-out of each layer's tokens recovers of the mesa-optimizer's quantities).

Two targets at every position t, from the tokens s_1..s_{t+1} of a sequence:

- the next token s_{t+1} (what the model is trained to predict);
- the preconditioned input (G_t + λ I)⁻¹ s_t, G_t = Σ_{i<t} s_i s_iᵀ: what ridge regression on the pairs so far
  multiplies by M_t = Σ_{i<t} s_{i+1} s_iᵀ to predict (``referees.RidgeReferee``), the mesa layer's query after its
  inverse.

A probe is an affine map fitted by least squares (a ridge of ``PROBE_RIDGE`` for conditioning) from a layer's token
at position t to the target at t, one probe per (layer, position), on probe-fitting sequences; it is scored on
other sequences by R²_t = 1 - Σ ‖ŷ - y‖² / Σ ‖y - ȳ‖² (sums over sequences and coordinates, ȳ the mean target at
t). Shapes: B sequences, T positions, D a token's width, d the sequence's.
"""

from __future__ import annotations

import torch

from icl_gd.core.config import require_positive
from icl_gd.core.errors import ConfigError
from icl_gd.regression.sequence.referees import pair_moments

F64 = torch.float64
PROBE_RIDGE = 1e-8  # relative to the mean squared feature: conditioning only
TARGETS = ("next_token", "preconditioned")


def probe_targets(inputs: torch.Tensor, targets: torch.Tensor, lam: float) -> dict[str, torch.Tensor]:
    """{"next_token": targets, "preconditioned": (G_t + λI)⁻¹ s_t}, each (B, T, d), from inputs and targets (B, T, d)."""
    require_positive("the probes' λ", lam)
    phi, G, _ = pair_moments(inputs.to(F64))
    eye = torch.eye(phi.shape[-1], dtype=F64, device=phi.device)
    return {"next_token": targets.to(F64),
            "preconditioned": torch.linalg.solve(G + lam * eye, phi[..., None])[..., 0]}


def fit_probes(features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(T, D + 1, d) one affine probe per position from features (B, T, D) to targets (B, T, d) (the last row the
    bias)."""
    if features.shape[:2] != targets.shape[:2]:
        raise ConfigError(f"features {tuple(features.shape)} and targets {tuple(targets.shape)} differ in (B, T)")
    x = torch.cat([features.to(F64), features.new_ones(*features.shape[:2], 1, dtype=F64)], -1).transpose(0, 1)
    y = targets.to(F64).transpose(0, 1)  # (T, B, ·)
    gram = x.transpose(1, 2) @ x  # (T, D+1, D+1)
    scale = torch.diagonal(gram, dim1=-2, dim2=-1).mean(-1)[:, None, None]
    eye = torch.eye(gram.shape[-1], dtype=F64, device=gram.device)
    return torch.linalg.solve(gram + PROBE_RIDGE * scale * eye, x.transpose(1, 2) @ y)


def probe_r2(probes: torch.Tensor, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(T,) R² of the per-position probes (T, D + 1, d) on features (B, T, D) and targets (B, T, d)."""
    x = torch.cat([features.to(F64), features.new_ones(*features.shape[:2], 1, dtype=F64)], -1)
    predictions = torch.einsum("btD,tDd->btd", x, probes)
    y = targets.to(F64)
    residual = ((predictions - y) ** 2).sum((0, 2))
    spread = ((y - y.mean(0, keepdim=True)) ** 2).sum((0, 2))
    return 1 - residual / spread
