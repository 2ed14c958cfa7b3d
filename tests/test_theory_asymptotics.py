"""Lu et al.'s asymptotic errors (``icl_gd.regression.task_diversity.asymptotics``), the finite-d layer they describe
(``finite_tasks``), the authors' stored simulations, the `finite-tasks` study and docs/theory-asymptotics.md: each
closed form holds against its independent route and fails when a term is dropped; gradient descent from Γ = 0
reaches the Γ that ``fit_preconditioner`` solves for; the study writes what its claims read."""

from __future__ import annotations

import json
import math
import re
import runpy
from pathlib import Path

import pytest
import torch

from icl_gd.constructions import theory_asymptotics as checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import Stream, make_generator
from icl_gd.regression.task_diversity import asymptotics as lu
from icl_gd.regression.task_diversity.finite_tasks import (FiniteTaskConfig, attention_features, draw_pretraining,
                                                   draw_summaries, fit_preconditioner, layer_error)
from icl_gd.regression.task_diversity.lu_simulations import LU_SIMULATIONS, load_lu_simulations

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64


# ------------------------------------------------------------------------------------------------ the closed forms
@pytest.mark.parametrize("check", checks.IDENTITY_CHECKS, ids=lambda c: c.name)
def test_every_check_passes(check):
    result = check.run()
    assert result.passed, (result, check.name)


def test_dropped_terms_fail_their_checks():
    """A slip planted in each closed form is caught by the check that owns it."""
    def wrong_stieltjes(x, kappa):  # the 1/κ of the quadratic's linear term dropped
        return 2 / ((x + 1) + math.sqrt((x + 1) ** 2 + 4 * x / kappa))

    def wrong_population_icl(alpha, kappa, rho, ridge=0.0):  # (1 + x*) of the variance term dropped
        x = lu.effective_noise(alpha, rho)
        m = lu.marchenko_pastur_stieltjes(x, kappa)
        return rho + x - 2 * x * x * m - x * x * lu.marchenko_pastur_stieltjes_derivative(x, kappa)

    def wrong_ridgeless(alpha, kappa, tau, rho):  # least squares' variance term dropped (τ > 1)
        return lu.population_icl_error(alpha, kappa, rho) if tau > 1 else lu.ridgeless_icl_error(alpha, kappa, tau,
                                                                                                 rho)

    def wrong_layer_error(gamma, moment, n_context, rho):  # the context's noise (tr Σ_w/d + ρ)(d/ℓ) I dropped
        d = gamma.shape[0]
        second = (1 + 1 / n_context) * moment
        return (torch.trace(gamma @ second @ gamma.T) - 2 * torch.trace(gamma @ moment) + torch.trace(moment)) / d \
            + rho

    assert not checks.check_stieltjes_exact(stieltjes=wrong_stieltjes).passed
    assert not checks.check_finite_d_traces(d=300, stieltjes=wrong_stieltjes).passed
    assert not checks.check_large_kappa_limits(population_icl=wrong_population_icl).passed
    assert not checks.check_finite_d_traces(d=300, population_icl=wrong_population_icl).passed
    assert not checks.check_ridgeless_forms(ridgeless=wrong_ridgeless).passed
    assert not checks.check_layer_error_monte_carlo(n=20_000, error=wrong_layer_error).passed
    assert not checks.check_summary_moments(
        n=20_000, summaries=lambda tasks, ell, rho, gen: draw_summaries(tasks, ell, 0.0, gen)).passed


def test_closed_forms_against_the_authors_code_values():
    """Values of their theory_runs/common.py at c6902221 (``ridgeless_icl``, ``ridgeless_idg``), computed by it."""
    assert lu.ridgeless_icl_error(10, 0.2, 10, 0.01) == pytest.approx(0.8583340, rel=1e-6)
    assert lu.idg_error(10, 0.2, 10, 0.01) == pytest.approx(0.0330061, rel=1e-5)
    assert lu.ridgeless_icl_error(10, 32, 10, 0.01) == pytest.approx(0.1135724, rel=1e-6)
    assert lu.ridgeless_icl_error(10, 0.5, 0.5, 0.01) == pytest.approx(0.8208492721492245, rel=1e-12)
    assert lu.idg_error(10, 0.5, 0.5, 0.01) == pytest.approx(0.2463433636506817, rel=1e-12)
    assert math.isinf(lu.ridgeless_icl_error(10, 1, 1, 0.01)) and math.isinf(lu.idg_error(10, 1, 1, 0.01))


def test_project_units():
    """Their e (x ~ N(0, I/d)) is ½ d e in the project's ½-squared error on x_p = √d x; noise std √(d ρ)."""
    assert lu.project_risk(0.2, 25) == pytest.approx(2.5)
    assert lu.project_label_noise(0.01, 25) == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="d must be a positive integer"):
        lu.project_risk(0.2, 0)


@pytest.mark.parametrize("call, message", [
    (lambda: lu.ridgeless_icl_error(0, 1, 2, 0.1), "alpha must be positive"),
    (lambda: lu.idg_error(1, -1, 2, 0.1), "kappa must be positive"),
    (lambda: lu.icl_error(1, 1, 2, -0.1), "rho must be non-negative"),
    (lambda: lu.icl_error(1, 1, 2, 0.1, ridge=-1), "ridge must be non-negative"),
    (lambda: FiniteTaskConfig(d=1), "d must be an integer in 2..256"),
    (lambda: FiniteTaskConfig(kappas=(0.2, -1.0)), "kappas must be positive"),
    (lambda: FiniteTaskConfig(d=4, kappas=(0.1,)), "gives K = 0 tasks"),
])
def test_bad_values_are_refused(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


# ----------------------------------------------------------------------------------------- training = least squares
@pytest.mark.parametrize("n", [40, 5])
def test_gradient_descent_from_zero_reaches_the_solved_gamma(n):
    """GD on Σ_μ (y_μ - x_μᵀ Γ h_μ)² from Γ = 0 stays in the span of the features and converges to the least-squares Γ
    (n ≥ d²) or the minimum-norm interpolant (n < d²): what ``fit_preconditioner`` returns, to 1e-9."""
    d = 3
    tasks = torch.randn(4, d, generator=make_generator(0, n, Stream.POOL), dtype=F64)
    data = draw_pretraining(tasks, n, 2 * d, 0.05, make_generator(0, n, Stream.TRAIN))
    z = attention_features(data.x_query, data.h)
    step = 1 / float(torch.linalg.matrix_norm(z, ord=2)) ** 2
    gamma = torch.zeros(d * d, dtype=F64)
    for _ in range(20_000):
        gamma += step * z.T @ (data.y_query - z @ gamma)
    solved = fit_preconditioner(data.x_query, data.h, data.y_query).flatten()
    torch.testing.assert_close(gamma, solved, rtol=1e-9, atol=1e-9 * float(solved.abs().max()))
    if n < d * d:  # an interpolant of the training labels
        torch.testing.assert_close(z @ solved, data.y_query, rtol=1e-9, atol=1e-9)


def test_layer_error_of_the_identity_is_one_gd_step_error():
    """Γ = I on fresh tasks: e = (1/d)(tr H - 2d + d) + ρ = 1/ℓ + (1 + ρ) d/ℓ + ρ, h's own error."""
    d, ell, rho = 7, 30, 0.2
    eye = torch.eye(d, dtype=F64)
    assert float(layer_error(eye, eye, ell, rho)) == pytest.approx(1 / ell + (1 + rho) * d / ell + rho, rel=1e-12)


# ----------------------------------------------------------------------------------------- their stored simulations
def test_stored_simulations_carry_their_provenance():
    raw = json.loads(LU_SIMULATIONS.read_text())
    assert raw["repository"] == "mletey/incontext-cleanup" and len(raw["commit"]) == 40
    stored = load_lu_simulations()
    assert stored.dimensions == (10, 32, 64)
    series = stored.series_of("linear attention", 32)
    assert series.path == "quick_and_easy_figure/saved_data/d32_gamma.csv" and series.draws == 20
    assert series.at(0.2)[0] == pytest.approx(1.0098604919977128) and series.at(0.3) is None
    assert stored.series_of("dMMSE", 64).draws == 1000
    with pytest.raises(ConfigError, match="estimator must be one of"):
        stored.series_of("ridge", 10)


# ------------------------------------------------------------------------------------------------------- the study
def test_the_study_writes_what_its_claims_read(tmp_path):
    from icl_gd.claims import SeedEvidence
    from icl_gd.claims.registry.beyond_asymptotics import BEYOND_ASYMPTOTIC_CLAIMS
    from icl_gd.studies import run as run_study
    from icl_gd.studies.finite_tasks import STUDY

    run_study("finite-tasks", tmp_path, overrides=list(STUDY.tiny), progress=False, figures=False)
    metrics = json.loads((tmp_path / "metrics.json").read_text())["seeds"]
    evidence = SeedEvidence(metrics=(metrics["0"],), run_dirs=(tmp_path,))
    for claim in BEYOND_ASYMPTOTIC_CLAIMS:
        assert math.isfinite(claim.statistic(evidence)), claim.id
    rows = (tmp_path / "kappa.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2  # two d, two κ, one seed
    assert metrics["0"]["icl_over_idg_smallest_kappa"] > 2


def test_bad_study_config_is_refused():
    from icl_gd.studies.finite_tasks import FiniteTasksConfig

    with pytest.raises(ConfigError, match="dims must be increasing integers"):
        FiniteTasksConfig(dims=(32, 10))
    with pytest.raises(ConfigError, match="kappas must be increasing"):
        FiniteTasksConfig(kappas=(2.0, 1.0))


# -------------------------------------------------------------------------------------------------------- the docs
def test_the_docs_page_example_runs(capsys, tmp_path):
    page = (ROOT / "docs" / "theory-asymptotics.md").read_text()
    code = re.search(r"<!-- asymptotics-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    runpy.run_path(str(tmp_path / "example.py"))
    icl, idg = lu.ridgeless_icl_error(10, 0.2, 10, 0.01), lu.idg_error(10, 0.2, 10, 0.01)
    assert capsys.readouterr().out.splitlines()[0] == f"kappa = 0.2: e_ICL = {icl:.4f}, e_IDG = {idg:.4f}"


def test_the_docs_page_lists_every_check_in_order():
    page = (ROOT / "docs" / "theory-asymptotics.md").read_text()
    listed = re.findall(r"^ok   (.+)$", page, re.MULTILINE)
    assert listed == [c.name for c in checks.IDENTITY_CHECKS]
