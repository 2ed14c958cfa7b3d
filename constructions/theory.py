"""The closed forms of one linear-attention layer (``icl_gd.regression.theory.one_layer``) against an independent
exact expectation, against their own derivatives, against the one-step GD reference, and against Monte Carlo.

The law: Λ = Q diag(1, 1, 0.5, 0.25, 1) Qᵀ with Q a random orthogonal matrix (d = 5), N = 20 context pairs, the
layer's Γ* = ((1 + 1/N) Λ + (tr Λ / N) I)⁻¹ (docs/theory.md).

Exact, in float64:
- the risk R(Γ) against its expectation by Gauss-Hermite quadrature (``quadrature_risk``: 3 nodes a coordinate for
  the inputs, exact for polynomials of degree 5 in each, and the integrand is of degree 4; 2 nodes for the weights
  and the noise, exact to degree 3, the integrand's is 2), which uses no Gaussian moment formula: Γ* and random Γ,
  matched, on contexts and query of covariance 2Λ, at M = 50, under a query shift with label noise;
- Γ* stationary (the autograd gradient of R, relative to that of the linear term, is at rounding level) and every
  random perturbation δ costing exactly ½ tr(δᵀ Λ_q δ H) > 0, R a quadratic; also under a query shift, where the
  test law's Γ* does not depend on Λ_q;
- the autograd gradient of R against a central difference, exact up to rounding for a quadratic;
- η* a zero of dR(ηI)/dη (R is convex in η), R(η* I) and R(Γ*) in their short closed forms;
- at Λ = σ² I, Γ* = η* I, η* and the loss of ``population_one_step_gd`` (an independent derivation);
- float32 against float64 at a relative 1e-5 (the matrices solved have condition numbers below 4).

Statistical: R against the sampled query loss of the project's sampler (``LinearRegressionTask`` with
``NormalInputs(covariance=...)``, 100 000 tasks in float64) for Γ* on its own law, on contexts and query of
covariance 2Λ, at M = 50, and for the one GD step of ``gd.gd_predict`` at η* with label noise τ = 0.5. Each passes
when its relative error is below both 4 of its standard errors and 3%; the relative standard errors are 0.6 to
0.9%, and 1 in place of the 2 of the fourth moment's 2 Λ w wᵀ Λ (H's (1 + 1/M) becoming 1) moves R(Γ*) by 14%.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import partial

import torch

from icl_gd.regression.gd import gd_predict
from icl_gd.regression.population.one_step import population_one_step_gd
from icl_gd.regression.theory.one_layer import (AHN_SPECTRUM, context_second_moment, lsa_risk, one_layer_optimum,
                                                 optimal_preconditioner, optimal_scalar_step, rotated_covariance)
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream

from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge

SPECTRUM: tuple[float, ...] = AHN_SPECTRUM
N_CONTEXT = 20
SEED = 2024
EXACT = 1e-10

Risk = Callable[..., torch.Tensor]  # lsa_risk's signature


def anisotropic_covariance(seed: int = SEED, spectrum: tuple[float, ...] = SPECTRUM,
                           dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The checks' law: ``rotated_covariance(spectrum, seed)``, Ahn et al.'s eigenvalues in a random basis."""
    return rotated_covariance(spectrum, seed, dtype)


def _grid(nodes: tuple[float, ...], weights: tuple[float, ...], d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensor-product rule of a one-dimensional rule in d dimensions: nodes (n^d, d), weights (n^d,)."""
    points = list(itertools.product(range(len(nodes)), repeat=d))
    node = torch.tensor([[nodes[i] for i in p] for p in points], dtype=torch.float64)
    weight = torch.tensor([math.prod(weights[i] for i in p) for p in points], dtype=torch.float64)
    return node, weight


def quadrature_risk(gamma: torch.Tensor, context_covariance: torch.Tensor, n_context: int, *,
                    query_covariance: torch.Tensor | None = None, label_noise: float = 0.0) -> torch.Tensor:
    """E ½ (x_qᵀ Γ h - y_q)² by Gauss-Hermite quadrature, without a moment formula: for each node w of the
    weights' rule (±1 a coordinate), g = (wᵀx + ε) x integrated over x = Λ_c^{1/2} z (z on the 3-node rule 0, ±√3
    with weights 2/3, 1/6, 1/6) and ε (±τ), then E[h | w] = E[g | w] and
    E[h hᵀ | w] = E[g gᵀ | w] / M + (1 - 1/M) E[g | w] E[g | w]ᵀ (h the mean of M i.i.d. g), and
    E[(x_qᵀ (Γ h - w) - ε_q)² | w] = tr(Λ_q E[(Γ h - w)(Γ h - w)ᵀ | w]) + τ² (x_q independent, E x_q x_qᵀ = Λ_q)."""
    query_covariance = context_covariance if query_covariance is None else query_covariance
    d, M = gamma.shape[0], n_context
    values, vectors = torch.linalg.eigh(context_covariance)
    root = vectors @ torch.diag(values.clamp_min(0).sqrt()) @ vectors.T
    z, pz = _grid((0.0, 3 ** 0.5, -(3 ** 0.5)), (2 / 3, 1 / 6, 1 / 6), d)
    w, pw = _grid((1.0, -1.0), (0.5, 0.5), d)
    eps = torch.tensor([label_noise, -label_noise], dtype=torch.float64)
    x = z @ root.T  # (Z, d)
    label = (w @ x.T)[:, :, None] + eps  # (W, Z, E)
    g = label[..., None] * x[None, :, None, :]  # (W, Z, E, d)
    p = (pz[:, None] * 0.5).expand(-1, 2)  # (Z, E)
    mean = torch.einsum("ze,wzei->wi", p, g)
    second = torch.einsum("ze,wzei,wzej->wij", p, g, g)
    h_second = second / M + (1 - 1 / M) * mean[:, :, None] * mean[:, None, :]
    cross = gamma @ mean[:, :, None] * w[:, None, :]  # E[Γ h wᵀ | w] (W, d, d)
    residual = gamma @ h_second @ gamma.T - cross - cross.transpose(1, 2) + w[:, :, None] * w[:, None, :]
    risk = 0.5 * (torch.einsum("ij,wji->w", query_covariance, residual) + label_noise ** 2)
    return (pw * risk).sum()


def _laws(seed: int = SEED) -> list[tuple[str, torch.Tensor, dict]]:
    """(label, Γ, the law's keywords for ``lsa_risk``) of the exact checks: Γ* and a random Γ on Λ at N = 20, Γ* on
    contexts and query of 2Λ, Γ* at M = 50, and a random Γ under a query shift with M = 7 and τ = 0.5."""
    covariance = anisotropic_covariance(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    d = covariance.shape[0]
    star = optimal_preconditioner(covariance, N_CONTEXT)
    other = anisotropic_covariance(seed + 2, (2.0, 0.3, 1.5, 0.7, 0.1))
    random_gamma = star + 0.3 * torch.randn(d, d, generator=gen, dtype=torch.float64)
    return [
        ("Γ*", star, dict(context_covariance=covariance, n_context=N_CONTEXT)),
        ("random Γ", random_gamma, dict(context_covariance=covariance, n_context=N_CONTEXT)),
        ("Γ* on 2Λ", star, dict(context_covariance=2 * covariance, n_context=N_CONTEXT)),
        ("Γ* at M = 50", star, dict(context_covariance=covariance, n_context=50)),
        ("random Γ, query shift, τ = 0.5", random_gamma,
         dict(context_covariance=covariance, n_context=7, query_covariance=other, label_noise=0.5)),
    ]


def check_risk_is_exact(seed: int = SEED, tolerance: float = EXACT, risk: Risk = lsa_risk) -> CheckResult:
    """``risk`` (the closed form by default) against ``quadrature_risk`` on the laws of ``_laws``."""
    results = [compare(risk(gamma, **law), quadrature_risk(gamma, **law), tolerance) for _, gamma, law in _laws(seed)]
    return merge(results)


def _gradient(gamma: torch.Tensor, law: dict) -> torch.Tensor:
    gamma = gamma.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(lsa_risk(gamma, **law), gamma)
    return grad


def check_stationary(seed: int = SEED, tolerance: float = EXACT, n_perturbations: int = 32,
                     preconditioner: Callable[..., torch.Tensor] = optimal_preconditioner) -> CheckResult:
    """At Γ = ``preconditioner``(Λ_c, M, τ): the autograd gradient of R relative to Λ_q Λ_c (the gradient's linear
    term), and R(Γ + δ) - R(Γ) against ½ tr(δᵀ Λ_q δ H) for random δ (entries N(0, 0.1²)), relative to the
    largest; on Λ at N = 20 without and with noise, and on 2Λ at M = 50 with a query of another covariance. And
    R(Γ*) against ``one_layer_optimum``'s ½ (tr Λ + τ² - tr(Γ* Λ²))."""
    covariance = anisotropic_covariance(seed)
    other = anisotropic_covariance(seed + 2, (2.0, 0.3, 1.5, 0.7, 0.1))
    gen = torch.Generator().manual_seed(seed + 3)
    laws = [dict(context_covariance=covariance, n_context=N_CONTEXT),
            dict(context_covariance=covariance, n_context=N_CONTEXT, label_noise=0.5),
            dict(context_covariance=2 * covariance, n_context=50, query_covariance=other)]
    results, cheapest = [], math.inf
    for law in laws:
        tau = law.get("label_noise", 0.0)
        gamma = preconditioner(law["context_covariance"], law["n_context"], tau)
        query = law.get("query_covariance", law["context_covariance"])
        results.append(_relative(_gradient(gamma, law), query @ law["context_covariance"], tolerance))
        second = context_second_moment(law["context_covariance"], law["n_context"], tau)
        deltas = 0.1 * torch.randn(n_perturbations, *gamma.shape, generator=gen, dtype=torch.float64)
        base = lsa_risk(gamma, **law)
        cost = torch.stack([lsa_risk(gamma + delta, **law) - base for delta in deltas])
        exact = torch.stack([0.5 * torch.trace(delta.T @ query @ delta @ second) for delta in deltas])
        cheapest = min(cheapest, float(cost.min()))
        results.append(compare(cost, exact, tolerance))
        if "query_covariance" not in law:
            optimum = one_layer_optimum(law["context_covariance"], law["n_context"], tau)
            results.append(compare(torch.tensor(optimum.lsa_loss, dtype=torch.float64), base, tolerance))
    return merge(results, f"{len(laws) * n_perturbations} perturbations of Γ*, the cheapest costing "
                          f"{cheapest:+.2e}")


def _relative(actual: torch.Tensor, scale: torch.Tensor, tolerance: float) -> CheckResult:
    """|actual| (which should be 0) relative to max|scale|."""
    error = actual.abs().max().item()
    return CheckResult(error, error / scale.abs().max().item(), tolerance)


def check_gradient_finite_difference(seed: int = SEED, tolerance: float = EXACT, step: float = 1e-3) -> CheckResult:
    """The autograd gradient of R at every Γ of ``_laws`` against central differences of step ``step`` in each
    entry, relative to Λ_q Λ_c (the gradient's linear term; the gradient itself is 0 at Γ*): R is quadratic, so
    the difference is exact but for rounding (about 1e-16 · R / step)."""
    results = []
    for _, gamma, law in _laws(seed):
        grad = _gradient(gamma, law)
        difference = torch.zeros_like(gamma)
        for i, j in itertools.product(range(gamma.shape[0]), repeat=2):
            bump = torch.zeros_like(gamma)
            bump[i, j] = step
            difference[i, j] = (lsa_risk(gamma + bump, **law) - lsa_risk(gamma - bump, **law)) / (2 * step)
        query = law.get("query_covariance", law["context_covariance"])
        results.append(_relative(difference - grad, query @ law["context_covariance"], tolerance))
    return merge(results)


def check_scalar_step(seed: int = SEED, tolerance: float = EXACT) -> CheckResult:
    """η* = ``optimal_scalar_step`` on Λ at N = 20 (τ = 0 and 0.5): dR(ηI)/dη by autograd at η* relative to its
    value at η = 0 (R is a convex parabola in η, so a zero is the argmin), and R(η* I) against
    ``one_layer_optimum``'s ½ (tr Λ + τ² - η* tr Λ²); ``detail``: η*, R(η* I), R(Γ*) and the gap Γ* closes."""
    covariance = anisotropic_covariance(seed)
    eye = torch.eye(covariance.shape[0], dtype=torch.float64)
    results, lines = [], []
    for tau in (0.0, 0.5):
        law = dict(context_covariance=covariance, n_context=N_CONTEXT, label_noise=tau)
        eta = optimal_scalar_step(covariance, N_CONTEXT, tau)
        slopes = []
        for at in (eta, 0.0):
            step = torch.tensor(at, dtype=torch.float64, requires_grad=True)
            (slope,) = torch.autograd.grad(lsa_risk(step * eye, **law), step)
            slopes.append(slope)
        results.append(_relative(slopes[0], slopes[1], tolerance))
        optimum = one_layer_optimum(covariance, N_CONTEXT, tau)
        results.append(compare(torch.tensor(optimum.gd_loss, dtype=torch.float64), lsa_risk(eta * eye, **law),
                               tolerance))
        lines.append(f"τ = {tau}: η* {eta:.5f}, R(η*I) {optimum.gd_loss:.5f}, R(Γ*) {optimum.lsa_loss:.5f} "
                     f"(Γ* {100 * optimum.gap / optimum.gd_loss:.1f}% lower)")
    return merge(results, "; ".join(lines))


def check_isotropic_is_one_step_gd(tolerance: float = 1e-12) -> CheckResult:
    """At Λ = σ² I: Γ* against η* I, R(Γ*) against the loss, ``optimal_scalar_step`` against η*, and R(ηI) at
    η = 0.8 η* against ``loss_at``, all of ``population_one_step_gd(d, N, "gaussian", σ, label_noise=τ)``; for
    (d, N, σ, τ) = (10, 10, 1, 0), (5, 20, 0.7, 0.3) and (3, 1, 2, 1)."""
    results = []
    for d, n, sigma, tau in ((10, 10, 1.0, 0.0), (5, 20, 0.7, 0.3), (3, 1, 2.0, 1.0)):
        reference = population_one_step_gd(d, n, "gaussian", sigma, label_noise=tau)
        covariance = sigma ** 2 * torch.eye(d, dtype=torch.float64)
        eye = torch.eye(d, dtype=torch.float64)
        gamma = optimal_preconditioner(covariance, n, tau)
        law = dict(context_covariance=covariance, n_context=n, label_noise=tau)
        results += [compare(gamma, reference.eta * eye, tolerance),
                    compare(lsa_risk(gamma, **law), _scalar(reference.loss), tolerance),
                    compare(_scalar(optimal_scalar_step(covariance, n, tau)), _scalar(reference.eta), tolerance),
                    compare(lsa_risk(0.8 * reference.eta * eye, **law), _scalar(reference.loss_at(0.8 * reference.eta)),
                            tolerance)]
    return merge(results)


def check_float32(seed: int = SEED, tolerance: float = 1e-5) -> CheckResult:
    """Γ*, R(Γ*) on Λ, on 2Λ and at M = 50, and η*, computed in float32 against float64."""
    results = []
    for dtype_law in (torch.float32, torch.float64):
        covariance = anisotropic_covariance(seed, dtype=dtype_law)
        gamma = optimal_preconditioner(covariance, N_CONTEXT)
        values = [gamma.flatten(), lsa_risk(gamma, covariance, N_CONTEXT)[None],
                  lsa_risk(gamma, 2 * covariance, N_CONTEXT)[None], lsa_risk(gamma, covariance, 50)[None],
                  torch.tensor([optimal_scalar_step(covariance, N_CONTEXT)], dtype=dtype_law)]
        results.append([v.to(torch.float64) for v in values])
    single, double = results
    return merge([compare(a, b, tolerance) for a, b in zip(single, double)])


def check_monte_carlo(case: str, n_tasks: int = 100_000, seed: int = SEED, tolerance: float = 3e-2,
                      risk: Risk = lsa_risk, chunk: int = 25_000) -> CheckResult:
    """R in closed form (``risk``) against the mean sampled query loss ½ (ŷ - y_q)² of ``n_tasks`` tasks of the
    project's sampler (the TEST stream of ``seed``, float64), for the layer trained on Λ at N = 20:

    - "matched": Γ* on its own law; "shifted": Γ* on contexts and query of covariance 2Λ; "longer": Γ* on
      M = 50 context pairs; "gd": one GD step (``gd_predict``) at η* with label noise τ = 0.5, on Λ at N = 20.

    Passes when the relative error is below 4 of its standard errors and below ``tolerance``."""
    covariance = anisotropic_covariance(seed)
    test, n_context, tau = {"matched": (covariance, N_CONTEXT, 0.0), "shifted": (2 * covariance, N_CONTEXT, 0.0),
                            "longer": (covariance, 50, 0.0), "gd": (covariance, N_CONTEXT, 0.5)}[case]
    if case == "gd":
        eta = optimal_scalar_step(covariance, N_CONTEXT, tau)
        gamma = eta * torch.eye(covariance.shape[0], dtype=torch.float64)
    else:
        gamma = optimal_preconditioner(covariance, N_CONTEXT)
    task = LinearRegressionTask(d=covariance.shape[0], n_context=n_context, label_noise=tau,
                                inputs=NormalInputs(covariance=tuple(map(tuple, test.tolist()))))
    losses = []
    for step in range(math.ceil(n_tasks / chunk)):
        batch = task.sample(min(chunk, n_tasks - step * chunk), seed, step, Stream.TEST, dtype=torch.float64)
        if case == "gd":
            prediction = gd_predict(batch.x_context, batch.y_context, batch.x_query, [eta])[:, 0]
        else:
            h = (batch.y_context * batch.x_context).mean(1)  # (B, d)
            prediction = torch.einsum("bi,ij,bj->b", batch.x_query, gamma, h)
        losses.append(0.5 * (prediction - batch.y_query[:, 0]) ** 2)
    loss = torch.cat(losses)
    sampled, error = loss.mean(), loss.std() / len(loss) ** 0.5
    closed = risk(gamma, test, n_context, label_noise=tau)
    result = compare(sampled, closed, min(tolerance, 4 * float(error / closed)))
    preconditioner = f"η* I (η* {eta:.5f})" if case == "gd" else "Γ* of Λ, N = 20,"
    detail = (f"{preconditioner} on {'contexts and query 2Λ' if case == 'shifted' else 'Λ'}, M = {n_context}, "
              f"τ = {tau}: "
              f"R {float(closed):.5f} (Monte Carlo {float(sampled):.5f} ± {float(error):.5f}, "
              f"{float((sampled - closed) / error):+.1f} SE; {len(loss)} tasks)")
    return CheckResult(result.max_abs_error, result.max_rel_error, result.tolerance, detail)


def _scalar(value: float) -> torch.Tensor:
    return torch.tensor(float(value), dtype=torch.float64)


IDENTITY_CHECKS = (
    IdentityCheck("theory: LSA risk = Gauss-Hermite expectation", check_risk_is_exact),
    IdentityCheck("theory: Γ* stationary, perturbations cost ½tr(δᵀΛδH)", check_stationary),
    IdentityCheck("theory: risk gradient = central difference", check_gradient_finite_difference),
    IdentityCheck("theory: η* minimises R(ηI); R(η*I), R(Γ*) closed", check_scalar_step),
    IdentityCheck("theory: Λ = σ²I gives one-step GD's η* and loss", check_isotropic_is_one_step_gd),
    IdentityCheck("theory: float32 closed forms = float64", check_float32),
    IdentityCheck("theory: R(Γ*) = Monte Carlo, d = 5, N = 20", partial(check_monte_carlo, "matched")),
    IdentityCheck("theory: R(Γ*) = Monte Carlo, contexts and query 2Λ", partial(check_monte_carlo, "shifted")),
    IdentityCheck("theory: R(Γ*) = Monte Carlo, M = 50 contexts", partial(check_monte_carlo, "longer")),
    IdentityCheck("theory: R(η*I) = Monte Carlo one GD step, τ = 0.5", partial(check_monte_carlo, "gd")),
)
