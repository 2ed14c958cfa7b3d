"""Training a causal sequence model on next-token prediction with the project's one trainer
(``icl_gd.regression.training.train``: fresh batches addressed by (seed, step), checkpoints, exact resume).

The loss is the authors' (src/train.py, ``_compute_loss``): ½ ‖ŝ_{t+1} - s_{t+1}‖² averaged over sequences and
positions. The trainer scores ``query_loss(model(tokens), targets)`` = ½ mean over rows of ‖·‖², so the model is
wrapped to hand it its predictions flattened to (B·T, d) and the task its targets likewise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from icl_gd.regression.sequence.tasks import LinearDynamicsTask
from icl_gd.regression.tasks import Stream
from icl_gd.regression.training import TrainConfig, TrainState, train


class FlatPredictions(nn.Module):
    """``model`` with its predictions (B, T, d) flattened to (B·T, d): the trainer's query-loss rows."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.model(inputs).flatten(0, 1)


class NextTokenTask:
    """A ``TokenTask`` of the trainer: the batch of (seed, step) is (inputs (B, T, d), targets (B·T, d))."""

    def __init__(self, task: LinearDynamicsTask) -> None:
        self.task = task

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.task.sample(batch_size, seed, step, Stream.TRAIN, device, dtype)
        return batch.inputs, batch.targets.flatten(0, 1)


def train_next_token(model: nn.Module, task: LinearDynamicsTask, config: TrainConfig, seed: int, *,
                     device: torch.device = torch.device("cpu"),
                     evaluate: Callable[[nn.Module, int, int], list[dict[str, Any]]] | None = None,
                     checkpoint_path: Path | None = None, fingerprint: str = "", progress: bool = False,
                     description: str = "train") -> TrainState:
    """Train ``model`` (on ``device``, in place, ending in eval mode) for ``config.steps`` steps of fresh
    sequences of ``task`` drawn with ``seed``; ``evaluate(model, step, seed)`` sees the unwrapped model."""
    flat = FlatPredictions(model)
    wrapped = None if evaluate is None else (lambda m, step, s: evaluate(m.model, step, s))
    (state,) = train([flat], NextTokenTask(task), config, [seed], device=device, evaluate=wrapped,
                     checkpoint_path=checkpoint_path, fingerprint=fingerprint, progress=progress,
                     description=description)
    return state
