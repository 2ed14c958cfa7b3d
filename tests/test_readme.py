"""The README's command blocks run as written, their training shrunk to a test's budget (the Python quickstart runs
in test_api.py, the set-up block is what `.ci/run` runs: test_api.py compares them)."""

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# Appended to every `run` and `sweep`: a later --steps / --set wins, so these shrink the README's own values.
SHRINK = ["--steps", "20", "--set", "n_test=200", "--set", "n_tune=500", "--set", "n_ood=50", "--set", "batch_size=64",
          "--set", "eval_every=10", "--set", "interpolation_points=3", "--set", "max_applications=3", "--no-progress",
          "--no-figures"]
# Commands with a test of their own, at a cost this file need not pay again.
ELSEWHERE = {
    "verify": "test_cli.py::test_verify_passes_and_prints_errors",
    "reproduce --out runs/reproduce --quick": "about ten minutes of full-budget runs: its selection, plan and "
                                              "comparison with the kept table in test_quick_check.py; the same "
                                              "pipeline at --smoke in test_reproduce.py and .ci/run",
    "reproduce --out runs/full": "hours of training: the same command at every claim's full budget; its plan and "
                                 "estimate in test_floor.py and test_reproduce.py",
}


def _commands() -> list[list[str]]:
    """Every `.venv/bin/icl-gd` command of the README's bash blocks, comments dropped, as argument lists."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == [".venv/bin/icl-gd"]:
                found.append(words[1:])
    return found


def test_the_readme_shows_the_commands_this_file_runs():
    commands = [" ".join(c) for c in _commands()]
    assert len(commands) >= 8 and all(key in commands for key in ELSEWHERE)


@pytest.mark.parametrize("args", [c for c in _commands() if " ".join(c) not in ELSEWHERE], ids=" ".join)
@pytest.mark.slow
def test_readme_command_runs(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the README's relative --out directories land here
    if args[0] == "sweep":
        args = [*args, "--seeds", "1", "--workers", "1"]  # one run per grid point, one at a time
    if args[0] in ("run", "sweep"):
        args = [*args, *SHRINK]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    if args[0] == "run":
        out = Path(args[args.index("--out") + 1])
        assert (out / "metrics.json").is_file()
