"""Garg, Tsipras, Liang & Valiant's (2022, §3 and their ``curriculum.py``) curriculum for in-context regression:
training starts on tasks of fewer input dimensions and fewer context points and grows both in stages.

At stage k = ⌊step / interval⌋ a training task has d_k = min(d, d_start + k·d_increment) live input coordinates
(the others are zero, so y = w·x depends on the first d_k weights only) and n_k = min(N, n_start + k·n_increment)
context pairs: its tokens are the first 2·n_k + 1 of the interleaved sequence (x_0, y_0, ..., x_{n_k}), which a
causal model reads exactly as the start of a full one. Their configuration grows d by 1 and the points by 2 every
2000 steps, from 5 dimensions and 11 points (N = 2d + 1) to 20 and 41. Test tasks are always the full task.
Shapes: B tasks, N context pairs, d inputs, T = 2N + 1 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from icl_gd.core.config import check_settings, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression.compare.gpt import EveryPrefixTokenTask
from icl_gd.regression.tasks import Stream


def _non_negative_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")


@dataclass(frozen=True)
class CurriculumConfig:
    """The stages: where d and N start, how much each grows per stage, and a stage's length as a fraction of the
    training steps (0: no curriculum, the full task from the first step)."""

    d_start: int = setting(1, "input dimensions live at the first stage", check=_non_negative_int)
    d_increment: int = setting(1, "input dimensions added per stage (Garg et al.: 1)", check=_non_negative_int)
    n_start: int = setting(3, "context pairs at the first stage (Garg et al. start at N = 2d + 1)",
                           check=_non_negative_int)
    n_increment: int = setting(2, "context pairs added per stage (Garg et al.: 2)", check=_non_negative_int)
    stage: float = setting(0.1, "a stage's length as a fraction of the training steps (0: no curriculum)")

    def __post_init__(self) -> None:
        check_settings(self)
        if not isinstance(self.stage, (int, float)) or isinstance(self.stage, bool) or not 0 <= self.stage <= 1:
            raise ConfigError(f"curriculum stage must be a fraction of the steps in [0, 1], got {self.stage!r}")
        if self.stage and (self.d_start < 1 or self.n_start < 1):
            raise ConfigError(f"a curriculum starts with at least one dimension and one context pair, got d_start="
                              f"{self.d_start}, n_start={self.n_start}")

    def schedule(self, d: int, n_context: int, steps: int) -> Curriculum:
        """The stages of a ``steps``-step run on tasks of ``d`` inputs and ``n_context`` pairs."""
        interval = round(self.stage * steps)
        return Curriculum(d, n_context, self.d_start, self.d_increment, self.n_start, self.n_increment, interval)


@dataclass(frozen=True)
class Curriculum:
    """The task size at each training step; ``interval`` = 0: the full task throughout."""

    d: int
    n_context: int
    d_start: int
    d_increment: int
    n_start: int
    n_increment: int
    interval: int

    def at(self, step: int) -> tuple[int, int]:
        """(live input dimensions, context pairs) of the training tasks at optimiser step ``step``."""
        if self.interval <= 0:
            return self.d, self.n_context
        stage = step // self.interval
        return (min(self.d, self.d_start + stage * self.d_increment),
                min(self.n_context, self.n_start + stage * self.n_increment))

    def stages(self) -> list[tuple[int, int, int]]:
        """(first step, d_k, n_k) of each stage until the full task, the last one the full task's."""
        out: list[tuple[int, int, int]] = []
        step = 0
        while True:
            d, n = self.at(step)
            out.append((step, d, n))
            if (d, n) == (self.d, self.n_context) or self.interval <= 0:
                return out
            step += self.interval

    def full_from(self) -> int:
        """The first step that trains on the full task."""
        return self.stages()[-1][0]


@dataclass(frozen=True)
class CurriculumTokenTask(EveryPrefixTokenTask):
    """``EveryPrefixTokenTask`` whose training batches follow ``curriculum``: at step s, inputs beyond the stage's
    d_k are zero (targets recomputed from the task's weights) and the tokens stop after x_{n_k}, the targets being
    the n_k + 1 labels the model predicts there, scaled by 1/√(n_k + 1) as ``EveryPrefix`` scales its output.
    Test batches are the full task's. Only noiseless tasks without distractors (Garg et al.'s) are taken: their
    label is w·x exactly, so truncating x leaves a task of the same law in fewer dimensions."""

    curriculum: Curriculum | None = None

    def __post_init__(self) -> None:
        if self.task.label_noise or self.task.n_distractors:
            raise ConfigError("a curriculum needs noiseless tasks without distractors (the label is recomputed "
                              f"from the truncated inputs), got label_noise={self.task.label_noise}, "
                              f"n_distractors={self.task.n_distractors}")

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        if self.curriculum is None:
            return super().train_batch(batch_size, seed, step, device, dtype)
        d_live, n_live = self.curriculum.at(step)
        batch = self.task.sample(batch_size, seed, step, Stream.TRAIN, device, dtype)
        if d_live < self.task.d:
            x = batch.x.clone()
            x[..., d_live:] = 0
            batch = type(batch)(x=x, y=torch.einsum("bnd,bkd->bnk", x, batch.w), w=batch.w)
        tokens = self.layout.tokens(batch)[:, :2 * n_live + 1]
        labels = batch.y[:, :n_live + 1]
        return tokens, labels.flatten(1) / labels.shape[1] ** 0.5
