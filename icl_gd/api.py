"""The notebook API: a finished run directory as one object, and a study run that returns one.

    from icl_gd.studies import run          # run_study with the studies' registry
    r = run("single-layer", "runs/quick", steps=500)
    r.metrics["mean"]["loss_trained"], r.table("curves"), r.figures["loss_curves"]
    load_run("runs/quick")                  # any finished run directory, one of a sweep's runs/ included

The library does not know the studies: ``run_study`` takes the registry (``icl_gd.studies.REGISTRY``), as
``icl_gd.platform.runner.execute_run`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icl_gd.core.errors import RunDirectoryError
from icl_gd.core.results import FINISHED_MARKER

if TYPE_CHECKING:
    import pandas as pd

    from icl_gd.core.study import StudyRegistry

CONFIG_FILE = "config.json"
FIGURES_DIR = "figures"  # icl_gd.core.plotting.save_figure writes figures/<name>.png and .pdf


@dataclass(frozen=True)
class Run:
    """A finished run directory, read once.

    ``config``: ``config.json`` (``study``, ``preset``, the nested ``config`` with ``evaluation.seed`` and
    ``evaluation.seeds``, ``resolved_training``, ``device``, ``versions``, ...). ``metrics``: ``metrics.json``
    (``mean``, ``std``, ``seeds``: one entry per seed). ``tables``: names of the tidy CSV tables in the directory
    (``curves`` for ``curves.csv``); ``table(name)`` reads one. ``figures``: figure name -> path of its PNG (a PDF
    lies beside it).
    """

    path: Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    tables: tuple[str, ...]
    figures: Mapping[str, Path]

    @property
    def study(self) -> str:
        return self.config.get("study", "?")

    @property
    def preset(self) -> str:
        return self.config.get("preset", "?")

    @property
    def mean(self) -> dict[str, Any]:
        """``metrics["mean"]``: every metric averaged over seeds."""
        return self.metrics["mean"]

    @property
    def seeds(self) -> tuple[int | str, ...]:
        """The seeds whose metrics ``metrics.json`` holds (``metrics["seeds"]``'s keys, as ints where they are)."""
        return tuple(int(s) if str(s).lstrip("-").isdigit() else s for s in self.metrics.get("seeds", {}))

    def table(self, name: str) -> "pd.DataFrame":
        """The CSV table ``name`` (``"curves"`` reads ``curves.csv``) as a pandas DataFrame."""
        if name not in self.tables:
            raise RunDirectoryError(f"{self.path} has no table {name!r} (tables: {', '.join(self.tables) or 'none'})")
        import pandas as pd  # pandas ships with seaborn; imported only when a table is read

        return pd.read_csv(self.path / f"{name}.csv")

    def __repr__(self) -> str:
        headline = [f"{k}={_short(v)}" for k, v in self.mean.items() if isinstance(v, (int, float))]
        more = f", ... ({len(headline) - 6} more)" if len(headline) > 6 else ""
        return "\n".join([
            f"Run {self.path}",
            f"  study    {self.study} (preset {self.preset}), seeds {', '.join(map(str, self.seeds)) or 'none'}",
            f"  tables   {', '.join(self.tables) or 'none'}",
            f"  figures  {', '.join(self.figures) or 'none'}",
            f"  mean     {', '.join(headline[:6])}{more}",
        ])


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirectoryError(f"{path.parent}: cannot read {what} ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise RunDirectoryError(f"{path.parent}: {what} is not a JSON object")
    return data


def load_run(path: str | Path) -> Run:
    """Read the finished run in ``path``. A directory that is not a finished run (no ``metrics.json``: unfinished,
    interrupted, a sweep's root, or no run at all) is a RunDirectoryError naming the path and what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirectoryError(f"{path}: no such run directory")
    if not (path / FINISHED_MARKER).is_file():
        if (path / "sweep.csv").is_file():
            raise RunDirectoryError(f"{path} is a sweep, not a run: load one of its runs/ (no {FINISHED_MARKER})")
        started = (path / CONFIG_FILE).is_file()
        raise RunDirectoryError(f"{path}: no {FINISHED_MARKER}, so not a finished run"
                                + (" (started, not finished: rerun its command to resume)" if started else ""))
    if not (path / CONFIG_FILE).is_file():
        raise RunDirectoryError(f"{path}: no {CONFIG_FILE} beside {FINISHED_MARKER}")
    metrics = _read_json(path / FINISHED_MARKER, FINISHED_MARKER)
    if "mean" not in metrics:
        raise RunDirectoryError(f"{path}: {FINISHED_MARKER} has no 'mean'")
    figures_dir = path / FIGURES_DIR
    figures = {p.stem: p for p in sorted(figures_dir.glob("*.png"))} if figures_dir.is_dir() else {}
    return Run(path=path, config=_read_json(path / CONFIG_FILE, CONFIG_FILE), metrics=metrics,
               tables=tuple(sorted(p.stem for p in path.glob("*.csv"))), figures=figures)


def run_study(name: str, out: str | Path, *, registry: "StudyRegistry", preset: str = "default",
              steps: int | None = None, seeds: int | None = None,
              overrides: Sequence[str] | Mapping[str, Any] = (), device: str = "cpu", threads: int | None = None,
              progress: bool = False, force: bool = False, figures: bool = True) -> Run:
    """Run study ``name`` into ``out`` (as ``icl-gd run`` does) and return the finished run.

    ``overrides`` are ``--set`` values: ``["n_test=1000", "task.d=5"]`` or ``{"n_test": 1000, "task.d": 5}``.
    ``threads`` None takes the study's default; like the CLI it sets this process's torch (and BLAS) threads. A
    rerun into an unfinished ``out`` resumes it; a finished one is a RunDirectoryError unless ``force``. ``figures``
    False draws none (same numbers, a fraction of a small run's time).
    """
    from icl_gd.platform.runner import execute_run  # torch and the runner load only when a study runs

    if isinstance(overrides, Mapping):
        overrides = [f"{key}={_override_value(value)}" for key, value in overrides.items()]
    execute_run(registry, name, Path(out), preset, list(overrides), steps=steps, seeds=seeds, device=device,
                threads=threads, progress=progress, force=force, figures=figures)
    return load_run(out)


def _override_value(value: Any) -> str:
    """A Python value as ``--set`` writes it: true/false, none, comma-separated lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(_override_value(v) for v in value)
    return str(value)


__all__ = ["Run", "load_run", "run_study"]
