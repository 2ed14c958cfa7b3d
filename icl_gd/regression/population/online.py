"""Online GD with a constant step size over the task distribution: its expected query loss after every prefix of
the context, in closed form, and the step size that minimises it (docs/online-layers.md derives it).

The tasks of ``LinearRegressionTask``: W* ~ N(0, s² I) (d_y, d), inputs with i.i.d. zero-mean coordinates
(σ² = E x_j², kurtosis κ = E x_j⁴ / σ⁴: 3 for Gaussian inputs), labels y = W* x + ε, ε ~ N(0, τ² I), on every token,
the query's included. Online GD from W_0 = 0, W_t = W_{t-1} - η (W_{t-1} x_t - y_t) x_tᵀ, has the error
E_t = W_t - W* = E_{t-1} (I - η x_t x_tᵀ) + η ε_t x_tᵀ, and since x_t is independent of E_{t-1},

    E[(I - η x xᵀ)²] = (1 - 2ησ² + η²σ⁴(d - 1 + κ)) I = ρ(η) I,    E‖η ε xᵀ‖² = η² τ² d σ² (per output),

so e_t = E‖E_t‖²_F obeys e_0 = d_y d s², e_t = ρ e_{t-1} + d_y η² τ² d σ², and the query loss after t tokens is

    L_t(η) = ½ E‖E_t x_q - ε_q‖² = ½ (σ² e_t + d_y τ²).

Noiseless (τ = 0), L_t = ½ d_y d s² σ² ρ(η)^t, minimised at every t by the η minimising ρ:
η* = 1 / (σ² (d - 1 + κ)), ρ* = 1 - 1 / (d - 1 + κ); for Gaussian inputs η* = 1/(σ²(d + 2)) and
L_t(η*) = ½ d_y d s² σ² ((d + 1)/(d + 2))^t. With noise the η minimising L_N depends on N and is found numerically
(``PopulationOnlineGD.eta``). The one batch GD step of the same tasks is ``icl_gd.regression.population.one_step``'s.

Normalised LMS, W_t = W_{t-1} - μ (W_{t-1} x_t - y_t) x_tᵀ / ‖x_t‖², has E_t = E_{t-1} (I - μ P_t) + μ ε_t x_tᵀ/‖x_t‖²
with P_t = x_t x_tᵀ / ‖x_t‖² a projection, so (I - μP)² = I - (2μ - μ²) P, and E P = I / d for any law whose
coordinates are i.i.d. and symmetric (sign flips cancel the off-diagonal, permutations equalise the diagonal). Hence

    e_t = (1 - (2μ - μ²)/d) e_{t-1} + d_y μ² τ² E[1/‖x‖²],

exact without noise for the uniform and the Gaussian law alike (μ* = 1 and ρ* = 1 - 1/d at every t); the noise
term needs E[1/‖x‖²] = 1 / (σ² (d - 2)) (Gaussian inputs, d > 2: the mean of an inverse χ²).
"""

from __future__ import annotations

from dataclasses import dataclass

from icl_gd.core.config import require_positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.population.one_step import TaskLaw, population_one_step_gd_of_task
from icl_gd.regression.tasks import LinearRegressionTask

_GOLDEN = (5 ** 0.5 - 1) / 2


def _query_losses(rho: float, noise: float, first_error: float, second: float, tau2: float, d_y: int,
                  n_context: int) -> list[float]:
    """[L_0, ..., L_N] of the recursion e_t = ρ e_{t-1} + noise from e_0, L_t = ½ (σ² e_t + d_y τ²)."""
    error, losses = first_error, []
    for t in range(n_context + 1):
        if t:
            error = rho * error + noise
        losses.append(0.5 * (second * error + d_y * tau2))
    return losses


def _golden_minimum(loss, high: float) -> float:
    """The minimiser of a unimodal ``loss`` on (0, ``high``), to a relative 1e-12 of the interval."""
    low, top = 0.0, high
    while top - low > 1e-12 * high:
        a, b = top - _GOLDEN * (top - low), low + _GOLDEN * (top - low)
        if loss(a) <= loss(b):
            top = b
        else:
            low = a
    return (low + top) / 2


@dataclass(frozen=True)
class PopulationOnlineGD(TaskLaw):
    """Online GD with constant step η from W = 0 over the task distribution (module docstring; the fields are
    ``TaskLaw``'s)."""

    def contraction(self, eta: float) -> float:
        """ρ(η) = 1 - 2ησ² + η²σ⁴(d - 1 + κ): E‖E_t‖² = ρ E‖E_{t-1}‖² without noise."""
        s2 = self.moments.second
        return 1 - 2 * eta * s2 + eta ** 2 * s2 ** 2 * (self.d - 1 + self.moments.kurtosis)

    def loss_per_position(self, eta: float) -> list[float]:
        """[L_0, L_1, ..., L_N]: the expected query loss after t = 0..N context pairs at step size η."""
        s2, tau2 = self.moments.second, self.label_noise ** 2
        noise = self.d_y * eta ** 2 * tau2 * self.d * s2
        return _query_losses(self.contraction(eta), noise, self.d_y * self.d * self.weight_scale ** 2, s2, tau2,
                             self.d_y, self.n_context)  # e_0 = E‖W*‖²_F

    def loss_at(self, eta: float) -> float:
        """L_N(η), the expected query loss after the whole context."""
        return self.loss_per_position(eta)[-1]

    @property
    def stable_limit(self) -> float:
        """The step size above which ρ > 1 (the error grows): 2 / (σ² (d - 1 + κ))."""
        return 2 / (self.moments.second * (self.d - 1 + self.moments.kurtosis))

    @property
    def eta(self) -> float:
        """The η minimising L_N: 1 / (σ² (d - 1 + κ)) without noise; with noise, a golden-section search on
        (0, ``stable_limit``), where L_N is unimodal in η (to a relative 1e-12 of the interval)."""
        if self.label_noise == 0:
            return self.stable_limit / 2
        return _golden_minimum(self.loss_at, self.stable_limit)

    @property
    def loss(self) -> float:
        """L_N(η*), the expected query loss at the population-optimal step size."""
        return self.loss_at(self.eta)


@dataclass(frozen=True)
class PopulationNLMS(TaskLaw):
    """Normalised LMS with constant step μ from W = 0 over the task distribution (module docstring; the fields are
    ``TaskLaw``'s). With label noise the inputs must be Gaussian (the noise term's E[1/‖x‖²])."""

    def __post_init__(self) -> None:
        if self.label_noise and self.moments.law != "gaussian":
            raise ConfigError(f"normalised LMS's population loss with label noise needs Gaussian inputs, not "
                              f"{self.moments.law!r} (E[1/‖x‖²] has no closed form there)")
        if self.label_noise and self.d <= 2:
            raise ConfigError(f"normalised LMS's population loss with label noise needs d > 2, not d = {self.d} "
                              f"(E[1/‖x‖²] is infinite)")

    def contraction(self, mu: float) -> float:
        """ρ(μ) = 1 - (2μ - μ²)/d."""
        return 1 - (2 * mu - mu ** 2) / self.d

    def loss_per_position(self, mu: float) -> list[float]:
        """[L_0, ..., L_N]: the expected query loss after t = 0..N context pairs at step μ."""
        s2, tau2 = self.moments.second, self.label_noise ** 2
        inverse_norm = 1 / (s2 * (self.d - 2)) if tau2 else 0.0  # E[1/‖x‖²], Gaussian inputs
        return _query_losses(self.contraction(mu), self.d_y * mu ** 2 * tau2 * inverse_norm,
                             self.d_y * self.d * self.weight_scale ** 2, s2, tau2, self.d_y, self.n_context)

    def loss_at(self, mu: float) -> float:
        return self.loss_per_position(mu)[-1]

    @property
    def eta(self) -> float:
        """The μ minimising L_N: 1 without noise; with noise a golden-section search on (0, 2), where ρ < 1."""
        if self.label_noise == 0:
            return 1.0
        return _golden_minimum(self.loss_at, 2.0)

    @property
    def loss(self) -> float:
        """L_N(μ*)."""
        return self.loss_at(self.eta)


def population_nlms_of_task(task: LinearRegressionTask | RegressionTaskConfig) -> PopulationNLMS:
    """``PopulationNLMS`` for a task (or a config that builds one), with ``population_online_gd_of_task``'s checks."""
    return PopulationNLMS(**population_online_gd_of_task(task).task_law())


def population_online_gd_of_task(task: LinearRegressionTask | RegressionTaskConfig) -> PopulationOnlineGD:
    """``PopulationOnlineGD`` for a task (or a config that builds one): uniform or isotropic Gaussian inputs, no
    distractors (ConfigError otherwise: the task checks of ``population_one_step_gd_of_task``, whose input moments
    are used)."""
    if isinstance(task, RegressionTaskConfig):
        task = task.build()
    one_step = population_one_step_gd_of_task(task)
    require_positive_int("n_context", task.n_context)
    if one_step.moments.second <= 0:
        raise ConfigError("the inputs' variance must be positive")
    return PopulationOnlineGD(d=task.d, n_context=task.n_context, d_y=task.d_y, weight_scale=task.weight_scale,
                              label_noise=task.label_noise, moments=one_step.moments)
