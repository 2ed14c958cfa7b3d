"""GD and GD++ from W0 = 0 in each task's eigenbasis: the same predictions as ``icl_gd.regression.gd`` at
O(B·d·K) elementwise work after one eigendecomposition per task, for the tuners, which evaluate thousands of
(η, γ) schedules on the same tasks.

Shapes: B tasks, N context pairs, d inputs, d_y outputs, K steps.

Why it is exact (``gd``'s module docstring, per eigenvalue): write the context inputs X = U diag(σ) Vᵀ (thin
SVD, s = σ²). A GD++ step maps every token's input by I - γ_k X_k X_kᵀ, a function of the same Gram matrix, so
the singular vectors never move: along direction j the eigenvalue is s_j q_{k,j} with q_0 = 1 and
q_{k+1} = q_k (1 - γ_k s q_k)²; the residual's component a_j = (Uᵀ Y)_j is multiplied by (1 - η_k s q_k / N);
and the step adds (η_k/N) a_{k,j} q_{k,j} σ_j (Vᵀ x_q)_j to the prediction. So

    ŷ = Σ_j (Uᵀ Y)_j σ_j (Vᵀ x_q)_j · Σ_k (η_k/N) q_{k,j} ∏_{i<k} (1 - η_i s_j q_{i,j} / N).

Parts of Y or x_q outside the span of the context never reach the prediction, so this holds for any N and d.
Plain GD is γ = 0 (every q = 1). A non-zero W0 shifts the residuals by W0 x_i, which the transform then moves,
so it has no such form: callers use ``gd`` then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import as_steps


@dataclass(frozen=True)
class TaskSpectrum:
    """What K GD++ steps from W0 = 0 read of a set of tasks: s (B, d) the eigenvalues σ² of Xᵀ X, and
    w (B, d, d_y) the prediction's weight per direction, (Uᵀ Y)_j σ_j (Vᵀ x_q)_j; N the context length."""

    s: torch.Tensor
    w: torch.Tensor
    n_context: int

    @classmethod
    def of(cls, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor) -> TaskSpectrum:
        """From x (B, N, d), y (B, N, d_y), x_query (B, d), in their dtype (the tuners pass float64).

        With X = U diag(σ) Vᵀ, U diag(σ) = X V, so (Uᵀ Y)_j σ_j = (Vᵀ Xᵀ Y)_j: the eigendecomposition of the
        d x d Gram matrix Xᵀ X gives everything (about twice as fast as a batched SVD of X on a CPU); when N < d
        its extra zero eigenvalues have zero weight."""
        s, V = torch.linalg.eigh(x.transpose(1, 2) @ x)  # (B, d), (B, d, d)
        along_y = V.transpose(1, 2) @ (x.transpose(1, 2) @ y)  # (B, d, d_y)
        along_q = V.transpose(1, 2) @ x_query[..., None]  # (B, d, 1)
        return cls(s, along_y * along_q, x.shape[1])

    def tasks(self, part: slice) -> TaskSpectrum:
        """The tasks ``part`` alone."""
        return TaskSpectrum(self.s[part], self.w[part], self.n_context)

    def scaled(self, factor: float) -> TaskSpectrum:
        """The same tasks with x, y and x_query all multiplied by √factor (the tuners' stretch): every eigenvalue
        times ``factor``; σ, Uᵀ Y and Vᵀ x_q each times √factor, so the weights times factor^(3/2)."""
        return TaskSpectrum(self.s * factor, self.w * factor ** 1.5, self.n_context)


def spectral_gdpp_predict(
    spectrum: TaskSpectrum, etas: Sequence[float] | torch.Tensor, gammas: Sequence[float] | torch.Tensor,
) -> torch.Tensor:
    """ŷ (B, d_y) after K = len(etas) GD++ steps from W0 = 0 (``gd.gdpp_predict`` with W0 None), differentiable
    in ``etas`` and ``gammas`` (scalars or 0-d tensors)."""
    etas, gammas = as_steps(etas, "η"), as_steps(gammas, "γ")
    if len(etas) != len(gammas):
        raise ConfigError(f"GD++ needs as many η as γ, got {len(etas)} and {len(gammas)}")
    s, N = spectrum.s, spectrum.n_context
    q = torch.ones_like(s)  # current eigenvalue / initial, per direction
    kept = torch.ones_like(s)  # ∏ (1 - η_i s q_i / N): the residual left along each direction
    weight = torch.zeros_like(s)  # Σ_k (η_k/N) q_k · kept_k
    for eta, gamma in zip(etas, gammas):
        step = (eta / N) * q
        weight = weight + step * kept
        kept = kept * (1 - step * s)
        q = q * (1 - gamma * s * q) ** 2
    return (weight[..., None] * spectrum.w).sum(-2)


def spectral_gd_predict(spectrum: TaskSpectrum, etas: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """ŷ (B, d_y) after K = len(etas) plain GD steps from W0 = 0 (``gd.gd_predict`` with W0 None): GD++ with
    every γ = 0, which leaves q at exactly 1: the predictions are bit for bit those of a loop without q (the
    gradients in η can differ in the last bit: autograd multiplies by q's ones)."""
    etas = as_steps(etas, "η")
    return spectral_gdpp_predict(spectrum, etas, [0.0] * len(etas))
