"""What a sweep worker does with one ``RunSpec``: the same ``execute_run`` as ``icl-gd run``, ``threads`` intra-op
threads (one by default), no progress bar, every failure turned into a one-line error so the other runs go on."""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icl_gd.core.errors import ICLGDError, ICLGDNotice
from icl_gd.core.results import FINISHED_MARKER, read_json
from icl_gd.core.study import StudyRegistry
from icl_gd.platform.sweep.plan import RunSpec

SHARED_DIR = "shared"  # under a sweep's root: the results its runs share (``icl_gd.core.shared``)


@dataclass(frozen=True)
class RunOutcome:
    """What a worker sends back (plain and picklable); the driver turns it into a ``RunRecord``."""

    status: str  # "done" | "failed"
    error: str | None = None
    wall_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


def finished_metrics(run_dir: Path) -> dict[str, Any] | None:
    """``metrics.json``'s ``mean`` if the run directory holds a finished run, else None."""
    path = Path(run_dir) / FINISHED_MARKER
    if not path.exists():
        return None
    try:
        return dict(read_json(path)["mean"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: run it again (execute_run refuses it; the error is recorded)


def install_notice_printer(prefix: str = "") -> None:
    """Print this process's ``ICLGDNotice`` warnings as one line each on stderr (as the CLI does)."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ICLGDNotice):
            print(f"icl-gd: notice: {prefix}{message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def run_one(spec: RunSpec, root: str, device: str, registry: StudyRegistry, threads: int = 1,
            figures: bool = True) -> RunOutcome:
    """Run ``spec`` in ``root/runs/<run_id>`` through ``execute_run`` on ``threads`` CPU threads (drawing its figures
    unless ``figures`` is False), sharing with the sweep's other runs what their seed does not change under
    ``root/shared`` (``icl_gd.core.shared``); never raises for a failed run."""
    from icl_gd.core.allocator import keep_freed_memory
    from icl_gd.platform.runner import execute_run, is_out_of_memory, out_of_memory_message

    keep_freed_memory()  # in a worker process (pool or Ray): its runs reuse their freed tensors, same numbers
    run_dir = Path(root) / "runs" / spec.run_id()
    start = time.perf_counter()
    finished = finished_metrics(run_dir)
    if finished is not None:  # finished by an earlier try whose worker died before it could say so
        return RunOutcome("done", None, 0.0, finished)
    try:
        execute_run(registry, spec.study, run_dir, spec.preset, spec.overrides, device=device, threads=threads,
                    progress=False, figures=figures, shared=Path(root) / SHARED_DIR)
    except ICLGDError as exc:
        return RunOutcome("failed", _one_line(str(exc)), time.perf_counter() - start)
    except (MemoryError, RuntimeError) as exc:
        message = out_of_memory_message(exc, device) if is_out_of_memory(exc) else f"{type(exc).__name__}: {exc}"
        return RunOutcome("failed", _one_line(message), time.perf_counter() - start)
    except Exception as exc:  # a bug in a study must not stop the sweep; the log keeps the traceback
        traceback.print_exc(file=sys.stderr)
        return RunOutcome("failed", _one_line(f"{type(exc).__name__}: {exc}"), time.perf_counter() - start)
    return RunOutcome("done", None, time.perf_counter() - start, finished_metrics(run_dir) or {})


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "unknown error")[:300]


# ------------------------------------------------------------------ the local pool's worker processes
_started_queue: Any = None


def init_pool_worker(started_queue: Any, threads: int = 1) -> None:
    """Process-pool initializer: ``threads`` intra-op threads, one-line notices, and where to report a run's
    start."""
    from icl_gd.core.resources import set_threads

    global _started_queue
    _started_queue = started_queue
    set_threads(threads)
    install_notice_printer()


def run_one_in_pool(spec: RunSpec, root: str, device: str, registry: StudyRegistry, threads: int = 1,
                    figures: bool = True) -> RunOutcome:
    """``run_one``, reporting (run_id, pid) first so the driver knows which runs are in flight."""
    if _started_queue is not None:
        _started_queue.put((spec.run_id(), os.getpid()))
    return run_one(spec, root, device, registry, threads, figures)
