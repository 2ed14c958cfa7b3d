"""Study `sine` end to end on a tiny config."""

import json

import pytest
from typer.testing import CliRunner

from cli import app

TINY = ["--steps", "4", "--set", "batch_size=32", "--set", "eval_every=2", "--set", "n_test=64",
        "--set", "n_tune=64", "--set", "n_function_tasks=2", "--set", "grid_points=20", "--set", "d_features=8",
        "--set", "hidden=16", "--no-progress"]


@pytest.fixture(scope="module")
def sine_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sine") / "run"
    result = CliRunner().invoke(app, ["run", "sine", "--out", str(out), *TINY])
    assert result.exit_code == 0, result.output
    return out


def test_sine_run_writes_metrics_curves_and_figures(sine_run):
    mean = json.loads((sine_run / "metrics.json").read_text())["mean"]
    for key in ("loss_trained", "loss_meta_learned_tuned_eta", "loss_prop2_own_features", "loss_zero",
                "loss_prop2_trained_kernel", "loss_rel_gap_trained_vs_meta", "cos_sensitivity", "pred_diff"):
        assert isinstance(mean[key], float), key
    for name in ("loss_curves", "alignment_curves", "functions"):
        assert (sine_run / "figures" / f"{name}.png").stat().st_size > 0
    text = (sine_run / "functions.csv").read_text()
    assert "truth" in text and "context" in text and "mlp+lsa (trained)" in text
    assert "prop2_own_features" in (sine_run / "curves.csv").read_text()
