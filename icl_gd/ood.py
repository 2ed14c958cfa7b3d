"""Out-of-distribution sweeps (PROTOCOL §1): each is a named family of test tasks indexed by a scalar.

A sweep maps (base task, value) to a shifted task; ``evaluate_sweeps`` scores named predictors on every point
with the same test tasks for every predictor. Adding a shift is one entry in ``default_sweeps``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .metrics import regression_loss
from .tasks import LinearRegressionTask, NormalisedInputs, Stream, UniformInputs
from .tokens import ConcatLayout


@dataclass(frozen=True)
class OODSweep:
    name: str
    values: tuple[float, ...]
    shift: Callable[[LinearRegressionTask, float], LinearRegressionTask]


def _input_scale(task: LinearRegressionTask, alpha: float) -> LinearRegressionTask:
    width = task.inputs.width if isinstance(task.inputs, UniformInputs) else 1.0
    return dataclasses.replace(task, inputs=UniformInputs(width * alpha))


def _weight_scale(task: LinearRegressionTask, alpha: float) -> LinearRegressionTask:
    return dataclasses.replace(task, weight_scale=task.weight_scale * alpha)


def _input_law(law: str) -> Callable[[LinearRegressionTask, float], LinearRegressionTask]:
    def shift(task: LinearRegressionTask, alpha: float) -> LinearRegressionTask:
        return dataclasses.replace(task, inputs=NormalisedInputs(law, alpha))  # type: ignore[arg-type]

    return shift


def _distractors(task: LinearRegressionTask, n: float) -> LinearRegressionTask:
    return dataclasses.replace(task, n_distractors=min(int(n), task.n_context))


def default_sweeps(n_context: int) -> tuple[OODSweep, ...]:
    scales = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)
    return (
        OODSweep("input_scale", (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0), _input_scale),
        OODSweep("weight_scale", scales, _weight_scale),
        OODSweep("input_law_exponential", scales, _input_law("exponential")),
        OODSweep("input_law_normal", scales, _input_law("normal")),
        OODSweep("input_law_laplace", scales, _input_law("laplace")),
        OODSweep("distractors", tuple(float(n) for n in range(0, min(8, n_context) + 1, 2)), _distractors),
    )


@torch.no_grad()
def evaluate_sweeps(
    task: LinearRegressionTask,
    predictors: Mapping[str, Callable[[torch.Tensor], torch.Tensor]],
    sweeps: Sequence[OODSweep],
    n_tasks: int,
    seed: int,
    device: torch.device = torch.device("cpu"),
    dtype: torch.dtype = torch.float32,
) -> list[dict[str, Any]]:
    """Tidy rows {sweep, value, model, loss} for every sweep point and named predictor."""
    rows = []
    layout = ConcatLayout(task.d, task.d_y)
    for sweep in sweeps:
        for value in sweep.values:
            shifted = sweep.shift(task, value)
            batch = shifted.sample(n_tasks, seed, 0, Stream.TEST, device, dtype)
            tokens = layout.tokens(batch)
            for name, predictor in predictors.items():
                loss = regression_loss(predictor(tokens), batch.y_query)
                rows.append({"sweep": sweep.name, "value": value, "model": name, "loss": loss})
    return rows
