"""The regression studies' part of the study contract: the config parts they share and ``RegressionRun``.

A regression study's ``run`` is a short script over ``RegressionRun``, a ``StudyRun`` (``icl_gd.core.study``: seeds,
tables, per-seed metrics, figures, ``metrics.json``) that adds what every regression study would otherwise repeat: the seed list, the fixed test tasks
and the held-out tuning tasks drawn from the study's task, the references (baselines) that models are scored and
aligned against, evaluation rows every ``eval_every`` steps (``curves.csv``), checkpoint naming, tidy CSV tables,
figures (PNG + PDF) and ``metrics.json`` with the mean and spread over seeds, written last.

Its config parts (``task``, ``model``, ``training``, ``evaluation``) live in ``icl_gd.regression.config`` and
are re-exported here for the studies.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import torch
from torch import nn

from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.results import to_jsonable
from icl_gd.core.shared import TABLES, Codec
from icl_gd.regression.evaluation import EvalSet, Scored, score, scored_rows
from icl_gd.regression.gd import GDPPParams
from icl_gd.regression.metrics import Predictor, regression_loss
from icl_gd.regression.ood import default_sweeps, evaluate_sweeps
from icl_gd.core.progress import phased
from icl_gd.core.timing import timed
from icl_gd.core.study import RunContext, StudyRun, TrainingWork
from icl_gd.regression.tasks import Stream
from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.regression.tokens import ConcatTokenTask
from icl_gd.regression.training import TokenTask, TrainConfig, train
from icl_gd.regression.config import (  # noqa: F401  (re-exported: the studies' one import)
    EvaluationConfig, HeadsModelConfig, LSAStackConfig, QuickRegressionConfig, RegressionConfig, RegressionTaskConfig,
    TrainingConfig, check_train_tasks, parts)



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
        self._diverged: dict[int, list[str]] = {}  # seed -> labels of its trainings that ended diverged

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
                    batched: bool = False, training: TrainConfig | None = None,
                    predictor: Callable[[nn.Module], nn.Module] = lambda model: model) -> dict[int, nn.Module]:
        """A model per seed (``make_model(seed)``, moved to the device), trained with the resolved training
        settings (or ``training``, e.g. a baseline's own optimiser), one after the other or all as one batched
        model; returns {seed: trained model}.

        Checkpoints are ``checkpoints/{label}_seed{s}.pt`` (``..._seeds{a}-{b}.pt`` when batched); their
        fingerprint covers the label, the config's parts and the seeds. ``evaluate(model, step, seed)``'s
        rows and the references' loss rows go to ``curves.csv``. ``predictor(model)``: what predicts the query from
        the test tokens, where the trained module is a training view of it (``gpt.EveryPrefix``: its ``model``);
        the divergence check scores that.
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
        self._check_divergence(label, {seed: predictor(model) for seed, model in models.items()})
        return models

    def _check_divergence(self, label: str, models: Mapping[int, nn.Module]) -> None:
        """Flag each seed's trained model whose test loss is not finite or above the zero predictor's (the loss
        of predicting nothing, which training starts near): a notice now, ``diverged`` in ``metrics.json``. On a
        small fixed training set (``train_tasks``) a finite test loss above it is over-fitting when the loss on
        the training tasks fell below the zero predictor's there: a notice that says so, not flagged."""
        zero = regression_loss(torch.zeros_like(self.test.targets), self.test.targets)
        for seed, model in models.items():
            with torch.no_grad():
                loss = regression_loss(model(self.test.tokens), self.test.targets)
            if not math.isfinite(loss) or loss > zero:
                if math.isfinite(loss) and self._over_fits(label, seed, model, loss, zero):
                    continue
                self._diverged.setdefault(seed, []).append(label)
                warnings.warn(f"{label} (seed {seed}) diverged: its test loss {loss:.4g} is above the zero "
                              f"predictor's {zero:.4g}; metrics.json lists it under 'diverged' (a smaller lr or "
                              "input range may train)", ICLGDNotice, stacklevel=2)

    def _over_fits(self, label: str, seed: int, model: nn.Module, loss: float, zero: float) -> bool:
        """Whether ``model``, trained on a fixed set of tasks, fits them (its loss on them below the zero
        predictor's there) while its test loss ``loss`` is above the zero predictor's ``zero``; if so, a notice."""
        fixed = getattr(getattr(self.token_task, "task", None), "train_tasks", 0)
        if not fixed:
            return False
        tokens, targets = self.token_task.train_batch(fixed, seed, 0, self.device, self.test.tokens.dtype)
        with torch.no_grad():
            fitted = regression_loss(model(tokens), targets)
        fitted_zero = regression_loss(torch.zeros_like(targets), targets)
        if not fitted < fitted_zero:
            return False
        warnings.warn(f"{label} (seed {seed}) over-fits its {fixed} fixed training tasks: its test loss {loss:.4g} "
                      f"is above the zero predictor's {zero:.4g}, while on those tasks its loss fell to {fitted:.4g} "
                      f"(the zero predictor's: {fitted_zero:.4g}): what a small fixed task set does, not a "
                      "divergence", ICLGDNotice, stacklevel=3)
        return True

    # ------------------------------------------------------------------ results
    def finish(self, figures: Callable[[dict[str, Any]], Iterable[tuple[str, Any]]] | None = None,
               reductions: Mapping[str, Callable[[list[float]], Any]] | None = None,
               columns: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
        """``StudyRun.finish``; when a training diverged (``_check_divergence``), each seed's metrics and the mean
        hold ``diverged``: the labels of the models that diverged (the mean: in any seed)."""
        if self._diverged:
            for seed in self.seeds:
                self.record(seed, {"diverged": sorted(self._diverged.get(seed, []))})
            every = sorted({label for labels in self._diverged.values() for label in labels})
            reductions = {**(reductions or {}), "diverged": lambda _: every}
        return super().finish(figures, reductions, columns)

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
