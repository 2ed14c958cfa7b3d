"""The regression studies' part of the study contract: the config parts they share and ``RegressionRun``.

A regression study's ``run`` is a short script over ``RegressionRun``, a ``StudyRun`` (``icl_gd.core.study``: seeds,
tables, per-seed metrics, figures, ``metrics.json``) that adds what every regression study would otherwise repeat: the seed list, the fixed test tasks
and the held-out tuning tasks drawn from the study's task, the references (baselines) that models are scored and
aligned against, evaluation rows every ``eval_every`` steps (``curves.csv``), checkpoint naming, tidy CSV tables,
figures (PNG + PDF) and ``metrics.json`` with the mean and spread over seeds, written last.

Config parts (nested dataclasses; ``--set d=5`` reaches ``task.d`` by its suffix): ``task``, ``model``,
``training`` and ``evaluation``. In ``training``, ``None`` means the authors' value for the model's depth, the same
way in every study (``TrainingConfig.resolve``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import torch
from torch import nn

from icl_gd.core.config import (check_settings, positive_int, require_non_negative, require_positive, require_scale,
                                setting)
from icl_gd.core.errors import ConfigError
from icl_gd.core.results import to_jsonable
from icl_gd.core.shared import TABLES, Codec
from icl_gd.core.optim import require_optimizer_keys
from icl_gd.regression.evaluation import EvalSet, Scored, score, scored_rows
from icl_gd.regression.gd import GDPPParams
from icl_gd.regression.lsa import LSAConfig
from icl_gd.regression.metrics import Predictor
from icl_gd.regression.ood import default_sweeps, evaluate_sweeps
from icl_gd.core.progress import phased
from icl_gd.core.timing import timed
from icl_gd.core.study import RunContext, StudyRun, TrainingWork
from icl_gd.regression.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.regression.tokens import ConcatTokenTask
from icl_gd.regression.training import TokenTask, TrainConfig, authors_train_config, train



# ---------------------------------------------------------------------------------------------------- config parts
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


# ---------------------------------------------------------------------------------------------------- the run
T = TypeVar("T")


def _schedule_json(params: GDPPParams) -> dict[str, list[float]]:
    return {"etas": list(params.etas), "gammas": list(params.gammas)}


def _schedule_of_json(value: Mapping[str, Any]) -> GDPPParams:
    """The schedule ``_schedule_json`` wrote (JSON keeps each entry's type, int or float, and a float's bits);
    ValueError unless it is as many finite numbers η as γ."""
    etas, gammas = (tuple(value[k]) for k in ("etas", "gammas"))
    if not etas or len(etas) != len(gammas) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in etas + gammas):
        raise ValueError("a stored schedule is not as many finite η as γ")
    return GDPPParams(etas, gammas)


SCHEDULE = Codec(_schedule_json, _schedule_of_json)


class RegressionRun(StudyRun):
    """One run of a regression study, from its config to ``metrics.json``.

    ``test`` (tokens (B, T, D), targets (B, d_y)) holds ``n_test`` fixed tasks (Stream.TEST, ``test_seed``); the
    held-out tuning tasks (Stream.TUNE) come from ``tune_batch``/``tune_tokens``. References are scored once;
    every evaluation of a model aligns it with the references marked ``align`` and draws the loss of those
    marked ``curve`` beside it. Tables are tidy rows written as ``{name}.csv``; ``curves`` has the columns
    ``CURVE_COLUMNS``.
    """

    def __init__(self, config: RegressionConfig, ctx: RunContext, token_task: TokenTask) -> None:
        check_train_tasks(config)
        ev = config.evaluation
        super().__init__(ctx, ev.seed_list)
        self.config, self.token_task = config, token_task
        self.layout = token_task.layout  # type: ignore[attr-defined]
        self.test_batch, tokens = token_task.batch_tokens(ev.n_test, ev.test_seed, 0, Stream.TEST, ctx.device)
        self.test = EvalSet(tokens, self.test_batch.y_query, self.layout.d_x)
        self.references: dict[str, Scored] = {}
        self._aligned: list[str] = []
        self._curves: dict[str, str] = {}  # reference -> its label in curves.csv

    # ------------------------------------------------------------------ data
    def tune_batch(self, dtype: torch.dtype = torch.float64) -> Any:
        """The ``n_tune`` held-out tuning tasks (never the test tasks), float64 by default."""
        ev = self.config.evaluation
        return self.token_task.task.sample(ev.n_tune, ev.test_seed, 0, Stream.TUNE, self.device, dtype)  # type: ignore[attr-defined]

    def tune_tokens(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (B, T, D), targets (B, d_y)) of the tuning tasks, laid out like the test tokens."""
        ev = self.config.evaluation
        batch, tokens = self.token_task.batch_tokens(ev.n_tune, ev.test_seed, 0, Stream.TUNE, self.device)
        return tokens, batch.y_query

    def seed_independent(self, name: str, compute: Callable[[], T], codec: Codec[T] | None = None) -> T:
        """``compute()``, a result of the held-out or test tasks alone (``test_seed``'s, which no training seed
        changes): a reference's tuned schedule (``codec`` None: a ``GDPPParams``) or its rows (``shared.TABLES``).
        In a sweep, one run of this set-up computes it and the others (its other seeds) read the very same values
        (``icl_gd.core.shared``, keyed by the config but its seeds); run alone, computed here."""
        shared = self.ctx.shared
        if shared is None:
            return compute()
        config = to_jsonable(self.config)
        del config["evaluation"]["seed"], config["evaluation"]["seeds"]
        config_type = type(self.config)
        depends_on = {"config_type": f"{config_type.__module__}.{config_type.__qualname__}", "config": config,
                      "device": str(self.device)}
        return shared.value(name, depends_on, compute, codec or SCHEDULE)  # type: ignore[arg-type]

    def shared_rows(self, name: str, rows: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """``rows()``, tidy rows of the held-out or test tasks alone (a reference's depth curves), shared between
        the seeds of a sweep as ``seed_independent``, every float bit for bit."""
        return self.seed_independent(name, lambda: [rows()], TABLES)[0]

    # ------------------------------------------------------------------ scoring
    def score(self, predictor: Predictor) -> Scored:
        return score(predictor, self.test)

    @phased("scoring a reference on the test tasks")
    def add_reference(self, name: str, predictor: Predictor, align: bool = True, curve: str | None = "") -> Scored:
        """Score a baseline once. ``align``: models are aligned with it at every evaluation; ``curve``: its loss is
        drawn beside the training curves under this label ("" = ``name``, None = not drawn)."""
        self.references[name] = scored = self.score(predictor)
        if align:
            self._aligned.append(name)
        if curve is not None:
            self._curves[name] = curve or name
        return scored

    def eval_rows(self, step: int, seed: int, model: str, predictor: Predictor | Scored,
                  against: Mapping[str, Scored] | None = None) -> list[dict[str, Any]]:
        """Tidy rows: ``predictor``'s test loss and its alignment with ``against`` (default: the aligned
        references). Timed as the ``evaluation`` phase (inside ``training`` when called during it)."""
        with timed("evaluation"):
            scored = predictor if isinstance(predictor, Scored) else self.score(predictor)
            if against is None:
                against = {name: self.references[name] for name in self._aligned}
            return scored_rows(step, seed, model, scored, against)

    def _reference_rows(self, step: int, seed: int) -> list[dict[str, Any]]:
        return [{"step": step, "seed": seed, "model": label, "metric": "loss", "value": self.references[name].loss}
                for name, label in self._curves.items()]

    # ------------------------------------------------------------------ training
    def train_seeds(self, label: str, make_model: Callable[[int], nn.Module],
                    evaluate: Callable[[nn.Module, int, int], list[dict[str, Any]]] | None,
                    batched: bool = False, training: TrainConfig | None = None) -> dict[int, nn.Module]:
        """A model per seed (``make_model(seed)``, moved to the device), trained with the resolved training
        settings (or ``training``, e.g. a baseline's own optimiser), one after the other or all as one batched
        model; returns {seed: trained model}.

        Checkpoints are ``checkpoints/{label}_seed{s}.pt`` (``..._seeds{a}-{b}.pt`` when batched); their
        fingerprint covers the label, the config's parts and the seeds. ``evaluate(model, step, seed)``'s
        rows and the references' loss rows go to ``curves.csv``.
        """
        models = {seed: make_model(seed).to(self.device) for seed in self.seeds}
        groups = [list(self.seeds)] if batched and len(self.seeds) > 1 else [[s] for s in self.seeds]
        training = training or self.config.train_config()

        def rows(model: nn.Module, step: int, seed: int) -> list[dict[str, Any]]:
            return (evaluate(model, step, seed) if evaluate else []) + self._reference_rows(step, seed)

        for seeds in groups:
            name = f"{label}_seed{seeds[0]}" if len(seeds) == 1 else f"{label}_seeds{seeds[0]}-{seeds[-1]}"
            fp = config_fingerprint(label, self.config.task, self.config.model, training, seeds)
            states = train([models[s] for s in seeds], self.token_task, training, seeds, device=self.device,
                           evaluate=rows, checkpoint_path=self.checkpoint(name),
                           fingerprint=fp, progress=self.ctx.progress, description=name)
            for state in states:
                self.tables["curves"].extend(state.history)
        return models

    # ------------------------------------------------------------------ results
    @phased("out-of-distribution sweeps")
    def add_ood(self, seed: int, predictors: Mapping[str, Predictor], n_tasks: int) -> None:
        """The out-of-distribution sweeps (``icl_gd.regression.ood``) of the concatenated-layout task, into ``ood.csv``."""
        task = self.token_task.task  # type: ignore[attr-defined]
        rows = evaluate_sweeps(task, predictors, default_sweeps(task.n_context), n_tasks,
                               self.config.evaluation.test_seed, self.device)
        self.add_rows("ood", rows, seed=seed)


def relative_gap(value: float, reference: float) -> float:
    """(value - reference) / reference: how much worse than the reference (negative: better)."""
    return (value - reference) / reference


# ---------------------------------------------------------------------------------------------------- declared work
def regression_work(label: str, token_task: TokenTask, make_model: Callable[[int], nn.Module],
                    settings: TrainConfig) -> TrainingWork:
    """One of a study's trainings for ``Study.training_work`` (the products floor, ``icl_gd.platform.floor``):
    ``settings.steps`` steps of ``make_model(seed)`` on ``token_task``. A fresh training trains seed 0's model (the
    products of a step do not depend on the seed) through ``train`` on the CPU, without evaluation or checkpoints."""

    def fresh_training(n_steps: int) -> Callable[[], object]:
        models = [make_model(0)]
        config = replace(settings, steps=n_steps, eval_every=n_steps, checkpoint_every=n_steps)
        return lambda: train(models, token_task, config, [0])

    return TrainingWork(label, settings.steps, fresh_training)


def concat_work(config: RegressionConfig, build: Callable[[Any, int], nn.Module], label: str = "trained"
                ) -> list[TrainingWork]:
    """``Study.training_work`` of a study that trains ``build(layout, seed)`` per seed on concatenated tokens of
    ``config.task`` with the resolved settings (``config.train_config()``)."""
    task = ConcatTokenTask(config.task.build())
    return [regression_work(label, task, lambda seed: build(task.layout, seed), config.train_config())]
