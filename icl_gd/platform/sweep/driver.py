"""``run_sweep``: skip finished runs, run the rest on a backend, return one ``RunRecord`` per spec, in order."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icl_gd.core.errors import ConfigError, RunDirectoryError
from icl_gd.core.resources import check_threads
from icl_gd.platform.sweep.backends import run_local, run_ray
from icl_gd.core.study import StudyRegistry
from icl_gd.platform.sweep.plan import Figures, RunSpec
from icl_gd.platform.sweep.progress import SweepProgress
from icl_gd.platform.sweep.worker import RunOutcome, finished_metrics

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class RunRecord:
    """One run of a sweep: ``status`` "done", "skipped" (finished before) or "failed" (``error`` says why);
    ``metrics`` is ``metrics.json``'s ``mean`` ({} when failed)."""

    spec: RunSpec
    run_dir: Path
    status: str
    error: str | None
    wall_s: float
    metrics: dict[str, Any]


def run_sweep(specs: Sequence[RunSpec], root: Path, *, registry: StudyRegistry, backend: str = "local",
              workers: int | None = None, address: str | None = None, device: str = "cpu", progress: bool = True,
              threads: int | None = None, figures: Figures = True) -> list[RunRecord]:
    """Run every spec in ``root/runs/<run_id>`` (specs may mix studies and presets); a run directory that holds
    a finished run is skipped. ``threads``: CPU threads of each run (default 1). ``workers``: local processes
    (default: the number of cores over ``threads``) or, for a Ray instance started here, its CPUs. Failed runs
    are recorded, never raised; Ctrl-C propagates (KeyboardInterrupt). ``figures`` False: the runs draw none; a set
    of run ids: only those runs draw theirs."""
    if backend not in BACKENDS:
        raise ConfigError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers is not None and workers <= 0:
        raise ConfigError(f"--workers must be a positive integer, got {workers}")
    threads = check_threads(threads) or 1  # every run's threads: at most this machine's cores
    if address and backend != "ray":
        raise ConfigError("--address is for --backend ray")
    ids = [spec.run_id() for spec in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError("the sweep names the same run twice (a grid value or seed repeated?)")
    root = Path(root).resolve()  # workers (and Ray nodes) may start elsewhere
    try:
        (root / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirectoryError(f"--out {root} cannot hold the sweep: {exc.strerror or exc}") from None
    records: dict[str, RunRecord] = {}
    display = SweepProgress(len(specs), progress)

    def finished(spec: RunSpec, outcome: RunOutcome) -> None:
        record = RunRecord(spec, root / "runs" / spec.run_id(), outcome.status, outcome.error, outcome.wall_s,
                           outcome.metrics)
        records[spec.run_id()] = record
        display.finish(record)

    todo = []
    for spec in specs:
        metrics = finished_metrics(root / "runs" / spec.run_id())
        if metrics is None:
            todo.append(spec)
        else:
            finished(spec, RunOutcome("skipped", None, 0.0, metrics))
    try:
        if todo and backend == "local":
            default_workers = max(1, (os.cpu_count() or 1) // threads)
            run_local(todo, str(root), device, registry, workers or default_workers, display.start, finished, threads,
                      figures)
        elif todo:
            run_ray(todo, str(root), device, registry, workers, address, display.start, finished, threads, figures)
    finally:
        display.close()
    return [records[run_id] for run_id in ids]
