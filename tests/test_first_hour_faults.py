"""Faults a user meets in a first hour, each held to the house rule: a user mistake is one line naming the bad value
and exit 2, checked before any training; a failure inside icl-gd (a diverged training) exits 1 naming what to
change; nothing ends in a traceback or in silence."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app


def _invoke(args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _one_error_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("icl-gd: error: ") and "Traceback" not in text


# ------------------------------------------------------------------ online-layers' model settings
@pytest.mark.parametrize("key, value", [("decay", "2"), ("decay", "-0.5"), ("decay", "1"), ("beta", "-1"),
                                        ("beta", "0"), ("lam", "-1"), ("init_scale", "0"), ("init_scale", "1e9")])
def test_online_layers_model_settings_are_refused_in_the_config(key, value):
    code, output = _invoke(["config", "online-layers", "--set", f"model.{key}={value}"])
    assert code == 2, output
    assert _one_error_line(output) and key in output, output


def test_online_layers_bad_decay_is_refused_before_any_training(tmp_path):
    out = tmp_path / "run"
    code, output = _invoke(["run", "online-layers", "--out", out, "--steps", "20", "--set", "model.decay=2",
                            "--no-progress", "--no-figures"])
    assert code == 2, output
    assert _one_error_line(output) and "decay" in output, output
    assert not out.exists() or not any(out.iterdir())


# ------------------------------------------------------------------ reproduce --out FILE
@pytest.mark.parametrize("extra", [[], ["--plan"], ["--judge-finished"]])
def test_reproduce_refuses_an_out_that_is_a_file_as_run_does(tmp_path, extra):
    out = tmp_path / "a-file"
    out.write_text("mine\n")
    code, output = _invoke(["reproduce", "--out", out, "--only", "vo-single-loss", "--no-progress", *extra])
    assert code == 2, output
    assert _one_error_line(output) and f"--out {out} exists and is not a directory" in output, output
    assert out.read_text() == "mine\n"


def test_reproduce_refuses_an_out_below_a_file(tmp_path):
    (tmp_path / "a-file").write_text("mine\n")
    out = tmp_path / "a-file" / "below"
    code, output = _invoke(["reproduce", "--out", out, "--only", "vo-single-loss", "--no-progress"])
    assert code == 2, output
    assert _one_error_line(output) and str(out) in output, output


def test_rejudge_refuses_an_out_that_is_a_file(tmp_path):
    out = tmp_path / "a-file"
    out.write_text("mine\n")
    root = Path(__file__).resolve().parents[1]
    code, output = _invoke(["reproduce", "--rejudge", root / "docs" / "claims-table.json", "--out", out])
    assert code == 2, output
    assert _one_error_line(output) and "exists and is not a directory" in output, output
    assert out.read_text() == "mine\n"
