"""Freed memory kept for reuse (``icl_gd.core.allocator``): measured by the page faults of a fresh process that
allocates, fills and frees a 64 MB tensor again and again, as a training step does with its largest tensors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow,  # each test measures a python or the CLI in subprocesses
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux only")]

# Prints {"kept": <what keep_freed_memory returned>, "faults": minor page faults of 10 rounds after 10 of warm-up}.
_ROUNDS = """
import json, resource, sys, torch
SETUP
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):  # warm-up: the first rounds fault their pages in whatever malloc does (and glibc's aligned
    torch.empty(16 * 2 ** 20).fill_(1.0)  # allocation fits a freed block only once a few have merged)
before = faults()
for _ in range(10):
    torch.empty(16 * 2 ** 20).fill_(1.0)  # 64 MB, touched, freed
print(json.dumps({"kept": KEPT, "faults": faults() - before}))
"""


def _rounds(setup: str, kept: str, env: dict[str, str] | None = None) -> dict:
    code = _ROUNDS.replace("SETUP", setup).replace("KEPT", kept)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **(env or {})},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_kept_memory_is_reused_instead_of_faulted_in_again():
    plain = _rounds("", "None")
    # the fewest faults of three fresh processes: now and then one process faults a few of its rounds in again (seen on
    # a loaded 2-core machine: 3 of 10), while a process that keeps nothing faults every round in every process
    kept = min((_rounds("from icl_gd.core.allocator import keep_freed_memory\nkept = keep_freed_memory()", "kept")
                for _ in range(3)), key=lambda r: r["faults"])
    assert plain["faults"] > 10 * 16_000 * 0.9  # glibc's default: each round maps 64 MB afresh (16 384 pages)
    assert kept["kept"] is True and kept["faults"] < plain["faults"] / 20


def test_a_user_s_own_malloc_settings_stand():
    mine = _rounds("from icl_gd.core.allocator import keep_freed_memory\nkept = keep_freed_memory()", "kept",
                   env={"MALLOC_TOP_PAD_": "131072"})  # glibc's default value: only the user's say-so differs
    assert mine["kept"] is False and mine["faults"] > 10 * 16_000 * 0.9


def test_every_cli_command_keeps_freed_memory():
    """The CLI's callback runs before any command: after ``icl-gd config single-layer`` the process reuses."""
    setup = ("from typer.testing import CliRunner\nfrom icl_gd.cli import app\n"
             "result = CliRunner().invoke(app, ['config', 'single-layer'])\nassert result.exit_code == 0, result.output")
    assert _rounds(setup, "None")["faults"] < 10 * 16_000 / 20
