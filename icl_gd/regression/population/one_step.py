"""The population-optimal step size of one GD step from W = 0, and its expected query loss, in closed form.

The tasks of ``LinearRegressionTask``: W ~ N(0, s² I) (d_y, d), inputs with i.i.d. zero-mean coordinates
(σ² = E x_j², m₄ = E x_j⁴, kurtosis κ = m₄/σ⁴), N context pairs and one query, labels y = W x + ε with
ε ~ N(0, τ² I) on every token, the query's included. One GD step from 0 on L(W) = 1/(2N) Σ_i ‖W x_i - y_i‖²
(von Oswald et al. 2023, Eq. 3) gives Ŵ = (η/N) Σ_i y_i x_iᵀ = η (W S + Ξ) with S = (1/N) Σ_i x_i x_iᵀ (d, d)
and Ξ = (1/N) Σ_i ε_i x_iᵀ (d_y, d). Its query loss ½‖Ŵ x_q - y_q‖² (the studies' ``query_loss``) has the
expectation over tasks (docs/population-gd.md derives it)

    E L(η) = ½ d_y [σ² (a η² - 2 b η + s² d) + τ²],    a = s² E tr S² + τ² d σ² / N,    b = s² d σ²,
    E tr S² = (1/N) E‖x‖⁴ + (1 - 1/N) tr Σ² = (d/N) σ⁴ (N + d - 2 + κ),

a quadratic in η minimised at η* = b / a with E L(η*) = ½ d_y [σ² (s² d - b²/a) + τ²]. Noiseless (τ = 0):

    η* = N / (σ² (N + d - 2 + κ)),    E L(η*) = ½ d_y s² σ² d (d - 2 + κ) / (N + d - 2 + κ).

Gaussian inputs N(0, σ² I): κ = 3, so η* = N / (σ² (N + d + 1)) and
E L(η*) = ½ d_y s² σ² d (d + 1) / (N + d + 1).
Uniform inputs U(-r/2, r/2) (the project's ``input_range`` r is the width): σ² = r²/12, m₄ = r⁴/80, κ = 9/5, so
η* = 12 N / (r² (N + d - 1/5)); at the default task (d = N = 10, r = 1) η* = 120/19.8 ≈ 6.0606 and
E L(η*) = (10/24)·9.8/19.8 ≈ 0.20623.

This is the exact reference that the studies estimate by tuning η on sampled held-out tasks
(``gd.optimal_one_step_eta``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from icl_gd.core.config import require_positive_int, require_scale
from icl_gd.core.errors import ConfigError
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, UniformInputs

InputLawName = Literal["uniform", "gaussian"]
INPUT_LAWS: tuple[str, ...] = ("uniform", "gaussian")


@dataclass(frozen=True)
class InputMoments:
    """The per-coordinate moments of an input law with i.i.d. zero-mean coordinates.

    ``scale``: the width r of U(-r/2, r/2) for "uniform", the standard deviation σ of N(0, σ²) for "gaussian".
    ``second`` = σ² = E x_j², ``fourth`` = m₄ = E x_j⁴.
    """

    law: InputLawName
    scale: float
    second: float
    fourth: float

    @property
    def kurtosis(self) -> float:
        """κ = m₄ / σ⁴: 9/5 for the uniform law, 3 for the Gaussian."""
        return self.fourth / self.second ** 2


def input_moments(law: str, scale: float) -> InputMoments:
    """σ² and m₄ of one coordinate: uniform U(-r/2, r/2) (r = ``scale``): r²/12 and r⁴/80; Gaussian N(0, σ²)
    (σ = ``scale``): σ² and 3σ⁴. Raises ``ConfigError`` for another law or a scale that is not positive."""
    if law not in INPUT_LAWS:
        raise ConfigError(f"input law {law!r} is not one of {', '.join(INPUT_LAWS)}")
    require_scale(f"{law} input scale", scale)
    if law == "uniform":
        return InputMoments("uniform", scale, scale ** 2 / 12, scale ** 4 / 80)
    return InputMoments("gaussian", scale, scale ** 2, 3 * scale ** 4)


@dataclass(frozen=True)
class TaskLaw:
    """The task distribution a population reference is an expectation over: d inputs, N = ``n_context`` context
    pairs, d_y outputs, W* (d_y, d) ~ N(0, ``weight_scale``² I), label noise of std ``label_noise``, inputs with
    i.i.d. coordinates of the law ``moments`` describes."""

    d: int
    n_context: int
    d_y: int
    weight_scale: float
    label_noise: float
    moments: InputMoments

    def task_law(self) -> dict:
        """The law's fields by name (shallow: ``moments`` stays an ``InputMoments``), to build another reference
        over the same law."""
        return {f.name: getattr(self, f.name) for f in fields(TaskLaw)}


@dataclass(frozen=True)
class PopulationOneStepGD(TaskLaw):
    """One GD step from W = 0 over the task distribution: the expected query loss E L(η) as a quadratic in η, its
    minimiser ``eta`` = η* and ``loss`` = E L(η*) (the module docstring has the formulas).

    ``trace_gram`` = E tr S and ``trace_gram_squared`` = E tr S², S = (1/N) Σ_i x_i x_iᵀ (d, d) the context's
    second-moment matrix; ``moments``: the input law's σ² and m₄ they come from.
    """

    trace_gram: float
    trace_gram_squared: float

    @property
    def loss_coefficients(self) -> tuple[float, float]:
        """(a, b) of E L(η) = ½ d_y [σ² (a η² - 2 b η + s² d) + τ²]: a = s² E tr S² + τ² d σ² / N,
        b = s² E tr S."""
        s2, tau2 = self.weight_scale ** 2, self.label_noise ** 2
        a = s2 * self.trace_gram_squared + tau2 * self.d * self.moments.second / self.n_context
        return a, s2 * self.trace_gram

    def loss_at(self, eta: float) -> float:
        """E L(η) = ½ d_y [σ² (a η² - 2 b η + s² d) + τ²] at any step size η."""
        a, b = self.loss_coefficients
        bias = self.weight_scale ** 2 * self.d
        return 0.5 * self.d_y * (self.moments.second * (a * eta ** 2 - 2 * b * eta + bias) + self.label_noise ** 2)

    @property
    def eta(self) -> float:
        """η* = b / a, the population-optimal step size."""
        a, b = self.loss_coefficients
        return b / a

    @property
    def loss(self) -> float:
        """E L(η*), the expected query loss at the population-optimal step size."""
        return self.loss_at(self.eta)


def population_one_step_gd(
    d: int, n_context: int, law: str = "uniform", scale: float = 1.0, *, d_y: int = 1, weight_scale: float = 1.0,
    label_noise: float = 0.0,
) -> PopulationOneStepGD:
    """One GD step from 0 over tasks with d inputs, N = ``n_context`` context pairs and inputs from ``law`` at
    ``scale`` (``input_moments``); W (d_y, d) ~ N(0, weight_scale² I), label noise of std ``label_noise``. The
    defaults are the project's default task's law: x ~ U(-1/2, 1/2)^d, W ~ N(0, I), no noise.

    E tr S = d σ², E tr S² = (1/N) E‖x‖⁴ + (1 - 1/N) d σ⁴ with E‖x‖⁴ = d m₄ + d (d - 1) σ⁴.
    Raises ``ConfigError`` for d, N or d_y < 1, an unknown law, a scale ≤ 0 or a negative noise.
    """
    for name, value in (("d", d), ("n_context", n_context), ("d_y", d_y)):
        require_positive_int(name, value)
    require_scale("weight_scale", weight_scale)
    require_scale("label_noise", label_noise, positive=False)
    moments = input_moments(law, scale)
    sigma2, m4 = moments.second, moments.fourth
    norm_fourth = d * m4 + d * (d - 1) * sigma2 ** 2  # E‖x‖⁴
    trace_gram_squared = norm_fourth / n_context + (1 - 1 / n_context) * d * sigma2 ** 2
    return PopulationOneStepGD(d=d, n_context=n_context, d_y=d_y, weight_scale=weight_scale, label_noise=label_noise,
                               moments=moments, trace_gram=d * sigma2, trace_gram_squared=trace_gram_squared)


def population_one_step_gd_of_task(task: LinearRegressionTask | RegressionTaskConfig) -> PopulationOneStepGD:
    """``population_one_step_gd`` for a task (or the studies' task config, which builds one): uniform inputs or
    isotropic Gaussian ones, no distractors. Raises ``ConfigError`` for another input law, a covariance or
    distractors (the formula does not cover them). A fixed training set (``train_tasks``) does not matter: the
    reference is over fresh tasks."""
    if isinstance(task, RegressionTaskConfig):
        task = task.build()
    if not isinstance(task, LinearRegressionTask):
        raise ConfigError(f"the population one-step GD reference needs a LinearRegressionTask, got "
                          f"{type(task).__name__}")
    if task.n_distractors:
        raise ConfigError(f"the population one-step GD reference has no distractors, got {task.n_distractors}")
    inputs = task.inputs
    if isinstance(inputs, UniformInputs):
        law, scale = "uniform", inputs.width
    elif isinstance(inputs, NormalInputs) and inputs.covariance is None:
        law, scale = "gaussian", inputs.std
    else:
        raise ConfigError(f"the population one-step GD reference covers uniform and isotropic Gaussian inputs, got "
                          f"{inputs!r}")
    return population_one_step_gd(task.d, task.n_context, law, scale, d_y=task.d_y, weight_scale=task.weight_scale,
                                  label_noise=task.label_noise)
