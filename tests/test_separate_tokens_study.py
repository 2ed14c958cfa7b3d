"""Study `separate-tokens` end to end on a tiny config."""

import json

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app

TINY = ["--steps", "4", "--set", "batch_size=32", "--set", "eval_every=2", "--set", "n_test=64",
        "--set", "n_tune=64", "--set", "n_copy=4", "--set", "d=3", "--set", "n_context=4", "--set", "heads=1,2",
        "--no-progress"]


@pytest.fixture(scope="module")
def separate_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("separate") / "run"
    result = CliRunner().invoke(app, ["run", "separate-tokens", "--out", str(out), *TINY])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_separate_run_writes_required_metrics(separate_run):
    mean = json.loads((separate_run / "metrics.json").read_text())["mean"]
    for key in ("loss_trained", "loss_gd", "loss_gd_2steps", "copy_own", "copy_next", "copy_other",
                "pred_diff", "cos_sensitivity", "sensitivity_diff", "loss_trained_h2", "copy_next_h2"):
        assert isinstance(mean[key], float), key
    # The construction is one GD step (β Δ = 20·4.5 puts the copy at round-off).
    assert mean["loss_prop3_construction"] == pytest.approx(mean["loss_gd"], rel=1e-5)
    assert mean["loss_gd_2steps"] < mean["loss_gd"] < mean["loss_zero"]


@pytest.mark.slow
def test_separate_run_writes_copy_table_and_figures(separate_run):
    lines = (separate_run / "copy_analysis.csv").read_text().splitlines()
    assert lines[0].startswith("seed,heads,token,kind,own,next,other")
    assert len(lines) == 1 + 2 * 9  # two head counts × 2N+1 tokens
    for name in ("loss_curves", "heads", "attention_h1", "attention_h2", "copy_gradients_h1"):
        assert (separate_run / "figures" / f"{name}.png").stat().st_size > 0


def test_bad_heads_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["run", "separate-tokens", "--out", str(tmp_path / "x"), "--set", "heads=0"])
    assert result.exit_code == 2 and "heads" in result.output
