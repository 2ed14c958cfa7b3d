"""``icl-gd compare``: any in-context learner, loaded from a Python file, against GD, GD++, preconditioned GD,
Iterative Newton, least squares and ridge (``icl_gd.regression.compare``).

``--model FILE.py:FACTORY`` names a function in a file; it is called with those of ``d``, ``n`` (context pairs)
and ``d_y`` that its signature takes and returns a ``torch.nn.Module`` or a callable. ``--checkpoint PATH`` loads
a state dict into the module (a plain state dict, or a dict holding one under ``state_dict`` or ``model``). The
layout is ``--layout``, else the predictor's ``layout`` attribute, else ``arguments``. A run writes into ``--out``
``config.json`` (the resolved settings and the seed), ``comparison.csv``, ``figures/comparison.{png,pdf}`` and
``metrics.json`` (last), each atomically.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import torch

from icl_gd.core.config import positive_int, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.results import prepare_run_dir
from icl_gd.core.study import RunContext, Study, StudyRun, write_resolved_config
from icl_gd.regression.compare import CALLS, CompareConfig, compare as compare_predictor, comparison_figure
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, UniformInputs

TASKS = {"linear": UniformInputs, "linear-normal": NormalInputs}  # icl-gd's x ~ U(-1/2, 1/2)^d; Garg et al.'s N(0, I)


@dataclass(frozen=True)
class CompareRunConfig:
    """Everything one ``icl-gd compare`` run resolves to (``config.json``)."""

    model: str = setting("", "FILE.py:FACTORY")
    checkpoint: Optional[str] = setting(None, "state dict loaded into the model")
    task: str = setting("linear", "linear (x ~ U(-1/2, 1/2)^d) or linear-normal (x ~ N(0, I))")
    d: int = positive_int(10, "input dimension")
    n: int = positive_int(10, "context pairs per task")
    layout: str = setting("", "the call the model takes: arguments, concat or interleaved (empty: the model's "
                              "`layout` attribute, else arguments)")
    seed: int = setting(2023, "seed of the test, tuning and probe tasks")
    n_test: int = positive_int(2000, "test tasks")
    n_tune: int = positive_int(2048, "held-out tuning tasks")
    compare: CompareConfig = field(default_factory=CompareConfig)

    def build_task(self) -> LinearRegressionTask:
        if self.task not in TASKS:
            raise ConfigError(f"--task {self.task!r} is not one of {', '.join(TASKS)}")
        return LinearRegressionTask(d=self.d, n_context=self.n, inputs=TASKS[self.task]())


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
    except Exception as error:
        raise ConfigError(f"--model: importing {path} failed: {type(error).__name__}: {error}") from error
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ConfigError(f"--model: {path} has no function {name}")
    wanted = {"d": d, "n": n, "d_y": d_y}
    params = inspect.signature(factory).parameters
    predictor = factory(**{k: v for k, v in wanted.items() if k in params})
    if checkpoint is not None:
        if not isinstance(predictor, torch.nn.Module):
            raise ConfigError(f"--checkpoint needs a torch.nn.Module, {name} returned a {type(predictor).__name__}")
        try:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError, ValueError) as error:
            raise ConfigError(f"--checkpoint {checkpoint}: cannot read it ({error})") from error
        for key in ("state_dict", "model"):
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                state = state[key]
        try:
            predictor.load_state_dict(state)
        except (RuntimeError, TypeError) as error:
            first = str(error).strip().splitlines()[0]
            raise ConfigError(f"--checkpoint {checkpoint} does not fit the model: {first}") from error
    return predictor


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
    ctx = RunContext(prepare_run_dir(out, force), torch.device(device), progress, figures)
    study = Study("compare", "any in-context learner against GD and second-order methods", lambda: config,
                  lambda c, x: {})
    write_resolved_config(ctx, study, config)
    if isinstance(predictor, torch.nn.Module):
        predictor = predictor.to(ctx.device)
    frame = compare_predictor(predictor, task, config.layout, config.compare, device=ctx.device,
                              n_test=config.n_test, n_tune=config.n_tune, seed=config.seed)
    run = StudyRun(ctx, [config.seed])
    run.add_rows("comparison", frame.astype(object).where(frame.notna(), None).to_dict("records"))
    output = frame[frame["layer"].isna()]
    closest = output.loc[output["pred_diff"].idxmin()]
    run.record(config.seed, {"loss": frame.attrs["loss"], "closest_reference": str(closest["reference"]),
                             "closest_steps": None if pd.isna(closest["steps"]) else int(closest["steps"]),
                             "closest_pred_diff": float(closest["pred_diff"]),
                             "parameters": frame.attrs["parameters"]})
    run.finish(lambda mean: [("comparison", comparison_figure(frame))])
    return frame
