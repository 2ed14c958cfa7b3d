"""The population-optimal one-step GD reference (``icl_gd.regression.population.one_step``) against Monte Carlo on the
project's own task sampler (the held-out tuning stream the studies tune GD's η on), against closed forms written
here independently, and its refusals.

The statistical bar: a Monte Carlo mean is accepted within Z_BAR = 4 of its own standard errors (computed from the
sample: the standard deviation of the per-task values over √B). Seeds are fixed, so each test is deterministic; a
correct formula fails a 4-SE bar with probability about 6e-5 per comparison.
"""

from __future__ import annotations

import re
import runpy
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch

from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.gd import gd_predict, optimal_one_step_eta
from icl_gd.regression.population.one_step import (
    InputMoments,
    input_moments,
    population_one_step_gd,
    population_one_step_gd_of_task,
)
from icl_gd.regression.tasks import (
    LinearRegressionTask,
    NormalInputs,
    NormalisedInputs,
    Stream,
    UniformInputs,
)

ROOT = Path(__file__).resolve().parents[1]
Z_BAR = 4.0
N_TASKS = 200_000

TASKS = {
    "default": RegressionTaskConfig().build(),  # d = N = 10, x ~ U(-1/2, 1/2)^d: the studies' task
    "uniform-wide": RegressionTaskConfig(d=5, n_context=20, input_range=2.0).build(),
    "gaussian-noisy": LinearRegressionTask(d=4, n_context=7, d_y=2, inputs=NormalInputs(0.7), weight_scale=0.5,
                                           label_noise=1.0),
}


@dataclass(frozen=True)
class OneStepSample:
    """B sampled tasks' one-step directions: ŷ(η) = η g after one GD step from 0. g, y_query: (B, d_y)."""

    g: torch.Tensor
    y_query: torch.Tensor
    tuned_eta: float  # gd.optimal_one_step_eta on these tasks

    def losses(self, eta: float) -> torch.Tensor:
        """(B,) per-task query losses ½‖η g - y_q‖²."""
        return 0.5 * ((eta * self.g - self.y_query) ** 2).sum(-1)

    def tuned_eta_standard_error(self) -> float:
        """SE of the sample minimiser η̂ = Σ g·y / Σ g·g (delta method): std(u) · √B / Σ g·g, u = g·(y - η̂ g)."""
        u = (self.g * (self.y_query - self.tuned_eta * self.g)).sum(-1)
        return float(u.std() * len(u) ** 0.5 / (self.g ** 2).sum())


def one_step_sample(task: LinearRegressionTask, n_tasks: int = N_TASKS, seed: int = 2023) -> OneStepSample:
    batch = task.sample(n_tasks, seed, 0, Stream.TUNE, dtype=torch.float64)
    g = gd_predict(batch.x_context, batch.y_context, batch.x_query, [1.0])
    tuned = optimal_one_step_eta(batch.x_context, batch.y_context, batch.x_query, batch.y_query)
    return OneStepSample(g, batch.y_query, tuned)


def mean_and_standard_error(values: torch.Tensor) -> tuple[float, float]:
    return float(values.mean()), float(values.std() / len(values) ** 0.5)


@pytest.fixture(scope="module")
def samples() -> dict[str, OneStepSample]:
    return {name: one_step_sample(task) for name, task in TASKS.items()}


# ------------------------------------------------------------------------------------------------------ (a) Monte Carlo
@pytest.mark.parametrize("name", TASKS)
def test_monte_carlo_loss_at_eta_star_and_the_sample_tuned_eta_agree_with_the_closed_form(samples, name):
    reference = population_one_step_gd_of_task(TASKS[name])
    sample = samples[name]
    mean, se = mean_and_standard_error(sample.losses(reference.eta))
    assert abs(mean - reference.loss) <= Z_BAR * se, (mean, reference.loss, se)
    assert se < 0.01 * reference.loss  # the bar is tight: under 4% of the loss
    eta_se = sample.tuned_eta_standard_error()
    assert abs(sample.tuned_eta - reference.eta) <= Z_BAR * eta_se, (sample.tuned_eta, reference.eta, eta_se)
    assert eta_se < 0.01 * reference.eta


def test_the_default_task_reference_is_the_uniform_closed_form():
    """d = N = 10, x ~ U(-1/2, 1/2)^10: σ² = 1/12, κ = 9/5, η* = 12·10/19.8, E L(η*) = ½·(10/12)·9.8/19.8."""
    reference = population_one_step_gd_of_task(RegressionTaskConfig())
    assert (reference.d, reference.n_context, reference.moments.law) == (10, 10, "uniform")
    assert reference.eta == pytest.approx(120 / 19.8, rel=1e-14)
    assert reference.loss == pytest.approx(0.5 * (10 / 12) * 9.8 / 19.8, rel=1e-14)


# ---------------------------------------------------------------------------------------------------------- (b) minimum
@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_the_monte_carlo_loss_is_higher_ten_percent_off_eta_star_by_the_closed_form_amount(samples, name, factor):
    """Paired on the same tasks: L(η*·factor) - L(η*) per task, its mean positive and within 4 SE of the closed
    form's ½ d_y σ² a (Δη)²."""
    reference = population_one_step_gd_of_task(TASKS[name])
    sample = samples[name]
    eta = reference.eta * factor
    mean, se = mean_and_standard_error(sample.losses(eta) - sample.losses(reference.eta))
    expected = reference.loss_at(eta) - reference.loss
    assert mean > 0 and expected > 0
    assert abs(mean - expected) <= Z_BAR * se, (mean, expected, se)


def test_loss_at_is_the_quadratic_through_its_minimum():
    reference = population_one_step_gd_of_task(TASKS["gaussian-noisy"])
    etas = [reference.eta * f for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0)]
    assert all(reference.loss_at(eta) > reference.loss for eta in etas)
    zero = reference.loss_at(0.0)  # ŷ = 0: ½ d_y (s² d σ² + τ²)
    assert zero == pytest.approx(0.5 * 2 * (0.5 ** 2 * 4 * 0.49 + 1.0), rel=1e-14)


# ----------------------------------------------------------------------------------------------------- (c) closed forms
def general_moment_formula(d: int, n: int, second: float, fourth: float) -> tuple[float, float]:
    """Noiseless η* and E L(η*) (d_y = 1, W ~ N(0, I)) from E tr S² = (1/N) E‖x‖⁴ + (1 - 1/N) tr Σ², Σ = σ² I,
    E‖x‖⁴ = d m₄ + d(d-1) σ⁴: η* = E tr S / E tr S², E L(η*) = ½ σ² (d - (E tr S)² / E tr S²)."""
    trace_s = d * second
    trace_s2 = (d * fourth + d * (d - 1) * second ** 2) / n + (1 - 1 / n) * d * second ** 2
    return trace_s / trace_s2, 0.5 * second * (d - trace_s ** 2 / trace_s2)


def random_shapes(seed: int, count: int = 25):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(count):
        d, n = (int(v) for v in torch.randint(1, 60, (2,), generator=gen))
        yield d, n, float(torch.empty(()).uniform_(0.1, 5.0, generator=gen))


@pytest.mark.parametrize("d, n, scale", list(random_shapes(1)))
def test_gaussian_law_equals_its_closed_form_and_the_general_formula_with_m4_3(d, n, scale):
    """N(0, σ²): η* = N / (σ² (N + d + 1)), E L(η*) = σ² d (d + 1) / (2 (N + d + 1)), and the general moment
    formula with m₄ = 3σ⁴ (and, through E‖x‖⁴ = (tr Σ)² + 2 tr Σ², the Gaussian one)."""
    reference = population_one_step_gd(d, n, "gaussian", scale)
    sigma2 = scale ** 2
    assert reference.eta == pytest.approx(n / (sigma2 * (n + d + 1)), rel=1e-12)
    assert reference.loss == pytest.approx(sigma2 * d * (d + 1) / (2 * (n + d + 1)), rel=1e-12)
    assert (reference.eta, reference.loss) == pytest.approx(general_moment_formula(d, n, sigma2, 3 * sigma2 ** 2),
                                                            rel=1e-12)
    norm_fourth = (d * sigma2) ** 2 + 2 * d * sigma2 ** 2
    assert reference.trace_gram_squared == pytest.approx(norm_fourth / n + (1 - 1 / n) * d * sigma2 ** 2, rel=1e-12)


@pytest.mark.parametrize("d, n, width", list(random_shapes(2)))
def test_uniform_law_equals_its_closed_form_and_the_general_formula(d, n, width):
    """U(-r/2, r/2): σ² = r²/12, m₄ = r⁴/80, κ = 9/5: η* = N / (σ² (N + d - 1/5)),
    E L(η*) = σ² d (d - 1/5) / (2 (N + d - 1/5))."""
    reference = population_one_step_gd(d, n, "uniform", width)
    sigma2 = width ** 2 / 12
    assert reference.moments.kurtosis == pytest.approx(9 / 5, rel=1e-14)
    assert reference.eta == pytest.approx(n / (sigma2 * (n + d - 0.2)), rel=1e-12)
    assert reference.loss == pytest.approx(sigma2 * d * (d - 0.2) / (2 * (n + d - 0.2)), rel=1e-12)
    assert (reference.eta, reference.loss) == pytest.approx(general_moment_formula(d, n, sigma2, width ** 4 / 80),
                                                            rel=1e-12)


@pytest.mark.parametrize("law, inputs", [("uniform", UniformInputs(1.0)), ("uniform", UniformInputs(3.0)),
                                         ("gaussian", NormalInputs(1.0)), ("gaussian", NormalInputs(0.4))])
def test_the_moments_are_those_of_the_project_s_input_samplers(law, inputs):
    """σ² and m₄ against 10⁶ coordinates drawn by the task's own input law (4 SE): the width convention r of
    U(-r/2, r/2) is the sampler's."""
    scale = inputs.width if isinstance(inputs, UniformInputs) else inputs.std
    moments = input_moments(law, scale)
    x = inputs.sample((1000, 1000), torch.Generator().manual_seed(5), "cpu", torch.float64).flatten()
    for power, expected in ((2, moments.second), (4, moments.fourth)):
        mean, se = mean_and_standard_error(x ** power)
        assert abs(mean - expected) <= Z_BAR * se, (power, mean, expected, se)


def test_the_config_and_its_task_give_the_same_reference():
    config = RegressionTaskConfig(d=7, n_context=13, input_range=0.5, weight_scale=2.0, label_noise=0.1)
    assert population_one_step_gd_of_task(config) == population_one_step_gd_of_task(config.build())
    assert population_one_step_gd_of_task(config) == population_one_step_gd(7, 13, "uniform", 0.5, weight_scale=2.0,
                                                                           label_noise=0.1)


# --------------------------------------------------------------------------------------------------------- (d) refusals
@pytest.mark.parametrize("kwargs", [
    {"d": 0, "n_context": 10}, {"d": 10, "n_context": 0}, {"d": -1, "n_context": 10}, {"d": 2.5, "n_context": 10},
    {"d": True, "n_context": 10}, {"d": 10, "n_context": 10, "law": "cauchy"}, {"d": 10, "n_context": 10, "scale": 0.0},
    {"d": 10, "n_context": 10, "scale": -1.0}, {"d": 10, "n_context": 10, "law": "gaussian", "scale": float("nan")},
    {"d": 10, "n_context": 10, "d_y": 0}, {"d": 10, "n_context": 10, "weight_scale": 0.0},
    {"d": 10, "n_context": 10, "label_noise": -0.1},
])
def test_bad_inputs_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        population_one_step_gd(**kwargs)


@pytest.mark.parametrize("task", [
    LinearRegressionTask(inputs=NormalisedInputs()),
    LinearRegressionTask(d=2, inputs=NormalInputs(covariance=((1.0, 0.5), (0.5, 1.0)))),
    LinearRegressionTask(n_distractors=2),
])
def test_tasks_the_formula_does_not_cover_raise_config_error(task):
    with pytest.raises(ConfigError):
        population_one_step_gd_of_task(task)


def test_input_moments_refuse_an_unknown_law():
    with pytest.raises(ConfigError, match="cauchy"):
        input_moments("cauchy", 1.0)
    assert isinstance(input_moments("uniform", 1.0), InputMoments)


# ------------------------------------------------------------------------------------------------------------- the docs
def test_the_docs_page_example_runs_and_prints_the_default_numbers(capsys, tmp_path):
    page = (ROOT / "docs" / "population-gd.md").read_text()
    code = re.search(r"<!-- population-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    runpy.run_path(str(tmp_path / "example.py"))
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    # the closed forms at d = N = 10 (the module docstring): uniform η* = 120/19.8, E L = (10/24)·9.8/19.8;
    # Gaussian η* = N/(N + d + 1) = 10/21, E L = ½ d (d + 1)/(N + d + 1) = 55/21
    assert lines[0] == f"eta* = {120 / 19.8:.6f}, loss = {10 / 24 * 9.8 / 19.8:.6f}"
    assert lines[1] == f"eta* = {10 / 21:.6f}, loss = {55 / 21:.6f}"
    assert float(lines[2]) > 0


# -------------------------------------------------------------------------------------------------------- icl-gd verify
def test_the_verify_checks_are_registered_for_both_laws_and_print_their_values():
    checks = [c for c in all_checks() if c.name.startswith("population one-step gd")]
    assert len(checks) == 2
    for check, law, eta in zip(checks, ("uniform", "gaussian"), ("6.06061", "0.47619")):
        result = check.run()
        assert result.passed and result.tolerance == 2e-2, result
        # the closed form's η* (uniform: the default task's; Gaussian: N/(N + d + 1) = 10/21) beside its estimate
        assert result.detail.startswith(f"{law} inputs: η* {eta} (Monte Carlo "), result.detail


def test_the_verify_check_fails_for_a_wrong_fourth_moment(monkeypatch):
    """The Gaussian κ = 3 in place of the uniform law's 9/5 moves η* and the loss by about 6%: the check must fail."""
    from icl_gd.constructions import population_gd

    real = population_gd.population_one_step_gd_of_task

    def wrong_kurtosis(task):
        reference = real(task)
        m = reference.moments
        sigma4, d, n = m.second ** 2, reference.d, reference.n_context
        norm_fourth = d * 3 * sigma4 + d * (d - 1) * sigma4  # E‖x‖⁴ with m₄ = 3σ⁴
        return replace(reference, trace_gram_squared=norm_fourth / n + (1 - 1 / n) * d * sigma4)

    monkeypatch.setattr(population_gd, "population_one_step_gd_of_task", wrong_kurtosis)
    assert not population_gd.check_population_one_step_gd().passed
