"""Any causal next-token model on linear dynamical systems against the sequence referees, per position
(icl_gd.regression.sequence.comparison, icl-gd compare --task sequence)."""

from __future__ import annotations

import json

import pytest
import torch

from icl_gd.constructions.sequence import gd_step_predictions
from icl_gd.core.errors import ConfigError
from icl_gd.regression.sequence.comparison import REFEREES, compare_sequence
from icl_gd.regression.sequence.referees import tune_gd
from icl_gd.regression.sequence.tasks import LinearDynamicsTask
from icl_gd.regression.tasks import Stream

torch.set_num_threads(1)
F64 = torch.float64
TASK = LinearDynamicsTask(d_s=3, length=10)
SETS = dict(n_test=256, n_tune=256, seed=2023)


class ConstructedGD(torch.nn.Module):
    """The causal linear-attention layer of one GD step from W0 at rate η (constructions/sequence.py)."""

    def __init__(self, eta: float, W0: torch.Tensor, lag: int = 0) -> None:
        super().__init__()
        self.eta, self.W0, self.lag = eta, W0, lag

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        out = gd_step_predictions(inputs, self.eta, self.W0)
        if self.lag:  # still causal, one position late: row t holds the prediction made at t - 1
            out = torch.cat([out[:, :1], out[:, :-1]], dim=1)
        return out


@pytest.fixture(scope="module")
def referee():
    # the same η and W0 the comparison fits (same task, seed and tuning sequences)
    return tune_gd(TASK, SETS["seed"], SETS["n_tune"], steps=1, learn_W0=True)


def test_the_constructed_layer_scores_exactly_the_gd_referee_at_every_position(referee):
    frame = compare_sequence(ConstructedGD(referee.eta, referee.W0), TASK, **SETS)
    assert set(frame["reference"]) == set(REFEREES)
    gd = frame[frame["reference"] == "gd"].sort_values("position")
    assert gd["position"].tolist() == list(range(1, TASK.length + 1))
    assert (gd["pred_diff"] < 1e-12).all()
    assert gd["loss"].to_numpy() == pytest.approx(gd["loss_reference"].to_numpy(), rel=1e-12)
    # Position t is scored on s_{t+1}, computed here from the states, not through the comparison's own alignment:
    # position 1 predicts W0 s_1 (no pair yet) and is scored on s_2; the zero predictor's loss is ½ ‖s_{t+1}‖².
    states = TASK.sample(SETS["n_test"], SETS["seed"], 0, Stream.TEST, dtype=F64).states  # (B, T+1, d)
    predicted = gd_step_predictions(states[:, :-1], referee.eta, referee.W0)
    expected = 0.5 * ((predicted - states[:, 1:]) ** 2).sum(-1).mean(0)
    assert gd["loss"].to_numpy() == pytest.approx(expected.numpy(), rel=1e-12)
    first = 0.5 * ((states[:, 0] @ referee.W0.T - states[:, 1]) ** 2).sum(-1).mean()
    assert gd["loss"].iloc[0] == pytest.approx(float(first), rel=1e-12)
    zero = frame[frame["reference"] == "zero"].sort_values("position")["loss_reference"].to_numpy()
    assert zero == pytest.approx((0.5 * (states[:, 1:] ** 2).sum(-1).mean(0)).numpy(), rel=1e-12)
    # least squares fits the dynamics: far below one GD step once a few pairs are in
    ls = frame[frame["reference"] == "least_squares"].sort_values("position")["loss_reference"].to_numpy()
    assert ls[-1] < 0.1 * gd["loss_reference"].iloc[-1]
    assert frame.attrs["parameters"]["gd"]["eta"] == pytest.approx(referee.eta)


def test_a_model_one_position_late_is_told_apart(referee):
    frame = compare_sequence(ConstructedGD(referee.eta, referee.W0, lag=1), TASK, **SETS)
    gd = frame[frame["reference"] == "gd"].sort_values("position")
    assert gd["pred_diff"].iloc[0] < 1e-12 and (gd["pred_diff"].iloc[1:] > 1e-3).all()
    assert (gd["loss"].iloc[1:].to_numpy() > gd["loss_reference"].iloc[1:].to_numpy()).all()


def test_a_model_that_reads_the_next_token_or_returns_the_wrong_shape_is_refused():
    with pytest.raises(ConfigError, match="not causal"):
        compare_sequence(lambda x: torch.roll(x, -1, dims=1), TASK, **SETS)
    with pytest.raises(ConfigError, match=r"returned shape \(256, 10\), expected \(256, 10, 3\)"):
        compare_sequence(lambda x: x.sum(-1), TASK, **SETS)
    with pytest.raises(ConfigError, match="NaN or inf"):
        compare_sequence(lambda x: x / 0, TASK, **SETS)


def _app():
    from icl_gd.cli import app

    return app


def _one_error_line(text: str) -> bool:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("icl-gd: error: ") and "Traceback" not in text


def test_the_command_writes_the_per_position_table_and_refuses_bad_settings(tmp_path):
    from typer.testing import CliRunner

    model_file = tmp_path / "gd_layer.py"
    model_file.write_text("import torch\n"
                          "from icl_gd.constructions.sequence import gd_step_predictions\n"
                          "class Layer(torch.nn.Module):\n"
                          "    def forward(self, x):\n        return gd_step_predictions(x, 0.1)\n"
                          "def build(d, n):\n    assert (d, n) == (3, 6)\n    return Layer()\n")
    out = tmp_path / "seq"
    base = ["compare", "--model", f"{model_file}:build", "--task", "sequence"]
    result = CliRunner().invoke(_app(), base + ["--d", "3", "--length", "6", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "closest:" in result.output and "gd=" in result.output
    lines = (out / "positions.csv").read_text().splitlines()
    assert lines[0] == "reference,position,loss,loss_reference,pred_diff" and len(lines) == 1 + 6 * len(REFEREES)
    config = json.loads((out / "config.json").read_text())["config"]
    assert (config["task"], config["d"], config["length"]) == ("sequence", 3, 6)
    assert json.loads((out / "metrics.json").read_text())["mean"]["closest_reference"] in REFEREES
    for extra, named in ((["--length", "1"], "--length must be an integer of at least 2"),
                         (["--d", "0"], "--d must be an integer of at least 1"),
                         (["--layout", "concat"], "--layout does not apply to --task sequence")):
        bad = CliRunner().invoke(_app(), base + extra + ["--out", str(tmp_path / "bad")])
        assert bad.exit_code == 2 and _one_error_line(bad.output) and named in bad.output, bad.output
        assert not (tmp_path / "bad").exists()
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def build():\n    return lambda x: x[:, :, :1]\n")
    bad = CliRunner().invoke(_app(), ["compare", "--model", f"{wrong}:build", "--task", "sequence", "--d", "3",
                                      "--length", "4", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2 and _one_error_line(bad.output) and "expected (2000, 4, 3)" in bad.output, bad.output
    assert not (tmp_path / "bad").exists()
    unknown = CliRunner().invoke(_app(), ["compare", "--model", f"{wrong}:build", "--task", "sequences", "--out",
                                          str(tmp_path / "bad")])
    assert unknown.exit_code == 2 and "sequence" in unknown.output and _one_error_line(unknown.output)
