"""Lu et al. (PNAS 2025)'s asymptotic errors of linear attention pretrained on K = κd tasks
(``icl_gd.regression.task_diversity.asymptotics``) and the finite-d layer they describe
(``icl_gd.regression.task_diversity.finite_tasks``), each against an independent route (docs/theory-asymptotics.md).

Exact, in float64:
- M_κ(x) a root of its quadratic, M_κ' against a central difference (step 10⁻⁵ x: 10⁻⁹ relative);
- the limits κ → ∞ (M → 1/(1 + x), e∞_ICL → ρ + x*/(1 + x*)) at κ = 10¹⁰, to 10⁻⁸;
- the ridgeless ICL error for τ > 1 against the authors' own expanded form (their theory_runs/common.py writes it
  with k* = 1/(1 - κ (M/(κ + M))²), an independent algebra), and for τ < 1 against the general ridge form at
  λ = 0 (through the renormalised ridge), both to 10⁻¹⁰; the ridge form at λ = 10⁻¹⁰ against λ = 0 and at τ = 10¹⁰
  against the population limit, to 10⁻⁶;
- float32 against float64 (the layer's exact error, the ridge and dMMSE estimates) at 10⁻⁴.

Sampled, each passing below both its stated tolerance and 4 of its standard errors where it has one:
- M_κ(x) against (1/d) tr (Ŝ + x I)⁻¹ of one Ŝ at d = 1000 (fluctuations O(1/d²), finite-d bias O(1/d): 1%);
- e∞_ICL, e∞_IDG against the traces of Γ∞ = Ŝ (Ŝ + x* I)⁻¹ on the same Ŝ (1%), and the Bayes floor against
  ρ + (ρ/d) tr (XᵀX + ρ I)⁻¹ at d = 1000 (1%);
- the two moments of ``draw_summaries``' h given w against the formula ``layer_error`` uses, and ``layer_error``
  against the sampled query loss of contexts drawn in full (``draw_contexts``), 100 000 contexts, 3%;
- the layer trained on n = τ d² contexts of K = 4d tasks at d = 40 against the d → ∞ curves, by least squares at
  τ = 10 and as the minimum-norm interpolant at τ = 0.5 (the minimum-norm branches below the threshold), 6%
  (the finite-d gap is O(1/d): over the κ grid at τ = 10 it averages 4.2% at d = 32 and 1.8% at d = 64).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch

from icl_gd.regression.tasks import Stream, make_generator
from icl_gd.regression.task_diversity import asymptotics as lu
from icl_gd.regression.task_diversity.finite_tasks import (FiniteTaskConfig, context_summary, dmmse_estimate,
                                                           draw_contexts, draw_summaries, layer_error, ridge_estimate,
                                                           run_point)

from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge

SEED = 2025
F64 = torch.float64
# (α, κ, τ, ρ) of the checks: their figure's α = τ = 10, ρ = 0.01 at both sides of κ = 1, and a short context with
# strong noise, each at τ on both sides of the interpolation threshold τ = 1.
LAWS = tuple((alpha, kappa, tau, rho) for alpha, rho in ((10.0, 0.01), (1.5, 0.5)) for kappa in (0.3, 1.6, 8.0)
             for tau in (0.4, 3.0))
Stieltjes = Callable[[float, float], float]


def _scalars(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def check_stieltjes_exact(tolerance: float = 1e-9, stieltjes: Stieltjes = lu.marchenko_pastur_stieltjes) -> CheckResult:
    """(x/κ) M² + (x + 1 - 1/κ) M - 1 = 0 with M > 0, and M' against a central difference, on a grid of (x, κ)."""
    residuals, derivatives, differences = [], [], []
    for x in (1e-3, 0.1, 0.101, 1.0, 7.0):
        for kappa in (0.2, 0.9, 1.0, 1.6, 32.0):
            m = stieltjes(x, kappa)
            residuals.append(0.0 if m > 0 else 1.0)
            residuals.append((x / kappa * m * m + (x + 1 - 1 / kappa) * m - 1) / max(1.0, m))
            h = 1e-5 * x
            derivatives.append(lu.marchenko_pastur_stieltjes_derivative(x, kappa))
            differences.append((stieltjes(x + h, kappa) - stieltjes(x - h, kappa)) / (2 * h))
    root = CheckResult(max(map(abs, residuals)), max(map(abs, residuals)), tolerance)
    return merge([root, compare(_scalars(derivatives), _scalars(differences), 1e-7)])


def check_large_kappa_limits(tolerance: float = 1e-8, population_icl: Callable[..., float] = lu.population_icl_error
                             ) -> CheckResult:
    """κ → ∞ (infinitely many tasks): M_κ(x) → 1/(1 + x) and e∞_ICL → ρ + x*/(1 + x*), the best Γ = I/(1 + x*)."""
    ours, limits = [], []
    for alpha, rho in ((10.0, 0.01), (1.5, 0.5)):
        x = (1 + rho) / alpha
        ours += [lu.marchenko_pastur_stieltjes(x, 1e10), population_icl(alpha, 1e10, rho)]
        limits += [1 / (1 + x), rho + x / (1 + x)]
    return compare(_scalars(ours), _scalars(limits), tolerance)


def _authors_ridgeless_icl(alpha: float, kappa: float, tau: float, rho: float) -> float:
    """theory_runs/common.py ``ridgeless_icl`` for τ > 1, as the authors expand it (k*, three terms)."""
    x = (1 + rho) / alpha
    m = lu.marchenko_pastur_stieltjes(x, kappa)
    k_star = 1 / (1 - kappa * (m / (kappa + m)) ** 2)
    return ((k_star - 1 / (tau - 1)) * (1 + x) * (x * m) ** 2 + (3 - 2 * tau) / (tau - 1) * m * x * x
            + ((1 + rho) / (tau - 1) * m + 1) * x + rho * m / (tau - 1) + rho)


def check_ridgeless_forms(tolerance: float = 1e-10, ridgeless: Callable[..., float] = lu.ridgeless_icl_error
                          ) -> CheckResult:
    """The ridgeless ICL error against the authors' expansion (τ > 1) and the general ridge form at λ = 0 (both
    τ), on ``LAWS``."""
    ours, other = [], []
    for alpha, kappa, tau, rho in LAWS:
        ours.append(ridgeless(alpha, kappa, tau, rho))
        other.append(_authors_ridgeless_icl(alpha, kappa, tau, rho) if tau > 1
                     else lu.icl_error(alpha, kappa, tau, rho, 0.0))
    return compare(_scalars(ours), _scalars(other), tolerance)


def check_ridge_limits(tolerance: float = 1e-6) -> CheckResult:
    """The ridge form continuous in λ at 0 (λ = 10⁻¹⁰ against the ridgeless form) and at τ → ∞ (τ = 10¹⁰ against the
    population limit, where the ridge stays: e∞_ICL at ν = x* + λ)."""
    ours, other = [], []
    for alpha, kappa, tau, rho in LAWS:
        ours.append(lu.icl_error(alpha, kappa, tau, rho, 1e-10))
        other.append(lu.ridgeless_icl_error(alpha, kappa, tau, rho))
        ours.append(lu.icl_error(alpha, kappa, 1e10, rho, 0.05))
        other.append(lu.population_icl_error(alpha, kappa, rho, 0.05))
    return compare(_scalars(ours), _scalars(other), tolerance)


def _task_matrix(d: int, kappa: float, seed: int) -> torch.Tensor:
    """Ŝ = WᵀW/K (d, d) of K = ⌊κd⌋ tasks w_k ~ N(0, I_d)."""
    n_tasks = math.floor(kappa * d + 1e-9)
    w = torch.randn(n_tasks, d, generator=make_generator(seed, n_tasks, Stream.POOL), dtype=F64)
    return w.T @ w / n_tasks


def check_finite_d_traces(d: int = 1000, seed: int = SEED, tolerance: float = 1e-2,
                          stieltjes: Stieltjes = lu.marchenko_pastur_stieltjes,
                          population_icl: Callable[..., float] = lu.population_icl_error) -> CheckResult:
    """On one Ŝ at d = 1000 for κ = 0.5 and 2: M_κ(x*) = (1/d) tr (Ŝ + x* I)⁻¹, and e∞_ICL, e∞_IDG against
    (1 + x*)(1/d) tr Γ∞² - (2/d) tr Γ∞ + 1 + ρ and ρ + (x*/d) tr Ŝ (Ŝ + x* I)⁻¹ (τ = ∞, ℓ = ∞), α = 10, ρ = 0.01;
    the Bayes floor against ρ + (ρ/d) tr (XᵀX + ρ I)⁻¹ of one context of αd inputs N(0, I/d)."""
    alpha, rho = 10.0, 0.01
    x = (1 + rho) / alpha
    closed, sampled, lines = [], [], []
    eye = torch.eye(d, dtype=F64)
    for kappa in (0.5, 2.0):
        s = _task_matrix(d, kappa, seed)
        values, vectors = torch.linalg.eigh(s)
        resolvent = 1 / (values + x)  # eigenvalues of (Ŝ + x I)⁻¹
        gamma = values * resolvent  # of Γ∞
        closed += [stieltjes(x, kappa), population_icl(alpha, kappa, rho), lu.population_idg_error(alpha, kappa, rho)]
        sampled += [float(resolvent.mean()), float((1 + x) * (gamma ** 2).mean() - 2 * gamma.mean() + 1 + rho),
                    float(rho + x * gamma.mean())]
        lines.append(f"κ = {kappa:g}: M {closed[-3]:.5f} ({sampled[-3]:.5f}), e∞_ICL {closed[-2]:.5f} "
                     f"({sampled[-2]:.5f}), e∞_IDG {closed[-1]:.5f} ({sampled[-1]:.5f})")
    inputs = torch.randn(int(alpha * d), d, generator=make_generator(seed, 0, Stream.TEST), dtype=F64) / math.sqrt(d)
    closed.append(lu.bayes_icl_error(alpha, rho))
    sampled.append(float(rho + rho * torch.linalg.inv(inputs.T @ inputs + rho * eye).diagonal().mean()))
    lines.append(f"Bayes floor {closed[-1]:.5f} ({sampled[-1]:.5f})")
    ratios = _scalars(sampled) / _scalars(closed)  # each value relative to its own size, not to the largest
    result = compare(ratios, torch.ones_like(ratios), tolerance)
    return CheckResult(result.max_abs_error, result.max_rel_error, tolerance,
                       f"d = {d}, closed form (sampled): " + "; ".join(lines))


def check_summary_moments(n: int = 100_000, seed: int = SEED, tolerance: float = 3e-2,
                          summaries: Callable[..., torch.Tensor] = draw_summaries) -> CheckResult:
    """h of ``draw_summaries`` given w (d = 4, ℓ = 6, ρ = 0.3): its mean against w and its second moment against
    (1 + 1/ℓ) w wᵀ + (|w|²/d + ρ)(d/ℓ) I, each entry within 4 standard errors plus ``tolerance`` of the largest
    entry (the error reported is the excess beyond 4 standard errors, relative to that entry); ``context_summary``
    of contexts drawn in full, the same."""
    d, ell, rho = 4, 6, 0.3
    w = torch.tensor([1.3, -0.4, 0.8, 0.1], dtype=F64)
    second = (1 + 1 / ell) * torch.outer(w, w) + (w @ w / d + rho) * (d / ell) * torch.eye(d, dtype=F64)
    results = []
    for which in ("in law", "in full"):
        gen = make_generator(seed, 0 if which == "in law" else 1, Stream.TRAIN)
        tasks = w.expand(n, d).contiguous()
        h = summaries(tasks, ell, rho, gen) if which == "in law" else context_summary(*draw_contexts(tasks, ell, rho,
                                                                                                      gen))
        outer = (h[:, :, None] * h[:, None, :]).reshape(n, d * d)
        for sample, expected in ((h, w), (outer, second.flatten())):
            mean, error = sample.mean(0), sample.std(0) / math.sqrt(n)
            scale = float(expected.abs().max())
            worst = float(((mean - expected).abs() - 4 * error).clamp_min(0).max()) / scale
            results.append(CheckResult(float((mean - expected).abs().max()), worst, tolerance))
    return merge(results)


def check_layer_error_monte_carlo(n: int = 100_000, seed: int = SEED, tolerance: float = 3e-2,
                                  error: Callable[..., torch.Tensor] = layer_error) -> CheckResult:
    """``layer_error`` of a random Γ (d = 6, ℓ = 12, ρ = 0.2) against the mean sampled (x_qᵀ Γ h - y_q)² of contexts
    drawn in full, on fresh tasks (Σ_w = I) and on 3 fixed tasks (Σ_w = WᵀW/3)."""
    d, ell, rho = 6, 12, 0.2
    gen = make_generator(seed, 0, Stream.TEST)
    gamma = torch.eye(d, dtype=F64) * 0.7 + 0.2 * torch.randn(d, d, generator=gen, dtype=F64)
    fixed = torch.randn(3, d, generator=gen, dtype=F64)
    results, lines = [], []
    for law in ("fresh", "fixed"):
        w = torch.randn(n, d, generator=gen, dtype=F64) if law == "fresh" else \
            fixed[torch.randint(0, 3, (n,), generator=gen)]
        x, y = draw_contexts(w, ell + 1, rho, gen)
        h = context_summary(x[:, :ell], y[:, :ell])
        loss = (torch.einsum("bi,ij,bj->b", x[:, ell], gamma, h) - y[:, ell]) ** 2
        moment = torch.eye(d, dtype=F64) if law == "fresh" else fixed.T @ fixed / 3
        closed = error(gamma, moment, ell, rho)
        sampled, se = loss.mean(), loss.std() / math.sqrt(n)
        result = compare(sampled, closed, min(tolerance, 4 * float(se / closed)))
        results.append(result)
        lines.append(f"{law} tasks: e {float(closed):.5f} (Monte Carlo {float(sampled):.5f} ± {float(se):.5f}, "
                     f"{float((sampled - closed) / se):+.1f} SE)")
    merged = merge(results)
    return CheckResult(merged.max_abs_error, merged.max_rel_error, merged.tolerance, "; ".join(lines))


def check_trained_layer(tau: float = 10.0, d: int = 40, kappa: float = 4.0, seed: int = SEED,
                        tolerance: float = 6e-2) -> CheckResult:
    """The layer fitted on n = τ d² contexts of K = 4d tasks (α = 10, ρ = 0.01): least squares at τ = 10, the
    minimum-norm interpolant at τ = 0.5; its exact e_ICL and e_IDG against the d → ∞ curves (finite-d gap O(1/d),
    about 4% at d = 32)."""
    config = FiniteTaskConfig(d=d, tau=tau, kappas=(kappa,), draws=1, test_contexts=1)
    point = run_point(config, kappa, 0, seed)
    theory = lu.asymptotic_errors(config.alpha, kappa, config.tau, config.rho)
    ratios = _scalars([point.icl / theory.icl, point.idg / theory.idg])
    result = compare(ratios, torch.ones_like(ratios), tolerance)
    return CheckResult(result.max_abs_error, result.max_rel_error, tolerance,
                       f"d = {d}, κ = {kappa:g}, τ = {tau:g}, one draw: e_ICL {theory.icl:.5f} "
                       f"(trained {point.icl:.5f}), e_IDG {theory.idg:.5f} (trained {point.idg:.5f})")


def check_float32(seed: int = SEED, tolerance: float = 1e-4) -> CheckResult:
    """``layer_error``, ``ridge_estimate`` and ``dmmse_estimate`` in float32 against float64 (d = 8, ℓ = 40)."""
    gen = make_generator(seed, 0, Stream.TEST)
    d, ell, rho = 8, 40, 0.05
    gamma = torch.eye(d, dtype=F64) + 0.1 * torch.randn(d, d, generator=gen, dtype=F64)
    tasks = torch.randn(12, d, generator=gen, dtype=F64)
    x, y = draw_contexts(tasks[torch.arange(64) % 12], ell, rho, gen)
    outputs = []
    for dtype in (torch.float32, F64):
        outputs.append([layer_error(gamma.to(dtype), (tasks.T @ tasks / 12).to(dtype), ell, rho)[None],
                        ridge_estimate(x.to(dtype), y.to(dtype), rho), dmmse_estimate(x.to(dtype), y.to(dtype),
                                                                                       tasks.to(dtype), 0.5)])
    return merge([compare(a.to(F64), b, tolerance) for a, b in zip(*outputs)])


IDENTITY_CHECKS = (
    IdentityCheck("asymptotics: M_κ solves its quadratic; M' = difference", check_stieltjes_exact),
    IdentityCheck("asymptotics: κ → ∞ gives M = 1/(1+x), e = ρ + x*/(1+x*)", check_large_kappa_limits),
    IdentityCheck("asymptotics: ridgeless e_ICL = authors' form = ridge form", check_ridgeless_forms),
    IdentityCheck("asymptotics: ridge form continuous at λ → 0 and τ → ∞", check_ridge_limits),
    IdentityCheck("asymptotics: M_κ, e∞, Bayes floor = traces at d = 1000", check_finite_d_traces),
    IdentityCheck("asymptotics: h drawn in law has the moments of h", check_summary_moments),
    IdentityCheck("asymptotics: layer_error = Monte Carlo, fresh, 3 tasks", check_layer_error_monte_carlo),
    IdentityCheck("asymptotics: least squares, d=40, κ=4, τ=10 ≈ curve", check_trained_layer),
    IdentityCheck("asymptotics: min-norm, d=40, κ=4, τ=0.5 ≈ curve", partial(check_trained_layer, 0.5)),
    IdentityCheck("asymptotics: float32 layer error, baselines = float64", check_float32),
)

