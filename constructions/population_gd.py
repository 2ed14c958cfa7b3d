"""The population-optimal one-step GD reference (``icl_gd.regression.population.one_step``) against Monte Carlo on the
project's own task sampler.

This check is statistical, not an exact identity: η* and E L(η*) in closed form against the sample minimiser
η̂ = ``gd.optimal_one_step_eta`` and the mean one-step query loss at η* over 100 000 tasks of the tuning stream
(float64, a fixed seed), for the default task (x ~ U(-1/2, 1/2)^10) and for Gaussian inputs (x ~ N(0, I_10),
η* = N/(N + d + 1)); ``icl-gd verify`` prints both values beside their estimates. Their relative standard errors there are about 0.35% (η̂) and 0.5% (the
loss), so the 2% tolerance is about four standard errors of the loss; a wrong moment (the Gaussian κ = 3 for the
uniform law's 9/5, say) moves both by about 6%.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.gd import gd_predict, optimal_one_step_eta
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.population.one_step import population_one_step_gd_of_task
from icl_gd.regression.tasks import NormalInputs, Stream


def check_population_one_step_gd(n_tasks: int = 100_000, seed: int = 2023, tolerance: float = 2e-2,
                                  law: str = "uniform") -> CheckResult:
    """η* against the sample-tuned η̂, and E L(η*) against the sampled one-step loss at η*, on ``n_tasks`` tasks of
    the default shape (d = N = 10) of the tuning stream, inputs of ``law`` (the default task's uniform, or standard
    Gaussian); relative errors, the four values in ``detail``."""
    task = RegressionTaskConfig().build()
    if law == "gaussian":
        task = replace(task, inputs=NormalInputs())
    reference = population_one_step_gd_of_task(task)
    batch = task.sample(n_tasks, seed, 0, Stream.TUNE, dtype=torch.float64)
    x, y, x_query, y_query = batch.x_context, batch.y_context, batch.x_query, batch.y_query
    tuned_eta = optimal_one_step_eta(x, y, x_query, y_query)
    sampled_loss = query_loss(gd_predict(x, y, x_query, [reference.eta]), y_query)
    detail = (f"{law} inputs: η* {reference.eta:.5f} (Monte Carlo {float(tuned_eta):.5f}), loss "
              f"{reference.loss:.5f} (Monte Carlo {float(sampled_loss):.5f}; {n_tasks} tasks)")
    return merge([compare(scalar(tuned_eta), scalar(reference.eta), tolerance),
                  compare(scalar(sampled_loss), scalar(reference.loss), tolerance)], detail)


def scalar(value: float | torch.Tensor) -> torch.Tensor:
    return torch.tensor(float(value), dtype=torch.float64)


IDENTITY_CHECKS = (
    IdentityCheck("population one-step gd: closed form = Monte Carlo", check_population_one_step_gd),
    IdentityCheck("population one-step gd, Gaussian inputs: = Monte Carlo",
                  partial(check_population_one_step_gd, law="gaussian")),
)
