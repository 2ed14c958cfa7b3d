"""The sweep's display on stderr: one bar (runs done, failed, running, ETA) and one log line per finished run
(``icl_gd.core.progress`` holds the training bar and the phase lines)."""

from __future__ import annotations

import sys
from typing import Any

from icl_gd.core.progress import stderr_console

HEADLINE_METRICS = ("loss_trained", "loss_gd", "loss_gdpp", "cos_sensitivity", "pred_diff", "eta_trained", "lr_gd",
                    "test_accuracy", "verify_max_rel_error")


class SweepProgress:
    """``start(run_id)`` when a run begins, ``finish(record)`` when it ends; a no-op when disabled."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.done = self.failed = self.finished = 0
        self.running: set[str] = set()
        self._bar: Any = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("done {task.fields[done]}, failed {task.fields[failed]}, "
                                            "running {task.fields[running]}"),
                                 TextColumn("ETA"), TimeRemainingColumn(), console=stderr_console())
            self._task = self._bar.add_task("sweep", total=total, done=0, failed=0, running=0)
            self._bar.start()

    def start(self, run_id: str) -> None:
        self.running.add(run_id)
        self._refresh()

    def finish(self, record: Any) -> None:
        self.running.discard(record.spec.run_id())
        self.finished += 1
        self.failed += record.status == "failed"
        self.done += record.status != "failed"
        self._refresh()
        self.log(_line(record, self.finished, self.total))

    def log(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.finished, done=self.done, failed=self.failed,
                             running=len(self.running))


def _line(record: Any, index: int, total: int) -> str:
    head = f"[{index}/{total}] {record.status:7s} {record.spec.run_id()}"
    if record.status == "failed":
        return f"{head}: {record.error}"
    shown = [k for k in HEADLINE_METRICS if isinstance(record.metrics.get(k), (int, float))][:3]
    values = ", ".join(f"{k}={record.metrics[k]:.4g}" for k in shown)
    return f"{head} ({record.wall_s:.1f} s{', ' + values if values else ''})"
