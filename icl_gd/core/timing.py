"""How long a run took, kept beside its results in ``timings.json``, so that estimates (``icl-gd reproduce --plan``)
and speed figures come from measured runs rather than from memory.

``run_timing(out)`` wraps one attempt at a run: its wall and CPU seconds, the machine's load average at its start
and end, the CPU threads it used, how it ended, and the wall seconds spent in each named phase (``timed(name)``;
every ``progress.phase`` is one, and the training loop is ``timed("training")``). Nested phases are keyed by
their path, ``"outer > inner"``, summed over calls. A run resumed from its checkpoint appends its attempt to the
earlier ones, so the file tells how the time was spent across interruptions. An attempt is recorded however it
ends in Python (finished, an error, Ctrl-C); one killed by a signal that Python does not turn into an exception
(SIGTERM, SIGKILL, out-of-memory kill) leaves no entry. The file is written atomically and is not read by any
statistic: no number of a run depends on it.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from icl_gd.core.results import read_json, write_json

TIMINGS_FILE = "timings.json"


@dataclass
class PhaseClock:
    """Wall seconds and calls per phase path, in the order first entered (an outer phase before its inner ones)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def enter(self, path: str) -> None:
        self.seconds.setdefault(path, 0.0)
        self.calls[path] = self.calls.get(path, 0) + 1

    def add(self, path: str, seconds: float) -> None:
        self.seconds[path] += seconds


_clock: contextvars.ContextVar[PhaseClock | None] = contextvars.ContextVar("icl_gd_phase_clock", default=None)
_path: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("icl_gd_phase_path", default=())


@contextmanager
def timed(name: str) -> Iterator[None]:
    """Add the wall time of the block to phase ``name`` of the current ``run_timing`` (nothing outside one)."""
    clock = _clock.get()
    if clock is None:
        yield
        return
    path = _path.get() + (name,)
    key = " > ".join(path)
    clock.enter(key)
    token = _path.set(path)
    start = time.perf_counter()
    try:
        yield
    finally:
        _path.reset(token)
        clock.add(key, time.perf_counter() - start)


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "finished"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"failed ({type(exc).__name__})"


@contextmanager
def run_timing(out: Path) -> Iterator[PhaseClock]:
    """Time one attempt at the run in ``out`` and append it to ``out/timings.json`` however the attempt ends (a
    failure to write the file on a failed attempt never hides the attempt's own error)."""
    clock = PhaseClock()
    token = _clock.set(clock)
    started = datetime.now(timezone.utc)
    wall0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    error: BaseException | None = None
    try:
        yield clock
    except BaseException as exc:
        error = exc
        raise
    finally:
        _clock.reset(token)
        attempt = {"started": started.isoformat(timespec="seconds"), "outcome": _outcome(error),
                   "wall_s": round(time.perf_counter() - wall0, 3), "cpu_s": round(time.process_time() - cpu0, 3),
                   "load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2),
                   "threads": torch.get_num_threads(), "cores": os.cpu_count(),
                   "phases_wall_s": {k: round(v, 3) for k, v in clock.seconds.items()},
                   "phase_calls": dict(clock.calls)}
        try:
            append_attempt(Path(out), attempt)
        except OSError:
            if error is None:
                raise


def read_timings(out: Path) -> list[dict[str, Any]]:
    """The attempts recorded in ``out/timings.json``, oldest first ([] when there is no file)."""
    path = Path(out) / TIMINGS_FILE
    return list(read_json(path)["attempts"]) if path.exists() else []


def append_attempt(out: Path, attempt: dict[str, Any]) -> None:
    attempts = read_timings(out) + [attempt]
    write_json(Path(out) / TIMINGS_FILE, {"attempts": attempts,
                                          "wall_s": round(sum(a["wall_s"] for a in attempts), 3),
                                          "cpu_s": round(sum(a["cpu_s"] for a in attempts), 3)})


def measured_wall_s(out: Path) -> float | None:
    """Total wall seconds of the run in ``out`` over its attempts, None when it recorded none."""
    attempts = read_timings(out)
    return sum(a["wall_s"] for a in attempts) if attempts else None


def measured_cpu_s(out: Path) -> float | None:
    """Total CPU seconds of the run in ``out`` over its attempts, None when it recorded none."""
    attempts = read_timings(out)
    return sum(a["cpu_s"] for a in attempts) if attempts else None
