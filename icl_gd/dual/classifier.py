"""The classifier whose dual form is read: a ReLU MLP, and the two image-classification tasks it learns.

Task 0 is a dataset (``auto``: Fashion-MNIST when its IDX files are present, digits otherwise); task 1 is task 0's
images under one fixed pixel permutation, or another dataset of the same image size. The tasks share one output
layer: with ``head="stacked"`` task 1's labels follow task 0's (20 outputs for two 10-class tasks), with
``head="shared"`` both tasks use the same outputs (the authors' 10-way head, so MNIST's "3" and Fashion-MNIST's
class 3 are one output). Task 1's example ids follow task 0's, so every training image has one id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.core.config import check_settings, positive_int, setting
from icl_gd.dual.datasets import FASHION_MNIST_DIR, ImageDataset, load_dataset, permuted, resolve_dataset, standardized
from icl_gd.core.errors import ConfigError

PERMUTATION_SEED = 12345  # task 1's pixel permutation: part of the task's definition, not of a run


@dataclass(frozen=True)
class ClassificationTask:
    """One task of a run: its images, where its labels start on the shared head, where its example ids start."""

    index: int
    data: ImageDataset
    label_offset: int
    id_offset: int

    @property
    def n_train(self) -> int:
        return len(self.data.train_y)

    @property
    def n_classes(self) -> int:
        return self.data.n_classes


TaskPair = tuple[ClassificationTask, ClassificationTask]


@dataclass(frozen=True)
class TaskPairConfig:
    """Which images tasks 0 and 1 are made of."""

    dataset: Literal["auto", "digits", "fashion-mnist", "mnist-subset"] = setting(
        "auto", "task 0's images; auto: Fashion-MNIST when its files are at fashion_mnist_dir, digits otherwise")
    second_task: Literal["permuted", "fashion-mnist", "mnist-subset"] = setting(
        "permuted", "task 1: task 0's images under a fixed pixel permutation, or another 28×28 dataset")
    fashion_mnist_dir: str = setting(str(FASHION_MNIST_DIR), "directory holding the Fashion-MNIST IDX files")
    train_examples: int | None = positive_int(None, "train on the first N images of each task (none: all)")
    standardize: bool = setting(False, "shift and scale each dataset to zero mean, unit variance over its "
                                       "training pixels (the authors' normalisation); false: pixels in [0, 1]")
    head: Literal["stacked", "shared"] = setting(
        "stacked", "output layer: stacked (task 1's classes after task 0's) or shared (both tasks on the same "
                   "outputs, the authors' 10-way head)")
    single_task: int = setting(0, "the task the single setting trains on: 0 (dataset) or 1 (second_task)")

    def __post_init__(self) -> None:
        check_settings(self)
        if self.single_task not in (0, 1):
            raise ConfigError(f"single_task must be 0 or 1, got {self.single_task}")

    def build(self) -> TaskPair:
        """Load both tasks; ``ConfigError`` when task 1's images are not the size of task 0's."""
        first = load_dataset(resolve_dataset(self.dataset, self.fashion_mnist_dir), self.fashion_mnist_dir)
        if self.second_task == "permuted":
            second = permuted(first, PERMUTATION_SEED)
        else:
            second = load_dataset(self.second_task, self.fashion_mnist_dir)
            if second.n_features != first.n_features:
                raise ConfigError(
                    f"second_task={self.second_task} has {second.n_features} pixels but dataset {first.name} has "
                    f"{first.n_features}; use second_task=permuted"
                )
        if self.standardize:  # each dataset by its own statistics, like the authors' per-dataset normalisation
            first, second = standardized(first), standardized(second)
        first, second = first.first_train(self.train_examples), second.first_train(self.train_examples)
        if self.head == "shared" and second.n_classes != first.n_classes:
            raise ConfigError(f"head=shared needs tasks with as many classes; {first.name} has {first.n_classes}, "
                              f"{second.name} has {second.n_classes}")
        second_offset = first.n_classes if self.head == "stacked" else 0
        return (ClassificationTask(0, first, 0, 0),
                ClassificationTask(1, second, second_offset, len(first.train_y)))


def head_size(tasks: tuple[ClassificationTask, ...]) -> int:
    """Outputs of an MLP trained on ``tasks``: enough for the largest label they use on the shared layer."""
    return max(t.label_offset + t.n_classes for t in tasks)


class MLP(nn.Module):
    """in → hidden → hidden → classes with ReLU; its three linear layers are the dual form's three stores."""

    def __init__(self, d_in: int, hidden: int, n_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.input = nn.Linear(d_in, hidden)
        self.hidden = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, n_out)
        with torch.no_grad():
            for layer in self.layers:
                bound = 1.0 / np.sqrt(layer.in_features)  # PyTorch's default init, from our generator
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)

    @property
    def layers(self) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
        return (self.input, self.hidden, self.output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, d_in) → logits (B, n_out)."""
        return self.output(torch.relu(self.hidden(torch.relu(self.input(x)))))
