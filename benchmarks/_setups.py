"""The training set-ups the speed benchmarks time, taken from the studies themselves (not rebuilt by hand).

``captured_training(study, preset, overrides)`` runs the study in this process until it calls
``training.train``, and returns each call's (models, task, config, seeds) instead of training: the exact models,
token task and settings that ``icl-gd run`` would train, so a benchmark times what a run does.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import icl_gd.regression.study as regression_study  # noqa: E402
from icl_gd.platform.runner import execute_run  # noqa: E402
from icl_gd.regression.training import TrainConfig, train  # noqa: E402
from icl_gd.studies import REGISTRY  # noqa: E402


@dataclass
class Captured:
    """One ``train`` call of a study: ``models`` (already on the device), ``task``, ``config``, ``seeds``."""

    models: list
    task: Any
    config: TrainConfig
    seeds: list[int]

    def fresh_training(self, n_steps: int) -> Callable[[], object]:
        """A call that trains fresh copies of the models for ``n_steps`` steps (sampling, forward, backward,
        clipping, the optimiser), without evaluation or checkpoints; the copies are made here, not in the call."""
        import copy
        models = [copy.deepcopy(m) for m in self.models]
        config = replace(self.config, steps=n_steps, eval_every=10 * n_steps, checkpoint_every=10 * n_steps)
        return lambda: train(models, self.task, config, self.seeds)

    def time_steps(self, n_steps: int) -> float:
        """Seconds for ``n_steps`` training steps of fresh copies of the models (``fresh_training``)."""
        import time
        run = self.fresh_training(n_steps)
        start = time.perf_counter()
        run()
        return time.perf_counter() - start


class _Stop(Exception):
    pass


def captured_training(study: str, preset: str = "default", overrides: tuple[str, ...] = (), calls: int = 1,
                      seeds: int = 1) -> list[Captured]:
    """The first ``calls`` ``train`` calls of ``icl-gd run STUDY --preset PRESET --set ... --seeds SEEDS``."""
    got: list[Captured] = []
    real = regression_study.train

    def capture(models, task, config, seeds, **kwargs):
        got.append(Captured(list(models), task, config, list(seeds)))
        if len(got) >= calls:
            raise _Stop
        return real(models, task, replace(config, steps=1, eval_every=1, checkpoint_every=1), seeds)

    regression_study.train = capture
    try:
        with tempfile.TemporaryDirectory() as tmp:
            execute_run(REGISTRY, study, Path(tmp) / "run", preset, overrides, seeds=seeds, threads=1,
                        progress=False)
    except _Stop:
        pass
    finally:
        regression_study.train = real
    if len(got) < calls:
        raise RuntimeError(f"{study} made {len(got)} training calls, expected {calls}")
    return got


# name: (study, preset, overrides, number of train calls that make up one "step" of the set-up)
# Small test and tuning sets: they only shorten what the study does before training, not what it trains.
_QUICK = ("evaluation.n_test=256", "evaluation.n_tune=256")
SETUPS: dict[str, tuple[str, str, tuple[str, ...], int]] = {
    "single": ("single-layer", "default", _QUICK, 1),
    "separate3": ("multi-layer", "default", (*_QUICK, "layers=3", "recurrent=false", "gdpp_adam_steps=0"), 1),
    "separate5": ("multi-layer", "default", (*_QUICK, "layers=5", "recurrent=false", "gdpp_adam_steps=0"), 1),
    "recurrent10": ("multi-layer", "default", (*_QUICK, "layers=10", "recurrent=true", "gdpp_adam_steps=0"), 1),
    "tokens": ("separate-tokens", "paper", _QUICK, 1),
    "sine": ("sine", "paper", _QUICK, 2),
}
