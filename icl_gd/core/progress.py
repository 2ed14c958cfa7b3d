"""Progress on stderr, never in a result file: the training bar (``progress_bar``), the sweep's bar
(``icl_gd.platform.sweep.progress``, on ``stderr_console``) and the long phases outside the training loop
(tuning GD/GD++, scoring references, OOD sweeps, depth curves), so a deep model never leaves the terminal silent.

``with phase("tuning GD++ step sizes (K=200)"):`` says nothing for a phase shorter than ``QUIET_S``; a longer one
gets a line once it has run that long, a line every ``EVERY_S`` with its counters (``tick("L-BFGS loss
evaluations")`` counts), and a line with its time when it ends. Plain lines on stderr: they work in logs and next
to the training bar. Shown only inside ``phases_shown(True)`` (``execute_run`` with progress on); phases nest.
"""

from __future__ import annotations

import contextvars
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from icl_gd.core.timing import timed

F = TypeVar("F", bound=Callable[..., Any])
QUIET_S = 5.0
EVERY_S = 30.0

# The width of a progress line written to a log or a pipe (not a terminal): wide enough that no line is cut or
# wrapped (rich would otherwise assume 80 columns).
LOG_WIDTH = 1000


def stderr_console() -> Any:
    """The rich console every bar draws on: stderr, so progress never mixes with a command's output. Not on a
    terminal (a log file, a pipe) its lines are written whole, never cut or wrapped at 80 columns."""
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=LOG_WIDTH, soft_wrap=True)
    return console


@contextmanager
def progress_bar(total: int, description: str, enabled: bool) -> Iterator[Callable[[int, float], None]]:
    """A training bar showing step and loss, ``update(step, loss)``; a no-op when disabled. Its block is the
    ``training`` phase of the run's ``timings.json`` either way."""
    with timed("training"):
        if not enabled:
            yield lambda step, loss: None
            return
        yield from _bar(total, description)


def _bar(total: int, description: str) -> Iterator[Callable[[int, float], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:.4f}"), TimeRemainingColumn())
    with Progress(*columns, transient=False, console=stderr_console()) as bar:
        task_id = bar.add_task(description, total=total, loss=float("nan"))
        yield lambda step, loss: bar.update(task_id, completed=step, loss=loss)


# ---------------------------------------------------------------------------------------------------- phases
_shown: contextvars.ContextVar[bool] = contextvars.ContextVar("icl_gd_phases_shown", default=False)
_current: contextvars.ContextVar["_Phase | None"] = contextvars.ContextVar("icl_gd_phase", default=None)


@dataclass
class _Phase:
    name: str
    start: float = field(default_factory=time.perf_counter)
    counts: dict[str, int] = field(default_factory=dict)
    spoke: bool = False

    def line(self, state: str) -> str:
        counted = ", ".join(f"{n} {what}" for what, n in self.counts.items())
        return f"icl-gd: {self.name}: {state} {_clock(time.perf_counter() - self.start)}" + (
            f" ({counted})" if counted else "")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.0f}s"


@contextmanager
def phases_shown(enabled: bool) -> Iterator[None]:
    token = _shown.set(enabled)
    try:
        yield
    finally:
        _shown.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """A named long phase (see the module docstring); timed in the run's ``timings.json`` whether shown or not."""
    with timed(name):
        if not _shown.get():
            yield
            return
        yield from _shown_phase(name)


def _shown_phase(name: str) -> Iterator[None]:
    current = _Phase(name)
    token = _current.set(current)
    stop = threading.Event()

    def heartbeat() -> None:
        wait = QUIET_S
        while not stop.wait(wait):
            current.spoke = True
            print(current.line("running for"), file=sys.stderr, flush=True)
            wait = EVERY_S

    thread = threading.Thread(target=heartbeat, name="icl-gd-phase", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _current.reset(token)
        if current.spoke:
            print(current.line("done in"), file=sys.stderr, flush=True)


def tick(what: str, n: int = 1) -> None:
    """Count ``n`` more ``what`` in the innermost phase (nothing when none is shown)."""
    current = _current.get()
    if current is not None:
        current.counts[what] = current.counts.get(what, 0) + n


def phased(name: str) -> Callable[[F], F]:
    """Decorator: every call of the function is a ``phase(name)``."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with phase(name):
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate
