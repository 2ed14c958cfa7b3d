"""Out-of-distribution sweeps (von Oswald et al. 2023, §3, App. A.2, Fig. 6): each is a named family of test
tasks indexed by a scalar.

A sweep maps (base task, value) to a shifted task; ``evaluate_sweeps`` scores named predictors on every point
with the same test tasks for every predictor. Adding a shift is one entry in ``default_sweeps``.

Other input laws come two ways: one law for a whole sweep (``input_law_exponential`` etc.), and the authors' per-task
mixture (``input_law_mixture``, their ``create_ood_data``): each task draws its law (exponential, normal or Laplace,
uniformly), so one test set mixes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from icl_gd.regression.metrics import regression_loss
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import LinearRegressionTask, NormalisedInputs, Stream, UniformInputs
from icl_gd.regression.tokens import ConcatLayout


@dataclass(frozen=True)
class MixedNormalisedInputs:
    """Each task's inputs from a law drawn per task, uniformly from ``laws``; within a task as ``NormalisedInputs``
    (context Frobenius norm ``scale``, the query sharing its task's normaliser)."""

    laws: tuple[str, ...] = ("exponential", "normal", "laplace")
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not self.laws:
            raise ConfigError("a mixture of input laws needs at least one law")
        for law in self.laws:
            NormalisedInputs(law, self.scale)  # type: ignore[arg-type]  # validates the law and the scale

    def law_indices(self, batch_size: int, gen: torch.Generator, device) -> torch.Tensor:
        """(B,) index into ``laws`` of each task's law, drawn after the candidate inputs (``sample``'s order)."""
        return torch.randint(len(self.laws), (batch_size,), generator=gen, device=device)

    def sample(self, shape: tuple[int, ...], gen: torch.Generator, device, dtype) -> torch.Tensor:
        """(B, N+1, d): every law's inputs are drawn for every task, then each task keeps its own law's."""
        laws = [NormalisedInputs(law, self.scale) for law in self.laws]  # type: ignore[arg-type]
        draws = torch.stack([law.sample(shape, gen, device, dtype) for law in laws])  # (L, B, N+1, d)
        choice = self.law_indices(shape[0], gen, device)
        return draws[choice, torch.arange(shape[0], device=device)]


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


def _input_law_mixture(task: LinearRegressionTask, alpha: float) -> LinearRegressionTask:
    return dataclasses.replace(task, inputs=MixedNormalisedInputs(scale=alpha))  # type: ignore[arg-type]


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
        OODSweep("input_law_mixture", scales, _input_law_mixture),
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
