"""The regression studies' config parts (nested dataclasses; ``--set d=5`` reaches ``task.d`` by its suffix):
``task``, ``model``, ``training`` and ``evaluation``. In ``training``, ``None`` means the authors' value for the
model's depth, the same way in every study (``TrainingConfig.resolve``). Models import these; the run skeleton
(``icl_gd.regression.study``) builds on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from icl_gd.core.config import (check_settings, positive_int, require_non_negative, require_positive, require_scale,
                                setting)
from icl_gd.core.errors import ConfigError
from icl_gd.core.optim import require_optimizer_keys
from icl_gd.regression.lsa import LSAConfig
from icl_gd.regression.tasks import LinearRegressionTask, UniformInputs
from icl_gd.regression.training import TrainConfig, authors_train_config


@dataclass(frozen=True)
class RegressionTaskConfig:
    """In-context linear regression, y = W x (von Oswald et al. §3)."""

    d: int = setting(10, "input dimension of each regression task")
    n_context: int = setting(10, "context pairs (x_i, y_i) per task, N")
    input_range: float = setting(1.0, "inputs x ~ U(-r/2, r/2)^d with r = input_range")
    weight_scale: float = setting(1.0, "task weights W ~ N(0, I) times this")
    label_noise: float = setting(0.0, "std of Gaussian noise added to every label")
    train_tasks: int = setting(0, "0: fresh training tasks every step; M > 0: a fixed training set of M tasks drawn "
                                  "once from the seed (App. A.12, Fig. 16; batch_size=M is their full-batch "
                                  "training)")

    def __post_init__(self) -> None:
        require_scale("input_range", self.input_range)  # here too: a subclass's build may not use UniformInputs
        self.build()  # the task validates every other value

    def build(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=UniformInputs(self.input_range),
                                    weight_scale=self.weight_scale, label_noise=self.label_noise,
                                    train_tasks=self.train_tasks)


@dataclass(frozen=True)
class LSAStackConfig:
    """K linear self-attention layers, separate or tied; widths come from the token layout."""

    layers: int = positive_int(1, "LSA layers K (a recurrent model applies its one layer K times)")
    recurrent: bool = setting(False, "tie the weights of all K layers (one layer applied K times)")
    heads: int = positive_int(1, "attention heads per layer")

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def shared_steps(self) -> bool:
        """One set of step parameters for every step: a tied stack, or a single layer."""
        return self.recurrent or self.layers == 1

    def lsa_config(self, layout: Any) -> LSAConfig:
        """The model for ``layout``: the authors' activation clipping at 10 beyond 3 layers."""
        return LSAConfig(d_model=layout.d_model, d_y=layout.d_y, n_layers=self.layers, recurrent=self.recurrent,
                         n_heads=self.heads, clip_activations=10.0 if self.layers > 3 else None)


@dataclass(frozen=True)
class HeadsModelConfig:
    """One model per head count of a (softmax) attention layer; ``layers``/``recurrent`` are the study's."""

    heads: tuple[int, ...] = setting((1, 2, 4), "head counts, comma-separated (one model each; first = primary)")
    init_scale: float = setting(0.002, "init variance scale of every layer (the authors')")

    def __post_init__(self) -> None:
        if not self.heads or any(not isinstance(h, int) or h <= 0 for h in self.heads):
            raise ConfigError(f"heads must be a non-empty list of positive integers, got {self.heads!r}")
        require_positive("init_scale", self.init_scale)

    @staticmethod
    def label(heads: int) -> str:
        return f"{heads} head{'s' if heads > 1 else ''}"


@dataclass(frozen=True)
class TrainingConfig:
    """Optimisation; ``None`` takes the authors' value for the model's depth (von Oswald et al. 2023, App. A.12)."""

    steps: int | None = setting(None, "optimiser steps; none: 5000 for one layer or a recurrent stack, 50 000 for "
                                      "deeper separate layers (the authors')")
    batch_size: int = setting(2048, "fresh tasks per training step")
    lr: float | None = setting(None, "AdamW learning rate; none: 1e-3, 5e-4 beyond 3 layers (the authors')")
    grad_clip: float | None = setting(None, "gradient-norm clip; none: 1e-3 up to 2 layers, 10 beyond (the "
                                            "authors'); 0: no clipping")
    beta1: float = setting(0.9, "AdamW beta1")
    beta2: float = setting(0.98, "AdamW beta2")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    checkpoint_every: int = setting(1000, "steps between checkpoints; a rerun of the same command resumes")
    compile: bool = setting(False, "run the training step through torch.compile (about 2x per step once built, "
                                   "about 15 s to build, needs a C++ compiler)")
    warmup: float = setting(0.0, "fraction of the steps over which the learning rate rises linearly from 0 to lr "
                                 "(0: none)")

    def __post_init__(self) -> None:
        require_optimizer_keys(self)
        self.resolve(1, False, 1)  # TrainConfig validates the combination

    def resolve(self, n_layers: int, recurrent: bool, eval_every: int) -> TrainConfig:
        """The concrete settings for a model of ``n_layers`` layers (tied if ``recurrent``): every key given here
        (the same names as ``TrainConfig``'s), the authors' values for those left at None; ``grad_clip=0``: off."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "grad_clip" in given:
            given["grad_clip"] = given["grad_clip"] or None
        return authors_train_config(n_layers, recurrent, eval_every=eval_every, **given)


@dataclass(frozen=True)
class EvaluationConfig:
    """Seeds, the fixed test tasks, the held-out tuning tasks and the evaluation cadence."""

    seed: int = setting(0, "first training seed; seeds are seed, seed+1, ...", check=require_non_negative)
    seeds: int = positive_int(1, "number of training seeds (models trained from independent inits and data)")
    test_seed: int = setting(2023, "seed of the fixed test tasks and of the held-out tuning tasks",
                             check=require_non_negative)
    n_test: int = positive_int(10_000, "test tasks every model and baseline is scored on")
    n_tune: int = positive_int(10_000, "held-out tasks on which the baselines' parameters (GD's η, ...) are tuned")
    eval_every: int = positive_int(100, "training steps between evaluations on the test tasks (curves.csv)")

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + i for i in range(self.seeds)]


@dataclass(frozen=True)
class RegressionConfig:
    """The four parts of every regression study's config; a study subclasses it, retypes ``task``/``model`` where
    its own differ, and adds its own keys."""

    task: RegressionTaskConfig = setting(doc="the tasks", factory=RegressionTaskConfig)
    model: LSAStackConfig = setting(doc="the model", factory=LSAStackConfig)
    training: TrainingConfig = setting(doc="optimisation", factory=TrainingConfig)
    evaluation: EvaluationConfig = setting(doc="seeds and test sets", factory=EvaluationConfig)

    def train_config(self) -> TrainConfig:
        """The training settings resolved for the model's depth (every model part has ``layers`` and
        ``recurrent``)."""
        return self.training.resolve(self.model.layers, self.model.recurrent, self.evaluation.eval_every)

    def check_train_tasks(self) -> None:
        """A fixed training set (``task.train_tasks`` = M) cannot fill a batch larger than M: refused before any
        work is done (``RegressionRun`` calls it)."""
        check_train_tasks(self)


def check_train_tasks(config: Any) -> None:
    """``RegressionConfig.check_train_tasks`` for any config with ``task`` and ``training`` parts."""
    train_tasks = getattr(getattr(config, "task", None), "train_tasks", 0)
    training = getattr(config, "training", None)
    if train_tasks and training is not None:
        if training.batch_size > train_tasks:
            raise ConfigError(f"batch_size {training.batch_size} exceeds the fixed training set of "
                              f"train_tasks={train_tasks} tasks: set batch_size={train_tasks} (full batch) or less")


def parts(factory: Callable[..., Any], doc: str, **values: Any) -> Any:
    """A config part with study-specific defaults, e.g. ``parts(TrainingConfig, "...", steps=4000)``."""
    return setting(doc=doc, factory=lambda: factory(**values))


@dataclass(frozen=True)
class QuickRegressionConfig(RegressionConfig):
    """The smaller budget of the studies beyond the concatenated single layer (sine, separate tokens, softmax
    heads): batches of 512, no clipping, 4096 test and tuning tasks, an evaluation every 250 steps."""

    training: TrainingConfig = parts(TrainingConfig, "optimisation", steps=4000, batch_size=512, lr=3e-3,
                                     grad_clip=0.0)
    evaluation: EvaluationConfig = parts(EvaluationConfig, "seeds and test sets", n_test=4096, n_tune=4096,
                                         eval_every=250)
