"""Study `softmax-heads` end to end on a tiny config, and the softmax layer it trains."""

import json

import torch
from typer.testing import CliRunner

from cli import app
from icl_gd.lsa import LSAConfig, LSAModel


def test_softmax_heads_run(tmp_path):
    out = tmp_path / "run"
    args = ["run", "softmax-heads", "--out", str(out), "--steps", "4", "--set", "batch_size=32", "--set",
            "eval_every=2", "--set", "n_test=64", "--set", "n_tune=64", "--set", "d=3", "--set", "heads=1,2",
            "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    for key in ("loss_gd", "loss_zero", "loss_trained_h1", "loss_trained_h2", "cos_sensitivity_h2"):
        assert isinstance(mean[key], float), key
    assert (out / "figures" / "heads.png").stat().st_size > 0


def test_softmax_model_fast_query_path_matches_full_forward():
    model = LSAModel(LSAConfig(d_model=5, n_heads=4, softmax=True, init_scale=1.0), seed=2).double()
    tokens = torch.randn(3, 7, 5, dtype=torch.float64)
    fast = model(tokens)
    full, _ = model(tokens, return_tokens=True)
    torch.testing.assert_close(fast, full, rtol=1e-12, atol=1e-12)
