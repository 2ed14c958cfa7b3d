"""Study `sine` end to end on a tiny config, and its Prop. 2 pieces on a trained model's features."""

import json

import pytest
import torch
from typer.testing import CliRunner

from cli import app
from constructions.prop2 import feature_gd_model
from icl_gd.feature_models import FeatureMapConfig, feature_lsa_model
from studies.sine import psd_part, trained_readout_kernel

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


def test_trained_readout_kernel_of_the_construction_is_eta_over_n_identity():
    """For the Prop. 1 weights on features, ŷ = (η/N) Σ y_i m_iᵀ m_q, so S = (η/N) I."""
    m = feature_lsa_model(FeatureMapConfig(d_features=6, hidden=8)).double()
    constructed = feature_gd_model(m.feature_map, 1, 6, 1, 10, 0.7)
    torch.testing.assert_close(trained_readout_kernel(constructed), 0.07 * torch.eye(6, dtype=torch.float64))
    S = torch.diag(torch.tensor([2.0, 1.0, -1.0], dtype=torch.float64))
    part, lost = psd_part(S)
    torch.testing.assert_close(part, torch.diag(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64)))
    assert lost == pytest.approx(0.25)
