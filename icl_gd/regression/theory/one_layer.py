"""One linear self-attention layer on Gaussian in-context regression, in closed form: the expected query loss of
any preconditioner Γ, under covariate, query and context-length shift; the optimal Γ* (Zhang, Frei & Bartlett
2024, Thm 4.1; Ahn et al. 2023, Thm 1, the single layer) and the best scalar step Γ = η I, one GD step.

The task law (docs/theory.md derives everything below): w ~ N(0, I_d) (d,), context inputs x_1..x_M i.i.d.
N(0, Λ_c) (d,), a query x_q ~ N(0, Λ_q) independent of them, labels y = wᵀx + ε with ε ~ N(0, τ²) on every token,
the query's included (τ = ``label_noise``, 0 by default). The layer's prediction, with h the context's mean
label-weighted input,

    ŷ = x_qᵀ Γ h,    h = (1/M) Σ_i y_i x_i    (d,),

and its loss ½ (ŷ - y_q)² (the project's ``query_loss``, ½ included). Its expectation over the law is

    R(Γ) = ½ [tr(Γᵀ Λ_q Γ H) - 2 tr(Λ_q Γ Λ_c) + tr Λ_q + τ²],
    H = E[h hᵀ] = (1 + 1/M) Λ_c² + ((tr Λ_c + τ²)/M) Λ_c,

exact for any Γ (d, d) and any M ≥ 1 (the Gaussian fourth moment E[(wᵀx)² x xᵀ | w] = 2 Λ w wᵀ Λ + (wᵀΛw) Λ).
Trained on Λ_c = Λ_q = Λ with M = N, its minimiser over all d × d matrices is, whatever Λ_q,

    Γ* = ((1 + 1/N) Λ + ((tr Λ + τ²)/N) I)⁻¹,    R(Γ*) = ½ [tr Λ + τ² - tr(Γ* Λ²)],

and over Γ = η I (one GD step from 0 with step η on ½N⁻¹ Σ (wᵀx_i - y_i)², as ``gd.gd_predict``):

    η* = N tr Λ² / ((N + 1) tr Λ³ + (tr Λ + τ²) tr Λ²),    R(η* I) = ½ [tr Λ + τ² - η* tr Λ²].

At Λ = σ² I these are ``one_step.population_one_step_gd(d, N, "gaussian", σ, label_noise=τ)``'s η* and loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from icl_gd.core.config import require_positive_int, require_scale
from icl_gd.core.errors import ConfigError


AHN_SPECTRUM: tuple[float, ...] = (1.0, 1.0, 0.5, 0.25, 1.0)  # Ahn et al. 2023's input eigenvalues (d = 5)


def _require_covariance(name: str, covariance: torch.Tensor) -> None:
    """A symmetric positive semi-definite (d, d) tensor, not zero; ConfigError otherwise."""
    if not isinstance(covariance, torch.Tensor) or covariance.ndim != 2 or covariance.shape[0] != covariance.shape[1]:
        raise ConfigError(f"{name} must be a square (d, d) tensor, got {getattr(covariance, 'shape', covariance)!r}")
    if not torch.allclose(covariance, covariance.T):
        raise ConfigError(f"{name} must be symmetric")
    eigenvalues = torch.linalg.eigvalsh(covariance.detach())
    if eigenvalues.min() < -1e-6 * eigenvalues.abs().max() or eigenvalues.max() <= 0:
        raise ConfigError(f"{name} must be positive semi-definite and not zero")


def rotated_covariance(spectrum: tuple[float, ...], seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Q diag(``spectrum``) Qᵀ (d, d), Q the orthogonal factor of a seeded Gaussian matrix (its signs fixed by R's
    diagonal): an input covariance of the given eigenvalues in a random basis, exactly symmetric. Ahn et al.'s
    eigenvalues (1, 1, 0.5, 0.25, 1) are ``AHN_SPECTRUM``."""
    if not spectrum or any(not (isinstance(v, (int, float)) and v > 0) for v in spectrum):
        raise ConfigError(f"spectrum must be positive eigenvalues, got {spectrum!r}")
    gen = torch.Generator().manual_seed(int(seed))
    d = len(spectrum)
    q, r = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))
    covariance = q @ torch.diag(torch.tensor(spectrum, dtype=torch.float64)) @ q.T
    return (0.5 * (covariance + covariance.T)).to(dtype)


def context_second_moment(context_covariance: torch.Tensor, n_context: int, label_noise: float = 0.0) -> torch.Tensor:
    """H = E[h hᵀ] = (1 + 1/M) Λ_c² + ((tr Λ_c + τ²)/M) Λ_c (d, d): the second moment of h = (1/M) Σ_i y_i x_i
    over w ~ N(0, I), M = ``n_context`` inputs x_i ~ N(0, Λ_c) and label noise of std τ = ``label_noise``."""
    _require_covariance("context covariance", context_covariance)
    require_positive_int("n_context", n_context)
    require_scale("label_noise", label_noise, positive=False)
    eye = torch.eye(context_covariance.shape[0], dtype=context_covariance.dtype, device=context_covariance.device)
    spread = (torch.trace(context_covariance) + label_noise ** 2) / n_context
    return context_covariance @ ((1 + 1 / n_context) * context_covariance + spread * eye)


def lsa_risk(gamma: torch.Tensor, context_covariance: torch.Tensor, n_context: int, *,
             query_covariance: torch.Tensor | None = None, label_noise: float = 0.0) -> torch.Tensor:
    """R(Γ) = E ½ (x_qᵀ Γ h - y_q)², a 0-d tensor differentiable in every argument: Γ (d, d) any matrix, M =
    ``n_context`` context pairs with inputs N(0, Λ_c), a query N(0, Λ_q) (Λ_q = Λ_c when ``query_covariance`` is
    None), label noise of std τ (module docstring). Covariate shift, query shift and another context length are
    this call with a Γ trained elsewhere."""
    query_covariance = context_covariance if query_covariance is None else query_covariance
    _require_covariance("query covariance", query_covariance)
    if gamma.shape != context_covariance.shape or query_covariance.shape != context_covariance.shape:
        raise ConfigError(f"Γ {tuple(gamma.shape)}, Λ_c {tuple(context_covariance.shape)} and Λ_q "
                          f"{tuple(query_covariance.shape)} must all be (d, d)")
    second = context_second_moment(context_covariance, n_context, label_noise)
    quadratic = torch.trace(gamma.T @ query_covariance @ gamma @ second)
    linear = torch.trace(query_covariance @ gamma @ context_covariance)
    return 0.5 * (quadratic - 2 * linear + torch.trace(query_covariance) + label_noise ** 2)


def optimal_preconditioner(covariance: torch.Tensor, n_context: int, label_noise: float = 0.0) -> torch.Tensor:
    """Γ* = ((1 + 1/N) Λ + ((tr Λ + τ²)/N) I)⁻¹ (d, d), the minimiser of ``lsa_risk`` over every d × d matrix for
    contexts of N = ``n_context`` inputs N(0, Λ) and label noise of std τ, whatever the query's covariance
    (Zhang, Frei & Bartlett 2024, Thm 4.1, τ = 0)."""
    _require_covariance("covariance", covariance)
    require_positive_int("n_context", n_context)
    require_scale("label_noise", label_noise, positive=False)
    eye = torch.eye(covariance.shape[0], dtype=covariance.dtype, device=covariance.device)
    spread = (torch.trace(covariance) + label_noise ** 2) / n_context
    return torch.linalg.inv((1 + 1 / n_context) * covariance + spread * eye)


def optimal_scalar_step(covariance: torch.Tensor, n_context: int, label_noise: float = 0.0) -> float:
    """η* = N tr Λ² / ((N + 1) tr Λ³ + (tr Λ + τ²) tr Λ²), the minimiser of R(η I): the population-optimal step of
    one GD step from 0 on contexts of N = ``n_context`` inputs N(0, Λ), label noise of std τ."""
    _require_covariance("covariance", covariance)
    require_positive_int("n_context", n_context)
    require_scale("label_noise", label_noise, positive=False)
    square = torch.trace(covariance @ covariance)
    cube = torch.trace(covariance @ covariance @ covariance)
    n = n_context
    return float(n * square / ((n + 1) * cube + (torch.trace(covariance) + label_noise ** 2) * square))


@dataclass(frozen=True)
class OneLayerOptimum:
    """The best one-layer LSA against the best one GD step on one Gaussian law: ``eta`` = η*, ``gd_loss`` =
    R(η* I), ``lsa_loss`` = R(Γ*); ``gap`` = R(η* I) - R(Γ*) ≥ 0, zero at Λ ∝ I."""

    eta: float
    gd_loss: float
    lsa_loss: float

    @property
    def gap(self) -> float:
        return self.gd_loss - self.lsa_loss


def one_layer_optimum(covariance: torch.Tensor, n_context: int, label_noise: float = 0.0) -> OneLayerOptimum:
    """η*, R(η* I) = ½ (tr Λ + τ² - η* tr Λ²) and R(Γ*) = ½ (tr Λ + τ² - tr(Γ* Λ²)) on contexts of N =
    ``n_context`` inputs N(0, Λ) with queries from the same law, label noise of std τ."""
    eta = optimal_scalar_step(covariance, n_context, label_noise)
    gamma = optimal_preconditioner(covariance, n_context, label_noise)
    total = float(torch.trace(covariance)) + label_noise ** 2
    square = covariance @ covariance
    return OneLayerOptimum(eta=eta, gd_loss=0.5 * (total - eta * float(torch.trace(square))),
                           lsa_loss=0.5 * (total - float(torch.trace(gamma @ square))))
