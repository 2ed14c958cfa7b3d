"""The plateaus of linear attention with separate key and query weights (Zhang, Singh, Latham & Saxe 2025): trained
from small initialisation, H rank-one heads learn in-context principal-component regression one component at a
time, and the loss rests at the levels L_m, m = 0, 1, ..., d, in this order.

In the project's convention (``one_layer``: ŷ = x_qᵀ Γ h, h = (1/N) Σ_i y_i x_i (d,), loss ½ (ŷ - y)², its
expectation ``lsa_risk``), with λ_1 ≥ ... ≥ λ_d the eigenvalues of Λ, e_k its unit eigenvectors and
γ_k = 1 / ((1 + 1/N) λ_k + (tr Λ + τ²)/N) the eigenvalues of Γ* (docs/theory-plateaus.md derives it):

    Γ_m = Σ_{k≤m} γ_k e_k e_kᵀ,    L_m = R(Γ_m) = ½ [tr Λ + τ² - Σ_{k≤m} λ_k² γ_k],

Γ_m the minimiser of R over every Γ whose rows and columns lie in span(e_1, ..., e_m), the prediction of their fixed
point M_m. L_0 = ½ (tr Λ + τ²) predicts 0; L_d = R(Γ*). Their loss E(ŷ - y_q)² has no ½ and their τ is 0: their
L(M_m) = 2 L_m, and λ_k² γ_k = λ_k / (1 + (1 + tr Λ/λ_k)/N) is the term their notebook's ``loss_at_saddle``
subtracts (yedizhang/linattn-icl, ``plot_loss.ipynb``).

Their repository's law (``data.gen_cov``): eigenvalues proportional to 1, ..., d with trace 1, in a random
orthonormal basis; their defaults (``config.py``) and figures use d = 4 and sequences of 32 tokens, N = 31 context
pairs.
"""

from __future__ import annotations

import torch

from icl_gd.core.config import require_positive_int, require_scale
from icl_gd.core.errors import ConfigError
from icl_gd.regression.theory.one_layer import _require_covariance

AUTHORS_D = 4  # their --in_dim default and the notebook's D
AUTHORS_N = 31  # their sequences of 32 tokens: 31 context pairs and the query


def linear_spectrum_covariance(d: int = AUTHORS_D, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Λ = Q diag(1, 2, ..., d) Qᵀ / (d (d + 1) / 2) (d, d): eigenvalues proportional to 1..d, trace 1, in the
    basis of Q, the orthogonal factor of a Gaussian matrix drawn from ``seed`` (its signs fixed by R's diagonal).
    The law of Zhang et al.'s repository; their basis comes from NumPy's global seed, this one from ``seed``."""
    require_positive_int("d", d)
    gen = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))
    spectrum = torch.arange(1, d + 1, dtype=torch.float64)
    covariance = q @ torch.diag(spectrum / spectrum.sum()) @ q.T
    return (0.5 * (covariance + covariance.T)).to(dtype)


def principal_components(covariance: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(λ (d,), E (d, d)): the eigenvalues of Λ in descending order and its unit eigenvectors as E's columns in the
    same order, e_1 = E[:, 0] the first principal component."""
    _require_covariance("covariance", covariance)
    values, vectors = torch.linalg.eigh(covariance)
    return values.flip(0), vectors.flip(1)


def gamma_eigenvalues(values: torch.Tensor, n_context: int, label_noise: float = 0.0) -> torch.Tensor:
    """γ_k = 1 / ((1 + 1/N) λ_k + (tr Λ + τ²)/N) (d,), Γ*'s eigenvalues, for λ_k = ``values``."""
    require_positive_int("n_context", n_context)
    require_scale("label_noise", label_noise, positive=False)
    spread = (values.sum() + label_noise ** 2) / n_context
    return 1 / ((1 + 1 / n_context) * values + spread)


def plateau_levels(covariance: torch.Tensor, n_context: int, label_noise: float = 0.0) -> torch.Tensor:
    """(L_0, L_1, ..., L_d) (d + 1,): L_m = ½ [tr Λ + τ² - Σ_{k≤m} λ_k² γ_k], the risk of the best Γ restricted to the
    top-m principal components of Λ (module docstring), for contexts of N = ``n_context`` inputs N(0, Λ) and label
    noise of std τ = ``label_noise``; descending, L_d = R(Γ*)."""
    values, _ = principal_components(covariance)
    gains = values ** 2 * gamma_eigenvalues(values, n_context, label_noise)  # what learning component k takes off 2 L
    total = values.sum() + label_noise ** 2
    return 0.5 * (total - torch.cat([gains.new_zeros(1), gains.cumsum(0)]))


def pcr_preconditioner(covariance: torch.Tensor, n_context: int, m: int, label_noise: float = 0.0) -> torch.Tensor:
    """Γ_m = Σ_{k≤m} γ_k e_k e_kᵀ (d, d): the minimiser of ``lsa_risk`` over Γ with rows and columns in the span of
    the top ``m`` principal components (0 ≤ m ≤ d), in-context principal-component regression on m components
    (Zhang et al. 2025); Γ_d = Γ*, Γ_0 = 0."""
    values, vectors = principal_components(covariance)
    if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= len(values):
        raise ConfigError(f"m must be an integer in 0..d={len(values)}, got {m!r}")
    kept = vectors[:, :m]
    return kept @ torch.diag(gamma_eigenvalues(values, n_context, label_noise)[:m]) @ kept.T
