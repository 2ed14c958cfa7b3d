"""Lu, Letey, Zavatone-Veth, Maiti & Pehlevan (PNAS 2025, arXiv 2405.11751): the asymptotic error of linear
attention pretrained on finitely many tasks and contexts, on fresh tasks (ICL) and on its K pretraining tasks
(IDG), in their scaling and converted to the project's.

Their scaling (docs/theory-asymptotics.md derives every term): inputs x ~ N(0, I_d/d), a task w ~ N(0, I_d), labels
y = wᵀx + ε with ε ~ N(0, ρ) (ρ a variance); a context of ℓ = α d pairs and a query; the layer predicts
ŷ = x_qᵀ Γ h with h = (d/ℓ) Σ_i y_i x_i (d,) and Γ (d, d), fitted by ridge regression on the d² features x_q ⊗ h
of n = τ d² pretraining contexts whose tasks are drawn uniformly from K = κ d tasks w_k ~ N(0, I_d), penalty
(n/d) λ ‖Γ‖_F² on the summed squared error; errors are E(ŷ - y_q)², no ½. As d → ∞ with α, κ, τ, ρ, λ fixed:

    x* = (1 + ρ)/α                                          the variance of h around w (h ≈ w + √x* g)
    M_κ(x) = lim (1/d) tr (Ŝ + x I)⁻¹,  Ŝ = (1/K) Σ_k w_k w_kᵀ: (x/κ) M² + (x + 1 - 1/κ) M - 1 = 0, M > 0
    e∞_IDG = ρ + x* (1 - x* M_κ(x*))                       τ → ∞, on the K tasks
    e∞_ICL = ρ + x* - 2 x*² M_κ(x*) - (1 + x*) x*² M_κ'(x*)   τ → ∞, on fresh tasks
    τ > 1, λ → 0:  e_IDG = τ/(τ - 1) e∞_IDG,   e_ICL = e∞_ICL + (1 + x*) M_κ(x*) e∞_IDG / (τ - 1)
    τ < 1, λ → 0:  the min-norm branches of ``ridgeless_icl_error`` and ``idg_error`` (μ* = x* M_{κ/τ}(x*))
    λ > 0:         ``icl_error``, through the renormalised ridge ε of 1 - τ + τλ/ε = ε M_κ(x* + ε)

(the ICL error for any ridge, its ridgeless limit and the ridgeless IDG error that their figures plot; the
formulas were transcribed from the authors' implementation, mletey/incontext-cleanup theory_runs/common.py at
c6902221 (``ridge_icl``, ``ridgeless_icl``, ``ridgeless_idg``), derived where docs/theory-asymptotics.md derives
them, and each checked against an independent route in constructions/theory_asymptotics.py). The project's one
layer (``icl_gd.regression.theory.one_layer``) is the same model in other units: inputs x_p = √d x ~ N(0, I), labels
y_p = √d y (noise std √(d ρ)), the same Γ and h = (1/ℓ) Σ y_p,i x_p,i, and its risk ½ E(ŷ_p - y_p)² = ½ d e
(``project_risk``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

from icl_gd.core.config import require_non_negative, require_positive
from icl_gd.core.errors import ConfigError


def _require_law(alpha: float, kappa: float, tau: float, rho: float) -> None:
    for name, value in (("alpha", alpha), ("kappa", kappa), ("tau", tau)):
        require_positive(name, value)
    require_non_negative("rho", rho)


# ------------------------------------------------------------------------------ Marchenko-Pastur's Stieltjes transform
def marchenko_pastur_stieltjes(x: float, kappa: float) -> float:
    """M_κ(x) = lim (1/d) tr (Ŝ + x I)⁻¹ for x > 0, Ŝ = (1/K) Σ_k w_k w_kᵀ with K = κ d tasks w_k ~ N(0, I_d):
    the positive root of (x/κ) M² + (x + 1 - 1/κ) M - 1 = 0 (Marchenko & Pastur 1967), in closed form. With
    a = x + 1 - 1/κ the root is 2 / (a + √(a² + 4x/κ)), written as (√(a² + 4x/κ) - a) κ / (2x) when a < 0 so
    that neither form subtracts nearly equal numbers."""
    require_positive("x", x)
    require_positive("kappa", kappa)
    a = x + 1 - 1 / kappa
    root = math.sqrt(a * a + 4 * x / kappa)
    return 2 / (a + root) if a >= 0 else (root - a) * kappa / (2 * x)


def marchenko_pastur_stieltjes_derivative(x: float, kappa: float) -> float:
    """M_κ'(x) = -M² (1 + M/κ) / (1 + x M²/κ), from differentiating the quadratic of
    ``marchenko_pastur_stieltjes`` (= -lim (1/d) tr (Ŝ + x I)⁻², negative)."""
    m = marchenko_pastur_stieltjes(x, kappa)
    return -m * m * (1 + m / kappa) / (1 + x * m * m / kappa)


def effective_noise(alpha: float, rho: float) -> float:
    """x* = (1 + ρ)/α: h = (d/ℓ) Σ_i y_i x_i is w plus a nearly Gaussian error of covariance x* I (each of the ℓ
    terms d y_i x_i has covariance (|w|²/d + ρ) d I ≈ (1 + ρ) d I about its mean w)."""
    require_positive("alpha", alpha)
    require_non_negative("rho", rho)
    return (1 + rho) / alpha


# ------------------------------------------------------------------------------------------- the population limit
def population_idg_error(alpha: float, kappa: float, rho: float) -> float:
    """e∞_IDG = ρ + x* (1 - x* M_κ(x*)): τ → ∞, the layer is the population ridge Γ∞ = Ŝ (Ŝ + x* I)⁻¹ of w on h over
    the K tasks, scored on them."""
    require_positive("kappa", kappa)
    x = effective_noise(alpha, rho)
    return rho + x * (1 - x * marchenko_pastur_stieltjes(x, kappa))


def population_icl_error(alpha: float, kappa: float, rho: float, ridge: float = 0.0) -> float:
    """e∞_ICL = ρ + x* - 2 x* ν M_κ(ν) - (1 + x*) ν² M_κ'(ν), ν = x* + λ: τ → ∞, Γ∞ = Ŝ (Ŝ + ν I)⁻¹ scored on
    fresh tasks, (1/d) ‖Γ∞ - I‖² + (x*/d) ‖Γ∞‖² + ρ (their penalty (n/d) λ ‖Γ‖² grows with n, so λ stays)."""
    require_positive("kappa", kappa)
    require_non_negative("ridge", ridge)
    x = effective_noise(alpha, rho)
    nu = x + ridge
    m = marchenko_pastur_stieltjes(nu, kappa)
    return rho + x - 2 * x * nu * m - (1 + x) * nu * nu * marchenko_pastur_stieltjes_derivative(nu, kappa)


# ------------------------------------------------------------------------------------------------ ridgeless limits
def ridgeless_icl_error(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """The ICL error of the λ → 0 layer (their ``ridgeless_icl``), in closed form; infinite at τ = 1.

    τ > 1 (least squares): e∞_ICL + (1 + x*) M_κ(x*) e∞_IDG / (τ - 1), the population error plus least squares'
    variance, the training residual e∞_IDG times (1/d²) tr(Σ_fresh Σ_train⁻¹) = (1 + x*) M_κ(x*) over τ - 1.
    τ < 1 (min-norm interpolation), μ* = x* M_{κ/τ}(x*):
    τ (1 + x*)/(1 - τ) [1 - τ (1 - μ*)² - μ* (x* - ρ)/x*] - 2 τ (1 - μ*) + 1 + ρ."""
    _require_law(alpha, kappa, tau, rho)
    x = effective_noise(alpha, rho)
    if tau == 1:
        return math.inf
    if tau > 1:
        return (population_icl_error(alpha, kappa, rho)
                + (1 + x) * marchenko_pastur_stieltjes(x, kappa) * population_idg_error(alpha, kappa, rho) / (tau - 1))
    mu = x * marchenko_pastur_stieltjes(x, kappa / tau)
    return (tau * (1 + x) / (1 - tau) * (1 - tau * (1 - mu) ** 2 - mu * (x - rho) / x)
            - 2 * tau * (1 - mu) + 1 + rho)


def idg_error(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """The in-distribution error, on the K pretraining tasks with fresh contexts, of the λ → 0 layer (their
    ``ridgeless_idg``); infinite at τ = 1.

    τ > 1: τ/(τ - 1) e∞_IDG (least squares' n/(n - p) on its own training law).
    τ < 1: with μ* = x* M_{κ/τ}(x*), ε = (1 - τ) x*/(τ μ*) and c = 1/(1 - κ/(1 + κ ε/(1 - τ))²),
    τ [(x* + ε)²/ε + (ρ + x* - 2 x* (1 - τ)(x*/ε + 1)) / (1 - τ - c (1 - τ)²)]."""
    _require_law(alpha, kappa, tau, rho)
    x = effective_noise(alpha, rho)
    if tau == 1:
        return math.inf
    if tau > 1:
        return tau / (tau - 1) * population_idg_error(alpha, kappa, rho)
    mu = x * marchenko_pastur_stieltjes(x, kappa / tau)
    eps = (1 - tau) * x / (tau * mu)
    c = 1 / (1 - kappa / (1 + kappa * eps / (1 - tau)) ** 2)
    return tau * ((x + eps) ** 2 / eps + (rho + x - 2 * x * (1 - tau) * (x / eps + 1)) / (1 - tau - c * (1 - tau) ** 2))


# ---------------------------------------------------------------------------------------------- any ridge λ ≥ 0
def renormalised_ridge(alpha: float, kappa: float, tau: float, rho: float, ridge: float) -> float:
    """ε ≥ 0 with g(ε) = 1 - τ + τλ/ε - ε M_κ(x* + ε) = 0: the ridge λ renormalised by the finite sample (its
    deterministic equivalent, ε = λ / (1 - df/n) with df/d² = 1 - ε M_κ(x* + ε)). g falls strictly from g(0+)
    (+∞ for λ > 0, 1 - τ for λ = 0) to -τ, so the root is unique; it is 0 for λ = 0 and τ ≥ 1. Solved by
    ``scipy.optimize.brentq`` on a bracket [lo, hi] widened by factors of 2 until g(lo) > 0 > g(hi), to 1e-15
    relative."""
    _require_law(alpha, kappa, tau, rho)
    require_non_negative("ridge", ridge)
    if ridge == 0 and tau >= 1:
        return 0.0
    x = effective_noise(alpha, rho)

    def g(eps: float) -> float:
        return 1 - tau + tau * ridge / eps - eps * marchenko_pastur_stieltjes(x + eps, kappa)

    lo, hi = 1.0, 1.0
    for _ in range(2000):
        if g(lo) > 0:
            break
        lo /= 2
    for _ in range(2000):
        if g(hi) < 0:
            break
        hi *= 2
    if not g(lo) > 0 > g(hi):
        raise ConfigError(f"no bracket for the renormalised ridge at α={alpha}, κ={kappa}, τ={tau}, ρ={rho}, "
                          f"λ={ridge}")
    return brentq(g, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=1000)


def icl_error(alpha: float, kappa: float, tau: float, rho: float, ridge: float = 0.0) -> float:
    """The ICL error of the layer trained with ridge λ (their ``ridge_icl``), through ε = ``renormalised_ridge`` and
    ν = x* + ε, S = M_κ(ν), S' = M_κ'(ν):

        c = [ρ + ν - ν² S - ε (1 - 2 ν S - ν² S')] / (1 - 2 ε S - ε² S' - τ),
        e = (1 + x*) [1 - 2 ν S - ν² S' - c (S + ε S')] - 2 (1 - ν S) + 1 + ρ.

    At λ = 0 this is ``ridgeless_icl_error`` (both branches); infinite at τ = 1, λ = 0."""
    _require_law(alpha, kappa, tau, rho)
    require_non_negative("ridge", ridge)
    if ridge == 0 and tau == 1:
        return math.inf
    x = effective_noise(alpha, rho)
    eps = renormalised_ridge(alpha, kappa, tau, rho, ridge)
    nu = x + eps
    s = marchenko_pastur_stieltjes(nu, kappa)
    s1 = marchenko_pastur_stieltjes_derivative(nu, kappa)
    c = (rho + nu - nu * nu * s - eps * (1 - 2 * nu * s - nu * nu * s1)) / (1 - 2 * eps * s - eps * eps * s1 - tau)
    return (1 + x) * (1 - 2 * nu * s - nu * nu * s1 - c * (s + eps * s1)) - 2 * (1 - nu * s) + 1 + rho


# ------------------------------------------------------------------------------------------------- the references
def bayes_icl_error(alpha: float, rho: float) -> float:
    """ρ + (ρ/α) M_α(ρ/α): the d → ∞ error of the Bayes-optimal predictor for fresh tasks w ~ N(0, I), the posterior
    mean (XᵀX + ρ I)⁻¹ Xᵀy of each context (ridge per context), whose error is ρ + (ρ/d) tr (XᵀX + ρ I)⁻¹ with
    XᵀX = α Ŝ_x, Ŝ_x of Marchenko-Pastur ratio 1/α. Not from Lu et al.: the floor their ICL error tends to as α
    grows."""
    require_positive("alpha", alpha)
    require_positive("rho", rho)
    return rho + rho / alpha * marchenko_pastur_stieltjes(rho / alpha, alpha)


@dataclass(frozen=True)
class AsymptoticErrors:
    """The d → ∞ errors at one (α, κ, τ, ρ, λ), their scaling: ``icl`` on fresh tasks, ``idg`` on the K
    pretraining tasks (None for λ > 0: only its ridgeless limit is implemented), ``bayes_icl`` the Bayes floor."""

    icl: float
    idg: float | None
    bayes_icl: float

    @property
    def task_generalisation(self) -> float | None:
        """g_task = e_ICL - e_IDG, the quantity the authors' Fig. 4 and its CPU version plot (None when λ > 0)."""
        return None if self.idg is None else self.icl - self.idg


def asymptotic_errors(alpha: float, kappa: float, tau: float, rho: float, ridge: float = 0.0) -> AsymptoticErrors:
    """``icl_error``, ``idg_error`` (λ = 0 only) and ``bayes_icl_error`` at one point, their scaling."""
    idg = idg_error(alpha, kappa, tau, rho) if ridge == 0 else None
    return AsymptoticErrors(icl=icl_error(alpha, kappa, tau, rho, ridge), idg=idg,
                            bayes_icl=bayes_icl_error(alpha, rho) if rho > 0 else 0.0)


# ------------------------------------------------------------------------------------------- the project's units
def project_risk(error: float, d: int) -> float:
    """Their error e (E(ŷ - y)², x ~ N(0, I/d)) as the project's risk ½ E(ŷ_p - y_p)² with x_p = √d x ~ N(0, I)
    and y_p = √d y: ½ d e. The layer's Γ and the ridge λ (penalty λ ‖Γ‖² on the mean squared error) are the same
    numbers in both."""
    require_non_negative("error", error)
    if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
        raise ConfigError(f"d must be a positive integer, got {d!r}")
    return 0.5 * d * error


def project_label_noise(rho: float, d: int) -> float:
    """The project's ``label_noise`` (a standard deviation on y_p = √d y) for their noise variance ρ: √(d ρ)."""
    require_non_negative("rho", rho)
    if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
        raise ConfigError(f"d must be a positive integer, got {d!r}")
    return math.sqrt(d * rho)
