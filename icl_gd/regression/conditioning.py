"""GD++ as a curvature correction (von Oswald et al. 2023, App. A.10, Fig. 13): the condition number of the context
data's covariance X Xᵀ = Σ_i x_i x_iᵀ before and after the input transforms x ← (I - γ X Xᵀ) x.

GD on L(W) = 1/(2N) Σ ‖W x_i - y_i‖² converges at a rate set by the condition number κ = λ_max / λ_min of
X Xᵀ. A GD++ step maps every eigenvalue s of X Xᵀ to s (1 - γ s)² (the eigenvectors stay), so a well-chosen γ
squeezes the spectrum together and the following GD steps see a better-conditioned problem: the paper's
argument for why trained multi-layer models, which learn γ > 0, beat plain GD.

Shapes: B tasks, N context pairs, d inputs, K steps. κ is computed per task in float64 (``torch.linalg.eigvalsh``);
a task whose X Xᵀ is singular (λ_min ≤ 0 in float64, e.g. N < d) has κ = inf. Summaries over tasks: the mean of
log10 κ (the log of the geometric mean; the arithmetic mean of κ is ruled by its few near-singular tasks) and
the median.

``ConditionedTaskConfig``: linear regression tasks whose inputs have a covariance of condition number κ (N(0, Σ),
Σ diagonal with log-spaced eigenvalues), the config keys of a study that varies κ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from icl_gd.core.config import check_settings, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs


def context_gram(x: torch.Tensor) -> torch.Tensor:
    """X Xᵀ = Σ_i x_i x_iᵀ, (B, d, d), of the context inputs x (B, N, d) (no 1/N: γ as App. A.10 writes it)."""
    if x.dim() != 3:
        raise ConfigError(f"context inputs must be (B, N, d), got shape {tuple(x.shape)}")
    return x.transpose(1, 2) @ x


def condition_numbers(gram: torch.Tensor) -> torch.Tensor:
    """κ = λ_max / λ_min per task, (B,) float64, of symmetric (B, d, d) matrices; inf where λ_min ≤ 0."""
    eig = torch.linalg.eigvalsh(gram.double())  # ascending
    lo, hi = eig[:, 0], eig[:, -1]
    return torch.where(lo > 0, hi / lo.clamp_min(torch.finfo(torch.float64).tiny), torch.full_like(hi, float("inf")))


def gdpp_transformed_inputs(x: torch.Tensor, gammas: Sequence[float]) -> list[torch.Tensor]:
    """[X_0, X_1, ..., X_K]: the context inputs (B, N, d) after k = 0..K GD++ transforms
    x ← (I - γ_k X_k X_kᵀ) x, each X_k X_kᵀ from the step's incoming inputs (as ``icl_gd.regression.gd.gdpp_step``)."""
    out = [x]
    for gamma in gammas:
        x = x - float(gamma) * (x @ context_gram(x))
        out.append(x)
    return out


def transformed_eigenvalue(s: torch.Tensor, gamma: float) -> torch.Tensor:
    """The eigenvalue s (1 - γ s)² that one transform (I - γ X Xᵀ) gives an eigenvalue s of X Xᵀ."""
    return s * (1 - gamma * s) ** 2


def equalising_gamma(s_low: float, s_high: float) -> float:
    """The γ in (0, 1/s_high) whose transform maps s_low and s_high (0 < s_low < s_high) to the same value, so a
    problem with only these two eigenvalues leaves one step with κ = 1: from s_l (1 - γ s_l)² = s_h (1 - γ s_h)²
    with both factors positive, γ = (√s_h - √s_l) / (s_h √s_h - s_l √s_l)."""
    if not 0 < s_low < s_high:
        raise ConfigError(f"need 0 < s_low < s_high, got {s_low!r} and {s_high!r}")
    a, b = s_low ** 0.5, s_high ** 0.5
    return (b - a) / (b ** 3 - a ** 3)


def summarise(kappa: torch.Tensor) -> dict[str, float]:
    """{"log10_mean": mean over tasks of log10 κ, "median": median κ, "inf_fraction": share of singular tasks}."""
    finite = torch.isfinite(kappa)
    logs = torch.log10(kappa[finite])
    return {"log10_mean": float(logs.mean()) if finite.any() else float("inf"),
            "median": float(kappa.median()),
            "inf_fraction": float((~finite).double().mean())}


def condition_per_step(inputs: Sequence[torch.Tensor]) -> list[dict[str, float]]:
    """``summarise`` of κ(X_k X_kᵀ) for each context-input tensor X_k (B, N, d) of a sequence (step 0 first)."""
    return [summarise(condition_numbers(context_gram(x))) for x in inputs]


# ---------------------------------------------------------------------------------------------------- ill-conditioned tasks
def _at_least_one(name: str, value: float) -> None:
    if not value >= 1:
        raise ConfigError(f"{name} must be at least 1, got {value!r}")


@dataclass(frozen=True)
class ConditionedTaskConfig(RegressionTaskConfig):
    """In-context linear regression with an input covariance of condition number κ."""

    kappa: float = setting(1.0, "condition number κ of the input covariance: 1 = the paper's U(-r/2, r/2) inputs; "
                                "> 1 = N(0, Σ), Σ diagonal with eigenvalues log-spaced over [1, κ], tr Σ = d r²/12 "
                                "(the uniform inputs' power)", check=_at_least_one)

    def __post_init__(self) -> None:
        check_settings(self)
        super().__post_init__()

    def build(self) -> LinearRegressionTask:
        if self.kappa == 1:
            return super().build()
        spectrum = np.geomspace(1.0, self.kappa, self.d)
        spectrum *= self.d * self.input_range ** 2 / 12 / spectrum.sum()
        covariance = tuple(tuple(float(spectrum[i]) if i == j else 0.0 for j in range(self.d)) for i in range(self.d))
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=NormalInputs(covariance=covariance),
                                    weight_scale=self.weight_scale, label_noise=self.label_noise)
