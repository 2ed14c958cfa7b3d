"""The one SGD loop of the dual form's networks: a step, recorded or not, and epochs of shuffled mini-batches.

``sgd_step`` is one optimiser step of every dual-form training: the loss and its backward pass (inside
``recorder.batch`` when a recorder records the run: it stores each layer's keys and errors), then clipping and the
optimiser step, whose learning rate and momentum the recorder reads. ``train_epochs`` walks a labelled set in
epochs of shuffled mini-batches through it: the study's MLP on images (recorded), the float64 identity checks on
random data (recorded) and the retraining of the attribution study (``icl_gd.dual.lds``, not recorded) all train
there; what differs between them is a parameter of ``EpochLoop`` (schedule stepped per optimiser step or per
epoch, a cap on steps, loss reduction, clipping) or a callback (curves, checkpoints). The language model steps
through ``sgd_step`` too, over windows of a token stream with a carried hidden state (``icl_gd.dual.lm_training``),
with the same optimiser and schedule factories (``icl_gd.core.optim``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from icl_gd.core.errors import DivergenceError
from icl_gd.core.optim import clip_gradients
from icl_gd.core.timing import timed
from icl_gd.dual.recorder import DualRecorder, Provenance

@dataclass(frozen=True)
class TrainingSet:
    """Labelled examples with provenance: ``x (N, D)`` and class ids ``y (N,)`` on the model's device, example
    ids ``example (N,)`` and task ids ``task (N,)`` (int64, CPU)."""

    x: torch.Tensor
    y: torch.Tensor
    example: torch.Tensor
    task: torch.Tensor

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class SGDRun:
    """A model trained by ``optimizer`` (its learning rate set by ``schedule``); ``recorder`` records it (None: an
    ordinary run). ``steps`` counts the optimiser steps this run has taken (a recorder's own count also holds the
    steps of the run it resumed)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    recorder: DualRecorder | None = None
    steps: int = 0

    @property
    def step(self) -> int:
        """The global step number: the recorder's when recording (it survives a resume), else ``steps``."""
        return self.recorder.step if self.recorder is not None else self.steps


@dataclass(frozen=True)
class EpochLoop:
    """How one call of ``train_epochs`` walks the data. ``max_steps`` caps the optimizer steps of the call: the
    remaining epochs still draw their permutation and step an epoch schedule, but take no optimizer step."""

    epochs: int
    batch_size: int
    grad_clip: float | None = None  # global gradient-norm clip before every step (none or 0: off)
    max_steps: int | None = None
    schedule_every: Literal["step", "epoch"] = "epoch"
    reduction: Literal["mean", "sum"] = "mean"  # of the cross-entropy over a mini-batch


def sgd_step(run: SGDRun, provenance: Provenance, loss_of: Callable[[], torch.Tensor], grad_clip: float | None,
             label: str, after_backward: Callable[[], None] | None = None) -> torch.Tensor:
    """One optimiser step on the batch ``provenance`` describes (recorded when ``run`` has a recorder); returns the
    loss. ``loss_of()`` runs the forward pass; ``after_backward()`` (recording what the hooks cannot see) runs
    before clipping. A non-finite loss raises ``DivergenceError`` naming ``label`` and the step."""
    run.optimizer.zero_grad()
    with run.recorder.batch(provenance) if run.recorder is not None else contextlib.nullcontext():
        loss = loss_of()
        loss.backward()
    if not torch.isfinite(loss):
        raise DivergenceError(f"{label}: training loss became {loss.item()} at step {run.step}; lower lr")
    if after_backward is not None:
        after_backward()
    clip_gradients(run.model.parameters(), grad_clip)
    run.optimizer.step()
    run.steps += 1
    return loss


def train_epochs(
    run: SGDRun,
    data: TrainingSet,
    loop: EpochLoop,
    generator: torch.Generator,
    first_epoch: int = 0,
    on_step: Callable[[int, torch.Tensor], None] | None = None,
    on_epoch: Callable[[int, float], None] | None = None,
    label: str = "training",
) -> None:
    """Train ``run.model`` on ``data`` for ``loop.epochs`` epochs numbered from ``first_epoch``; each epoch's order
    is ``torch.randperm`` from ``generator``. ``on_step(step, loss)`` follows every optimizer step (``run.step``)
    and ``on_epoch(epoch, lr)`` every epoch (``lr``: the rate the epoch began with; called after the schedule). A
    non-finite loss raises ``DivergenceError``."""
    with timed("training"):  # one phase of the run's timings.json
        steps = 0
        for epoch in range(first_epoch, first_epoch + loop.epochs):
            lr = run.optimizer.param_groups[0]["lr"]
            order = torch.randperm(len(data), generator=generator)
            for start in range(0, len(data), loop.batch_size):
                if loop.max_steps is not None and steps >= loop.max_steps:
                    break
                batch = order[start:start + loop.batch_size]
                on_device = batch.to(data.x.device)
                provenance = Provenance(data.example[batch], data.y[on_device], task=data.task[batch], epoch=epoch)
                loss = sgd_step(run, provenance, lambda: nn.functional.cross_entropy(
                    run.model(data.x[on_device]), data.y[on_device], reduction=loop.reduction), loop.grad_clip, label)
                steps += 1
                if loop.schedule_every == "step":
                    run.schedule.step()
                if on_step is not None:
                    on_step(run.step, loss)
            if loop.schedule_every == "epoch":
                run.schedule.step()
            if on_epoch is not None:
                on_epoch(epoch, lr)
