"""Train the MLP on the two tasks in one of three settings while recording its dual form.

- ``single``: one task (task 0, or task 1 with ``single_task=1``);
- ``joint``: both tasks shuffled together, on one output layer (``classifier.TaskPairConfig.head``);
- ``continual``: task 0's epochs, then task 1's with the same optimizer: the forgetting setting.

Training is float64 SGD with momentum, weight decay, a learning rate decayed after every epoch and optional
clipping, through the one SGD loop ``training.train_epochs`` (``mlp_run`` builds every MLP and its SGD). ``epochs=None`` runs as many epochs as the step
cap needs (the authors count steps, not epochs).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.core.config import check_settings, positive_int, require_positive, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.optim import make_optimizer, make_schedule, require_optimizer_keys
from icl_gd.core.study import TrainingWork
from icl_gd.dual import metric_names as names
from icl_gd.dual.classifier import MLP, ClassificationTask, TaskPair, head_size
from icl_gd.dual.form import DualForm
from icl_gd.dual.recorder import DualRecorder, RecordedLayer
from icl_gd.dual.training import EpochLoop, SGDRun, TrainingSet, train_epochs

SETTINGS = ("single", "joint", "continual")
CURVE_EVERY = 20  # optimizer steps between train_loss rows of the curves


LAYERS = ("input", "hidden", "output")  # the recorded linear layers of an in → hidden → hidden → out MLP


def mlp_layers(modules: Sequence[nn.Linear]) -> list[RecordedLayer]:
    """The three linear layers of an MLP, named ``LAYERS``. The input layer's keys are the training inputs
    themselves, which never change, so that layer stores one key per example."""
    first, *rest = modules
    return [RecordedLayer(LAYERS[0], first, compress_by_example=True),
            *(RecordedLayer(name, m) for name, m in zip(LAYERS[1:], rest, strict=True))]


def require_settings(settings: Sequence[str]) -> None:
    """``ConfigError`` unless ``settings`` are distinct names from ``SETTINGS``, at least one."""
    if not settings:
        raise ConfigError(f"settings must name at least one of {', '.join(SETTINGS)}")
    if any(s not in SETTINGS for s in settings) or len(set(settings)) != len(settings):
        raise ConfigError(f"settings={','.join(settings)} must be distinct values of {', '.join(SETTINGS)}")


@dataclass(frozen=True)
class ClassifierTrainingConfig:
    """The MLP and its recorded SGD training."""

    hidden: int = positive_int(256, "width of both hidden layers")
    epochs: int | None = positive_int(3, "epochs per task (continual: per phase); none: as many as steps need")
    steps: int | None = setting(None, "cap on optimizer steps per task phase (none: every mini-batch)")
    continual_phase_steps: int | None = positive_int(None, "continual: the step cap of each task phase (none: steps)")
    batch_size: int = setting(32, "images per mini-batch")
    lr: float = setting(0.1, "initial SGD learning rate")
    momentum: float = setting(0.9, "SGD heavy-ball momentum")
    weight_decay: float = setting(1e-4, "SGD (coupled) weight decay")
    lr_decay: float = setting(0.7, "learning rate × lr_decay after every epoch", check=require_positive)
    grad_clip: float | None = setting(None, "global gradient-norm clip before every step (none or 0: off)")
    key_dtype: Literal["auto", "float16", "float32", "float64"] = setting(
        "auto", "dtype of the stored keys; auto: float64 on digits, float32 otherwise")
    value_dtype: Literal["auto", "float32", "float64"] = setting(
        "auto", "dtype of the stored error signals (values); auto: the training dtype, float64")

    def __post_init__(self) -> None:
        check_settings(self)
        require_optimizer_keys(self)
        if self.epochs is None and self.steps is None:
            raise ConfigError("epochs=none needs a step cap: set steps")

    def phase_steps(self, setting: str) -> int | None:
        """The step cap of each task phase of ``setting``."""
        if setting == "continual" and self.continual_phase_steps is not None:
            return self.continual_phase_steps
        return self.steps

    def phase_epochs(self, setting: str, n_examples: int) -> int:
        """Epochs of one phase over ``n_examples`` images: ``epochs``, or as many as the step cap needs."""
        if self.epochs is not None:
            return self.epochs
        return math.ceil(self.phase_steps(setting) / math.ceil(n_examples / self.batch_size))

    def phase_step_count(self, setting: str, n_examples: int) -> int:
        """Optimizer steps one phase over ``n_examples`` images takes: its epochs' mini-batches, up to the cap."""
        steps = self.phase_epochs(setting, n_examples) * math.ceil(n_examples / self.batch_size)
        cap = self.phase_steps(setting)
        return steps if cap is None else min(steps, cap)


def accuracy(model: nn.Module, task: ClassificationTask) -> float:
    """Fraction of ``task``'s test images whose largest logit is their label on the shared head."""
    device = next(model.parameters()).device
    with torch.no_grad():
        x = torch.as_tensor(task.data.test_x, dtype=torch.float64, device=device)
        pred = model(x).argmax(1).cpu().numpy()
    return float(np.mean(pred == task.data.test_y + task.label_offset))


def tasks_in(setting: str, tasks: TaskPair, single_task: int = 0) -> tuple[ClassificationTask, ...]:
    """The tasks a setting trains on (and is tested on); ``single_task`` is the one task of ``single``."""
    return (tasks[single_task],) if setting == "single" else tasks


def phases(setting: str, tasks: TaskPair, single_task: int = 0) -> list[tuple[ClassificationTask, ...]]:
    """The tasks trained together in each phase of a setting."""
    return [(t,) for t in tasks] if setting == "continual" else [tasks_in(setting, tasks, single_task)]


def training_set(tasks: Sequence[ClassificationTask], device: torch.device,
                 examples: np.ndarray | None = None) -> TrainingSet:
    """The training images of ``tasks`` in one set, labels on the shared head, ids and task ids beside them;
    ``examples (m,)`` keeps only those training images of a single task (in that order)."""
    if examples is not None:
        if len(tasks) != 1:
            raise ConfigError(f"examples select the images of one task, not of {len(tasks)}")
        keep = np.asarray(examples, dtype=np.int64)
        (task,) = tasks
        return TrainingSet(
            x=torch.as_tensor(task.data.train_x[keep], dtype=torch.float64, device=device),
            y=torch.as_tensor(task.data.train_y[keep] + task.label_offset, device=device),
            example=torch.as_tensor(keep + task.id_offset), task=torch.full((len(keep),), task.index))
    return TrainingSet(
        x=torch.as_tensor(np.concatenate([t.data.train_x for t in tasks]), dtype=torch.float64, device=device),
        y=torch.as_tensor(np.concatenate([t.data.train_y + t.label_offset for t in tasks]), device=device),
        example=torch.as_tensor(np.concatenate([np.arange(t.n_train) + t.id_offset for t in tasks])),
        task=torch.as_tensor(np.concatenate([np.full(t.n_train, t.index) for t in tasks])),
    )


def mlp_run(config: ClassifierTrainingConfig, tasks: Sequence[ClassificationTask], seed: int,
            device: torch.device) -> tuple[SGDRun, torch.Generator]:
    """A fresh float64 MLP for ``tasks`` (their images, outputs for every label they use on the shared head)
    initialised from ``seed``, with its SGD and per-epoch schedule (not recorded), and the generator that goes on
    to shuffle its epochs: every MLP of the dual form starts here."""
    generator = torch.Generator().manual_seed(seed)
    model = MLP(tasks[0].data.n_features, config.hidden, head_size(tasks), generator).to(torch.float64).to(device)
    optimizer = make_optimizer("sgd", model.parameters(), config)
    return SGDRun(model, optimizer, make_schedule(optimizer, config.lr_decay)), generator


def setting_recorder(config: ClassifierTrainingConfig, run: SGDRun, tasks: TaskPair, store: Path) -> DualRecorder:
    """The recorder of ``run``'s three layers into ``store``, keys and values in the configured dtypes."""
    key_dtype = config.key_dtype if config.key_dtype != "auto" else (
        "float64" if tasks[0].data.name == "digits" else "float32")
    value_dtype = None if config.value_dtype == "auto" else config.value_dtype
    # Full chunks are written (and fsynced) by a worker thread while training goes on: the disk no longer waits
    # on the arithmetic (paper size: about 6 GB per run).
    return DualRecorder(mlp_layers(run.model.layers), run.optimizer, store, key_dtype=key_dtype,
                        value_dtype=value_dtype, chunk_rows=16384, background_writes=True)


def setting_work(config: ClassifierTrainingConfig, setting: str, tasks: TaskPair,
                 single_task: int = 0) -> TrainingWork:
    """``setting``'s recorded training for ``Study.training_work`` (the products floor and the benchmarks): every
    phase's optimizer steps, in float64. A fresh training is ``n`` recorded SGD steps (clipping, the recorder's
    hooks and step fields, its store written in the background to a temporary directory, removed afterwards) of
    seed 0's MLP on the first phase's images, as ``train_setting`` runs them; the products of a step do not depend
    on the seed or the phase."""
    cpu, trained = torch.device("cpu"), phases(setting, tasks, single_task)
    steps = sum(config.phase_step_count(setting, sum(t.n_train for t in phase)) for phase in trained)

    def fresh_training(n_steps: int) -> Callable[[], object]:
        first = training_set(trained[0], cpu)
        run, generator = mlp_run(config, tasks_in(setting, tasks, single_task), 0, cpu)
        loop = EpochLoop(math.ceil(n_steps / math.ceil(len(first) / config.batch_size)), config.batch_size,
                         config.grad_clip, max_steps=n_steps)

        def train() -> None:
            folder = Path(tempfile.mkdtemp(prefix="icl-gd-work-"))
            try:
                with setting_recorder(config, run, tasks, folder / "store") as run.recorder:
                    train_epochs(run, first, loop, generator, label=f"{setting} (declared work)")
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        return train

    return TrainingWork(f"{setting} MLP", steps, fresh_training, precision="float64")


def train_phase(run: SGDRun, data: TrainingSet, config: ClassifierTrainingConfig, setting: str,
                generator: torch.Generator, first_epoch: int = 0, on_step=None, on_epoch=None,
                label: str = "training") -> int:
    """One phase of ``setting`` on ``data`` through ``train_epochs`` (its epochs, or the step cap); returns the
    epochs it ran."""
    epochs = config.phase_epochs(setting, len(data))
    loop = EpochLoop(epochs, config.batch_size, config.grad_clip, max_steps=config.phase_steps(setting))
    train_epochs(run, data, loop, generator, first_epoch=first_epoch, on_step=on_step, on_epoch=on_epoch,
                 label=label)
    return epochs


@dataclass(frozen=True)
class TrainedSetting:
    """A model trained in one setting, its recorded store at ``store`` and what training measured."""

    setting: str
    model: MLP
    tasks: tuple[ClassificationTask, ...]  # the tasks it was trained on
    n_epochs: int  # over all phases: the epoch ids in the store are 0 .. n_epochs - 1
    phase_starts: tuple[int, ...]  # the first optimizer step of each task phase
    n_steps: int  # optimizer steps recorded in all
    store: Path
    accuracies: dict[str, float]  # task<i>_accuracy, test_accuracy (their mean), continual: after task 0
    curves: list[dict]  # tidy rows: step, seed, model (the setting), metric, value

    def dual_form(self) -> DualForm:
        """The trained MLP in dual form: its key store opened beside it, layers named ``LAYERS``."""
        return DualForm(self.store, self.model, dict(zip(LAYERS, self.model.layers)))


def train_setting(config: ClassifierTrainingConfig, setting: str, tasks: TaskPair, seed: int, store: Path,
                  device: torch.device, single_task: int = 0) -> TrainedSetting:
    """Train a fresh MLP (initialised and shuffled from ``seed``) in ``setting``, recording it under ``store``."""
    used = tasks_in(setting, tasks, single_task)
    run, generator = mlp_run(config, used, seed, device)
    model = run.model
    recorder = run.recorder = setting_recorder(config, run, tasks, store)
    curves: list[dict] = []

    def row(metric: str, value: float) -> dict:
        return {"step": recorder.step, "seed": seed, "model": setting, "metric": metric, "value": value}

    def on_step(step: int, loss: torch.Tensor) -> None:
        if step % CURVE_EVERY == 0:
            curves.append(row("train_loss", loss.item()))

    def on_epoch(epoch: int, lr: float) -> None:
        curves.extend(row(f"test_accuracy_task{t.index}", accuracy(model, t)) for t in used)

    accuracies: dict[str, float] = {}
    n_epochs, phase_starts = 0, []
    for phase, phase_tasks in enumerate(phases(setting, tasks, single_task)):
        data = training_set(phase_tasks, device)
        phase_starts.append(recorder.step)
        n_epochs += train_phase(run, data, config, setting, generator, first_epoch=n_epochs, on_step=on_step,
                                on_epoch=on_epoch, label=f"{setting}/seed {seed}")
        if setting == "continual" and phase == 0:
            accuracies[names.task_accuracy_after_first_phase(0)] = accuracy(model, tasks[0])
    for t in used:
        accuracies[names.task_accuracy(t.index)] = accuracy(model, t)
    accuracies["test_accuracy"] = float(np.mean([accuracies[names.task_accuracy(t.index)] for t in used]))
    recorder.close()
    return TrainedSetting(setting, model, used, n_epochs, tuple(phase_starts), recorder.step, store, accuracies,
                          curves)
