"""``icl-gd compare``: any in-context learner, loaded from a Python file, against GD, GD++, preconditioned GD,
Iterative Newton, least squares and ridge (``icl_gd.regression.compare.comparison``).

``--model FILE.py:FACTORY`` names a function in a file; it is called with those of ``d``, ``n`` (context pairs)
and ``d_y`` that its signature takes and returns a ``torch.nn.Module`` or a callable. ``--checkpoint PATH`` loads
a state dict into the module (a plain state dict, or a dict holding one under ``state_dict`` or ``model``). The
layout is ``--layout``, else the predictor's ``layout`` attribute, else ``arguments``. A run writes into ``--out``
``config.json`` (the resolved settings and the seed), ``comparison.csv``, ``figures/comparison.{png,pdf}`` and
``metrics.json`` (last), each atomically, and only once the comparison has finished with finite results: a model
that fails, or whose output is constant, NaN, inf or not floating point, is a one-line ``ConfigError`` and leaves
nothing in ``--out``; so does a failure while the results are written (what was written is removed).

``--task sequence`` (``run_sequence_comparison``) scores a causal next-token model per position on linear
dynamical systems instead (``icl_gd.regression.sequence.comparison``) and writes ``positions.csv`` in place of the
table and figure.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import pickle
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd
import torch

from icl_gd.core.config import check_settings, positive_int, require_non_negative, setting
from icl_gd.core.errors import ConfigError, DivergenceError, RunDirectoryError
from icl_gd.core.progress import phases_shown
from icl_gd.core.results import FINISHED_MARKER, prepare_run_dir
from icl_gd.core.study import RunContext, Study, StudyRun, write_resolved_config
from icl_gd.regression.compare.comparison import (CALLS, CompareConfig, closed_form_references, comparison_figure,
                                                  compare as compare_predictor)
from icl_gd.regression.sequence.comparison import SequenceRunConfig, compare_sequence, summary
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, UniformInputs
from icl_gd.regression.theory.one_layer import AHN_SPECTRUM, rotated_covariance

# icl-gd's x ~ U(-1/2, 1/2)^d; Garg et al.'s N(0, I); N(0, cΛ) with Λ of a given spectrum in a random basis (the
# theory's law, docs/theory.md), whose closed-form optimum Γ* and best scalar step join the references
TASKS = ("linear", "linear-normal", "anisotropic")
SEQUENCE_TASK = "sequence"  # linear dynamical systems, scored per position (``run_sequence_comparison``)


@dataclass(frozen=True)
class CompareRunConfig:
    """Everything one ``icl-gd compare`` run resolves to (``config.json``)."""

    model: str = setting("", "FILE.py:FACTORY")
    checkpoint: Optional[str] = setting(None, "state dict loaded into the model")
    task: str = setting("linear", "linear (x ~ U(-1/2, 1/2)^d), linear-normal (x ~ N(0, I)) or anisotropic "
                                  "(x ~ N(0, cΛ), Λ of `spectrum` in a random basis)")
    spectrum: tuple[float, ...] = setting(AHN_SPECTRUM, "anisotropic: the eigenvalues of Λ, one per input dimension "
                                                        "(Ahn et al.'s by default, d = 5)")
    basis_seed: int = setting(2024, "anisotropic: seed of Λ's random basis", check=lambda name, value:
                              require_non_negative(f"--{name.replace('_', '-')}", value))
    covariate_scale: float = setting(1.0, "test contexts and queries from N(0, cΛ) with this c, Γ* and the best "
                                          "scalar step those of c = 1 (linear-normal and anisotropic)")
    d: int = positive_int(10, "input dimension")
    n: int = positive_int(10, "context pairs per task")
    layout: str = setting("", "the call the model takes: arguments, concat or interleaved (empty: the model's "
                              "`layout` attribute, else arguments)")
    seed: int = setting(2023, "seed of the test, tuning and probe tasks", check=lambda name, value:
                        require_non_negative(f"--{name}", value))
    n_test: int = positive_int(2000, "test tasks")
    n_tune: int = positive_int(2048, "held-out tuning tasks")
    compare: CompareConfig = field(default_factory=CompareConfig)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.task not in TASKS:
            raise ConfigError(f"--task {self.task!r} is not one of {', '.join((*TASKS, SEQUENCE_TASK))}")
        if not (isinstance(self.covariate_scale, (int, float)) and self.covariate_scale > 0):
            raise ConfigError(f"--covariate-scale must be positive, got {self.covariate_scale!r}")
        if self.covariate_scale != 1 and self.task == "linear":
            raise ConfigError("--covariate-scale needs Gaussian inputs: --task linear-normal or anisotropic")
        if self.task == "anisotropic" and len(self.spectrum) != self.d:
            raise ConfigError(f"--spectrum has {len(self.spectrum)} eigenvalues but --d is {self.d}")
        if any(not (isinstance(v, (int, float)) and v > 0) for v in self.spectrum):
            raise ConfigError(f"--spectrum must be positive eigenvalues, got {self.spectrum!r}")

    def training_covariance(self) -> torch.Tensor | None:
        """Λ (d, d) float64 of the Gaussian law the closed forms are taken on (c = 1); None for uniform inputs."""
        if self.task == "linear":
            return None
        if self.task == "linear-normal":
            return torch.eye(self.d, dtype=torch.float64)
        return rotated_covariance(tuple(float(v) for v in self.spectrum), self.basis_seed)

    def build_task(self) -> LinearRegressionTask:
        """The test law: inputs U(-1/2, 1/2)^d, or N(0, cΛ)."""
        covariance = self.training_covariance()
        if covariance is None:
            return LinearRegressionTask(d=self.d, n_context=self.n, inputs=UniformInputs())
        shifted = (self.covariate_scale * covariance).tolist()
        return LinearRegressionTask(d=self.d, n_context=self.n,
                                    inputs=NormalInputs(covariance=tuple(map(tuple, shifted))))


def load_predictor(spec: str, checkpoint: Path | None, d: int, n: int, d_y: int = 1) -> Any:
    """The predictor ``FILE.py:FACTORY`` builds (called with those of d, n, d_y its signature takes), with the
    state dict at ``checkpoint`` loaded into it."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text.endswith(".py") or not name.isidentifier():
        raise ConfigError(f"--model {spec!r} must be FILE.py:FACTORY (a function in a Python file)")
    path = Path(path_text)
    if not path.is_file():
        raise ConfigError(f"--model: no file {path}")
    module_spec = importlib.util.spec_from_file_location(f"icl_gd_compare_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent.resolve()))  # the file may import its neighbours
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:  # the user's module may end the interpreter: say so instead
        raise ConfigError(f"--model: importing {path} {_failure(error)}") from error
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError(f"--model: {path} has no function {name}")
    wanted = {"d": d, "n": n, "d_y": d_y}
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature: called with nothing
        params = {}
    try:
        predictor = factory(**{k: v for k, v in wanted.items() if k in params})
    except (Exception, SystemExit) as error:
        raise ConfigError(f"--model: {name}() in {path} {_failure(error)}") from error
    if checkpoint is not None:
        if not isinstance(predictor, torch.nn.Module):
            raise ConfigError(f"--checkpoint needs a torch.nn.Module, {name} returned a {type(predictor).__name__}")
        try:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as error:  # not torch's format, or pickled objects beyond tensors
            raise ConfigError(f"--checkpoint {checkpoint}: not a state dict torch.save wrote (or it holds objects "
                              "other than tensors, which are not loaded)") from error
        except Exception as error:  # missing, unreadable, a truncated archive
            raise ConfigError(f"--checkpoint {checkpoint}: cannot read it ({_failure(error)})") from error
        for key in ("state_dict", "model"):
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                state = state[key]
        try:
            predictor.load_state_dict(state)
        except (RuntimeError, TypeError) as error:
            first = str(error).strip().splitlines()[0]
            raise ConfigError(f"--checkpoint {checkpoint} does not fit the model: {first}") from error
    return predictor


def _failure(error: BaseException) -> str:
    """How the user's code failed, in words: "raised T: message" or "exited (sys.exit(code))"."""
    if isinstance(error, SystemExit):
        return f"exited (sys.exit({error.code!r}))"
    first = (str(error).strip().splitlines() or [""])[0][:200]
    return f"raised {type(error).__name__}: {first}"


def _check_out(out: Path, force: bool) -> None:
    """Refuse ``out`` before the comparison runs, touching nothing: not a directory, a finished comparison
    without ``force``, or no writable folder to create it in."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RunDirectoryError(f"--out {out} exists and is not a directory")
    if (out / FINISHED_MARKER).exists() and not force:
        raise RunDirectoryError(f"--out {out} already holds a finished run; pass --force to overwrite it")
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK):
        raise RunDirectoryError(f"--out {out} is not usable: {existing} is not writable")


def run_comparison(config: CompareRunConfig, out: Path, device: str = "cpu", force: bool = False,
                   figures: bool = True, progress: bool = True) -> pd.DataFrame:
    """Load the model, compare it, write the run (module docstring); returns the comparison."""
    task = config.build_task()
    predictor = load_predictor(config.model, Path(config.checkpoint) if config.checkpoint else None, config.d,
                               config.n)
    if not config.layout:  # the predictor may declare its own
        declared = getattr(predictor, "layout", "arguments")
        config = replace(config, layout=declared if isinstance(declared, str) else "arguments")
    if config.layout not in CALLS:
        raise ConfigError(f"--layout {config.layout!r} is not one of {', '.join(CALLS)}")
    _check_out(out, force)
    torch_device = torch.device(device)
    if isinstance(predictor, torch.nn.Module):
        predictor = predictor.to(torch_device)
    try:
        with phases_shown(progress):  # the references' tuning says how far it has come (icl_gd.core.progress)
            extra = closed_form_references(config.training_covariance(), config.covariate_scale, task)
            frame = compare_predictor(predictor, task, config.layout, config.compare, device=torch_device,
                                      n_test=config.n_test, n_tune=config.n_tune, seed=config.seed, extra=extra)
    except ConfigError as error:  # what the model did wrong, with the model's name
        raise ConfigError(f"--model {config.model}: {error}") from error
    output = frame[frame["layer"].isna()]
    finite = output["pred_diff"].astype(float).map(math.isfinite)
    if not math.isfinite(frame.attrs["loss"]) or not finite.any():  # ``compare`` refuses a non-finite predictor
        raise DivergenceError(f"the comparison of {config.model} ended without a finite result (loss "
                              f"{frame.attrs['loss']}); nothing was written to --out")
    finite_rows = output[finite]
    closest = finite_rows.loc[finite_rows["pred_diff"].astype(float).idxmin()]
    metrics = {"loss": frame.attrs["loss"], "closest_reference": str(closest["reference"]),
               "closest_steps": None if pd.isna(closest["steps"]) else int(closest["steps"]),
               "closest_pred_diff": float(closest["pred_diff"]), "parameters": frame.attrs["parameters"]}
    _write_run(config, Path(out), torch_device, force, figures, progress, frame, metrics)
    return frame


def run_sequence_comparison(config: SequenceRunConfig, out: Path, device: str = "cpu", force: bool = False,
                            progress: bool = True) -> pd.DataFrame:
    """``--task sequence``: load the causal model (called with d = d_s and n = T if it takes them), score it at every
    position against the sequence referees (``icl_gd.regression.sequence.comparison``) and write ``config.json``,
    ``positions.csv`` and ``metrics.json`` (last) into ``out``, each atomically; returns the per-position frame."""
    task = config.build_task()
    predictor = load_predictor(config.model, Path(config.checkpoint) if config.checkpoint else None, config.d,
                               config.length, config.d)
    _check_out(out, force)
    torch_device = torch.device(device)
    if isinstance(predictor, torch.nn.Module):
        predictor = predictor.to(torch_device)
    try:
        with phases_shown(progress):
            frame = compare_sequence(predictor, task, config.n_test, config.n_tune, config.seed, torch_device)
    except ConfigError as error:  # what the model did wrong, with the model's name
        raise ConfigError(f"--model {config.model}: {error}") from error
    _write_run(config, Path(out), torch_device, force, False, progress, frame, summary(frame), table="positions",
               figure=None)
    return frame


def _write_run(config: Any, out: Path, device: torch.device, force: bool, figures: bool, progress: bool,
               frame: pd.DataFrame, metrics: dict[str, Any], table: str = "comparison",
               figure: Callable[[pd.DataFrame], Any] | None = comparison_figure) -> None:
    """Write the finished comparison into ``out`` (module docstring): ``frame`` as ``{table}.csv``, ``figure(frame)``
    (None: no figure); if any write fails, remove what this call wrote (the folder too, when it made it), so that
    no partial comparison is left looking like a result."""
    made = not out.exists()
    before = set(out.rglob("*")) if not made else set()
    try:
        ctx = RunContext(prepare_run_dir(out, force), device, progress, figures)
        study = Study("compare", "any in-context learner against GD and second-order methods", lambda: config,
                      lambda c, x: {})
        write_resolved_config(ctx, study, config)
        run = StudyRun(ctx, [config.seed])
        run.add_rows(table, frame.astype(object).where(frame.notna(), None).to_dict("records"))
        run.record(config.seed, metrics)
        run.finish(None if figure is None else lambda mean: [(table, figure(frame))])
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for path in sorted(set(out.rglob("*")) - before, reverse=True):  # files before their folders
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            (out / FINISHED_MARKER).unlink(missing_ok=True)
        raise
