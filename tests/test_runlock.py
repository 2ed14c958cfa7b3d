"""Run-directory locks: a live owner (another process) keeps a second run out with a one-line error; a killed
owner's lock is taken over with a notice; a released lock leaves nothing behind."""

import os
import socket
import subprocess
import sys
import warnings

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.core.errors import ICLGDNotice, RunDirectoryError
from icl_gd.core.runlock import LOCK_NAME, RunLock

HOLDER = """
import sys, time
from icl_gd.core.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(120)
"""


def _hold_in_subprocess(directory):
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_live_owner_keeps_a_second_run_out_and_a_killed_ones_lock_is_taken_over(tmp_path):
    holder = _hold_in_subprocess(tmp_path)
    try:
        with pytest.raises(RunDirectoryError, match=f"in use by another run \\(pid {holder.pid} on host "
                                                    f"{socket.gethostname()}"):
            RunLock(tmp_path).acquire()
        # the same through the CLI: one line, exit 2, nothing run
        result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(tmp_path), "--steps", "5",
                                          "--no-progress"])
        assert result.exit_code == 2 and "in use by another run" in result.output
        assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "config.json").exists()
    finally:
        holder.kill()  # SIGKILL: no chance to release; the lock file stays behind
        holder.wait()
    assert (tmp_path / LOCK_NAME).exists()
    with pytest.warns(ICLGDNotice, match=f"locked by pid {holder.pid} .*no longer running"):
        lock = RunLock(tmp_path).acquire()
    assert f"pid={os.getpid()} " in (tmp_path / LOCK_NAME).read_text()
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_released_lock_is_taken_again_without_a_notice(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunDirectoryError, match=f"pid {os.getpid()}"):  # a second holder in this process too
            RunLock(tmp_path).acquire()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ICLGDNotice)
        with RunLock(tmp_path):
            pass


def test_a_finished_run_is_still_refused_before_the_lock(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(tmp_path), "--no-progress"])
    assert result.exit_code == 2 and "already holds a finished run" in result.output
    assert not (tmp_path / LOCK_NAME).exists()
