"""The one-layer theory (``icl_gd.regression.theory.one_layer``): the closed-form risk against an exact quadrature
expectation and against the project's one-step GD reference, Γ*'s optimality, the shift formulas, and the checks of
``icl-gd verify`` (``constructions/theory.py``) failing when a factor is wrong."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
import torch

from icl_gd.constructions import theory as checks
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.population.one_step import population_one_step_gd, population_one_step_gd_of_task
from icl_gd.regression.theory.one_layer import (context_second_moment, lsa_risk, one_layer_optimum,
                                                 optimal_preconditioner, optimal_scalar_step)
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64


def _random_covariance(gen: torch.Generator, d: int) -> torch.Tensor:
    a = torch.randn(d, d, generator=gen, dtype=F64)
    return a @ a.T / d + 0.1 * torch.eye(d, dtype=F64)


def _wrong_preconditioner(covariance, n_context, label_noise=0.0):
    """Γ* with 1 in place of (1 + 1/N): the fourth moment's 2 Λ w wᵀ Λ read as Λ w wᵀ Λ."""
    eye = torch.eye(covariance.shape[0], dtype=covariance.dtype)
    return torch.linalg.inv(covariance + (torch.trace(covariance) + label_noise ** 2) / n_context * eye)


def _wrong_risk(gamma, context_covariance, n_context, *, query_covariance=None, label_noise=0.0):
    """R with H = (1 + 0/M) Λ_c² + ...: the same slip in the risk."""
    query = context_covariance if query_covariance is None else query_covariance
    second = context_second_moment(context_covariance, n_context, label_noise) \
        - context_covariance @ context_covariance / n_context
    return 0.5 * (torch.trace(gamma.T @ query @ gamma @ second) - 2 * torch.trace(query @ gamma @ context_covariance)
                  + torch.trace(query) + label_noise ** 2)


# ------------------------------------------------------------------------------------- the project's one-step GD
@pytest.mark.parametrize("d, n, std, noise",
                         [(10, 10, 1.0, 0.0), (5, 20, 0.7, 0.3), (3, 1, 2.0, 1.0), (1, 4, 1.5, 0.2)])
def test_isotropic_gaussian_task_is_the_population_one_step_gd(d, n, std, noise):
    """The project's task with NormalInputs(std=σ) is this law at Λ = σ² I: Γ* = η* I, and R is E query_loss of
    one GD step at every η (population_one_step_gd_of_task's η*, loss and loss_at)."""
    reference = population_one_step_gd_of_task(LinearRegressionTask(d=d, n_context=n, inputs=NormalInputs(std=std),
                                                                    label_noise=noise))
    covariance, eye = std ** 2 * torch.eye(d, dtype=F64), torch.eye(d, dtype=F64)
    gamma = optimal_preconditioner(covariance, n, noise)
    torch.testing.assert_close(gamma, reference.eta * eye, rtol=1e-13, atol=0)
    assert optimal_scalar_step(covariance, n, noise) == pytest.approx(reference.eta, rel=1e-13)
    assert float(lsa_risk(gamma, covariance, n, label_noise=noise)) == pytest.approx(reference.loss, rel=1e-13)
    for eta in (0.0, 0.5 * reference.eta, 1.7 * reference.eta):
        assert float(lsa_risk(eta * eye, covariance, n, label_noise=noise)) == pytest.approx(
            reference.loss_at(eta), rel=1e-13)
    optimum = one_layer_optimum(covariance, n, noise)
    assert optimum.gap == pytest.approx(0.0, abs=1e-14)
    assert optimum.lsa_loss == pytest.approx(reference.loss, rel=1e-13)


def test_a_wrong_one_plus_one_over_n_is_not_the_one_step_gd_reference():
    """The isotropic Γ* with the (1 + 1/N) dropped is N/(N + d), not N/(N + d + 1): 1/(N + d + 1) off."""
    reference = population_one_step_gd(5, 20, "gaussian")
    wrong = _wrong_preconditioner(torch.eye(5, dtype=F64), 20)
    assert float(wrong[0, 0]) / reference.eta - 1 == pytest.approx(1 / 25, rel=1e-12)


# --------------------------------------------------------------------------------- the risk against an exact sum
@pytest.mark.parametrize("seed", range(6))
def test_the_risk_is_the_quadrature_expectation_for_random_laws(seed):
    """Random Γ (not symmetric), Λ_c, Λ_q, M and τ in d = 1..4: the closed form equals the Gauss-Hermite expectation
    (exact for the polynomial integrand) to rounding."""
    gen = torch.Generator().manual_seed(seed)
    d = 1 + seed % 4
    context, query = _random_covariance(gen, d), _random_covariance(gen, d)
    gamma = torch.randn(d, d, generator=gen, dtype=F64)
    n, noise = int(torch.randint(1, 30, (), generator=gen)), float(torch.rand((), generator=gen))
    law = dict(context_covariance=context, n_context=n, query_covariance=query, label_noise=noise)
    closed, exact = float(lsa_risk(gamma, **law)), float(checks.quadrature_risk(gamma, **law))
    assert closed == pytest.approx(exact, rel=1e-12)
    assert float(_wrong_risk(gamma, **law)) != pytest.approx(exact, rel=1e-3)


def test_the_risk_is_zhang_frei_bartletts_expansion_for_a_gamma_that_commutes_with_lambda():
    """For Γ a polynomial in Λ and τ = 0: R = ½ {tr[(ΓΛ - I)² Λ] + (1/M) [tr(Γ² Λ³) + tr Λ tr(Γ² Λ²)]}."""
    covariance = checks.anisotropic_covariance()
    eye = torch.eye(5, dtype=F64)
    gamma = 0.3 * eye + 0.9 * covariance - 0.2 * covariance @ covariance
    for m in (1, 20, 50):
        expansion = 0.5 * (torch.trace((gamma @ covariance - eye) @ (gamma @ covariance - eye) @ covariance)
                           + (torch.trace(gamma @ gamma @ covariance @ covariance @ covariance)
                              + torch.trace(covariance) * torch.trace(gamma @ gamma @ covariance @ covariance)) / m)
        assert float(lsa_risk(gamma, covariance, m)) == pytest.approx(float(expansion), rel=1e-13)


# -------------------------------------------------------------------------------------------------- the optimum
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_the_optimal_risk_is_the_eigenvalue_sum(noise):
    """R(Γ*) = ½ Σ_k λ_k (λ_k + tr Λ + τ²) / ((N + 1) λ_k + tr Λ + τ²) + ½ τ² (docs/theory.md)."""
    covariance, n = checks.anisotropic_covariance(), 20
    eigenvalues = torch.tensor(checks.SPECTRUM, dtype=F64)
    spread = float(eigenvalues.sum()) + noise ** 2
    expected = 0.5 * float((eigenvalues * (eigenvalues + spread) / ((n + 1) * eigenvalues + spread)).sum()) \
        + 0.5 * noise ** 2
    gamma = optimal_preconditioner(covariance, n, noise)
    assert float(lsa_risk(gamma, covariance, n, label_noise=noise)) == pytest.approx(expected, rel=1e-13)
    assert one_layer_optimum(covariance, n, noise).lsa_loss == pytest.approx(expected, rel=1e-13)


def test_gamma_star_beats_every_perturbation_and_the_wrong_factor():
    covariance = checks.anisotropic_covariance()
    gen = torch.Generator().manual_seed(7)
    gamma = optimal_preconditioner(covariance, 20)
    best = float(lsa_risk(gamma, covariance, 20))
    for _ in range(50):
        assert float(lsa_risk(gamma + 1e-3 * torch.randn(5, 5, generator=gen, dtype=F64), covariance, 20)) > best
    assert float(lsa_risk(_wrong_preconditioner(covariance, 20), covariance, 20)) > best


def test_the_optimum_does_not_depend_on_the_query_covariance():
    """∇R = Λ_q (Γ H - Λ_c): Γ H = Λ_c zeroes it for every Λ_q."""
    gen = torch.Generator().manual_seed(3)
    context = checks.anisotropic_covariance()
    gamma = optimal_preconditioner(context, 9, 0.4).requires_grad_(True)
    for _ in range(3):
        query = _random_covariance(gen, 5)
        (grad,) = torch.autograd.grad(lsa_risk(gamma, context, 9, query_covariance=query, label_noise=0.4), gamma)
        assert grad.abs().max() < 1e-13


def test_the_scalar_step_is_the_argmin_along_eta_and_gamma_star_closes_a_gap():
    covariance = checks.anisotropic_covariance()
    eye = torch.eye(5, dtype=F64)
    optimum = one_layer_optimum(covariance, 20)
    grid = torch.linspace(0.5, 1.2, 701, dtype=F64)
    risks = torch.stack([lsa_risk(eta * eye, covariance, 20) for eta in grid])
    assert float(grid[risks.argmin()]) == pytest.approx(optimum.eta, abs=1e-3)
    assert float(risks.min()) >= optimum.gd_loss - 1e-15
    assert optimum.gap > 0.05 * optimum.gd_loss  # 12% at this spectrum


# ---------------------------------------------------------------------------------------------------- the shifts
@pytest.mark.parametrize("c", [0.5, 1.0, 2.0, 3.0])
def test_covariate_shift_by_c(c):
    """Noise-free, M = N, contexts and query from N(0, cΛ): R(Γ*) = ½ Σ_k c λ_k (1 - c (2 - c) λ_k γ_k), γ_k Γ*'s
    eigenvalues; at c = 2 that is ½ tr(2Λ), the risk of predicting 0."""
    covariance, n = checks.anisotropic_covariance(), 20
    eigenvalues = torch.tensor(checks.SPECTRUM, dtype=F64)
    gammas = 1 / ((1 + 1 / n) * eigenvalues + eigenvalues.sum() / n)
    expected = 0.5 * float((c * eigenvalues * (1 - c * (2 - c) * eigenvalues * gammas)).sum())
    risk = float(lsa_risk(optimal_preconditioner(covariance, n), c * covariance, n))
    assert risk == pytest.approx(expected, rel=1e-13)
    if c == 2.0:
        assert risk == pytest.approx(0.5 * float(torch.trace(2 * covariance)), rel=1e-13)


def test_a_longer_context_lowers_the_risk_of_the_trained_gamma():
    covariance = checks.anisotropic_covariance()
    gamma = optimal_preconditioner(covariance, 20)
    risks = [float(lsa_risk(gamma, covariance, m)) for m in (5, 20, 50, 1000)]
    assert risks == sorted(risks, reverse=True)
    # M → ∞: H → Λ², R → ½ tr[(Γ Λ - I)² Λ], above the M = ∞ optimum 0
    limit = 0.5 * float(torch.trace((gamma @ covariance - torch.eye(5, dtype=F64)) @ (gamma @ covariance
                                    - torch.eye(5, dtype=F64)) @ covariance))
    assert float(lsa_risk(gamma, covariance, 10 ** 9)) == pytest.approx(limit, rel=1e-7)


# ----------------------------------------------------------------------------------------- float32 and errors
def test_float32_follows_float64():
    single, double = checks.anisotropic_covariance(dtype=torch.float32), checks.anisotropic_covariance()
    gamma32, gamma64 = optimal_preconditioner(single, 20), optimal_preconditioner(double, 20)
    assert gamma32.dtype == torch.float32
    torch.testing.assert_close(gamma32.double(), gamma64, rtol=1e-5, atol=1e-6)
    assert float(lsa_risk(gamma32, single, 20)) == pytest.approx(float(lsa_risk(gamma64, double, 20)), rel=1e-5)


@pytest.mark.parametrize("bad", [
    dict(covariance=torch.tensor([[1.0, 0.5], [0.0, 1.0]], dtype=F64)),
    dict(covariance=torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=F64)),
    dict(covariance=torch.zeros(2, 2, dtype=F64)),
    dict(covariance=torch.ones(2, dtype=F64)),
    dict(n_context=0),
    dict(label_noise=-0.1),
])
def test_bad_laws_raise_config_errors(bad):
    law = dict(covariance=torch.eye(2, dtype=F64), n_context=3, label_noise=0.0) | bad
    with pytest.raises(ConfigError):
        optimal_preconditioner(**law)
    with pytest.raises(ConfigError):
        optimal_scalar_step(**law)


def test_lsa_risk_rejects_mismatched_shapes():
    with pytest.raises(ConfigError):
        lsa_risk(torch.eye(3, dtype=F64), torch.eye(2, dtype=F64), 4)


# ------------------------------------------------------------------------------------------------ icl-gd verify
def test_the_checks_are_registered_and_the_exact_ones_hold_at_rounding():
    names = [c.name for c in all_checks()]
    assert all(c.name in names for c in checks.IDENTITY_CHECKS)
    for check in checks.IDENTITY_CHECKS:
        if "Monte Carlo" in check.name:
            continue
        result = check.run()
        assert result.passed, (check.name, result)


@pytest.mark.parametrize("case", ["matched", "shifted", "longer", "gd"])
def test_the_monte_carlo_checks_pass_on_fewer_tasks(case):
    """At 20 000 tasks 4 standard errors are 5 to 7% of R: the fixed 3% gives way to 10%."""
    result = checks.check_monte_carlo(case, n_tasks=20_000, tolerance=0.1)
    assert result.passed and result.tolerance < 0.1, result


def test_the_checks_fail_for_the_wrong_factor():
    """(1 + 1/N) → 1: the risk against quadrature, Γ*'s stationarity, and Monte Carlo (the risk of Γ* is 14% off)
    each catch it."""
    assert not checks.check_risk_is_exact(risk=_wrong_risk).passed
    assert not checks.check_stationary(preconditioner=_wrong_preconditioner).passed
    assert not checks.check_monte_carlo("matched", n_tasks=20_000, tolerance=0.1, risk=_wrong_risk).passed


# ---------------------------------------------------------------------------------------------------- the docs
def test_the_docs_page_example_runs(capsys, tmp_path):
    page = (ROOT / "docs" / "theory.md").read_text()
    code = re.search(r"<!-- theory-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    runpy.run_path(str(tmp_path / "example.py"))
    optimum = one_layer_optimum(checks.anisotropic_covariance(), 20)
    assert capsys.readouterr().out.splitlines() == [
        f"eta* = {optimum.eta:.5f}, R(eta* I) = {optimum.gd_loss:.5f}, R(Gamma*) = {optimum.lsa_loss:.5f}"]


def test_the_docs_page_quotes_the_verify_lines_of_these_checks():
    """The page's verify block names every check of constructions/theory.py, in order, and its detail lines carry
    the closed-form values the checks print now (the Monte Carlo columns are not compared)."""
    page = (ROOT / "docs" / "theory.md").read_text()
    block = re.search(r"<!-- theory-verify -->\n```\n(.*?)```", page, re.DOTALL).group(1)
    quoted = re.findall(r"^(?:ok  |FAIL) \[\s*\d+/\d+\] (.+?)\s+max abs", block, re.MULTILINE)
    assert quoted == [c.name for c in checks.IDENTITY_CHECKS]
    for closed in ("R 0.41800", "R 3.75000", "R 0.22851", "R 0.61462"):
        assert closed in block
    assert checks.check_monte_carlo("matched", n_tasks=10).detail.startswith(
        "Γ* of Λ, N = 20, on Λ, M = 20, τ = 0.0: R 0.41800")
