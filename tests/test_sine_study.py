"""Study `sine` end to end on a small config: its outputs against independent recomputations."""

import csv
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.regression.sine.tasks import SineTask
from icl_gd.regression.tasks import Stream

pytestmark = pytest.mark.slow  # both tests read one run of the study through the CLI

STEPS = 40
ARGS = ["--steps", str(STEPS), "--set", "batch_size=64", "--set", "eval_every=20", "--set", "n_test=128",
        "--set", "n_tune=128", "--set", "n_function_tasks=2", "--set", "grid_points=20", "--set", "d_features=8",
        "--set", "hidden=16", "--set", "lr=0.01", "--no-progress"]


@pytest.fixture(scope="module")
def sine_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sine") / "run"
    result = CliRunner().invoke(app, ["run", "sine", "--out", str(out), *ARGS])
    assert result.exit_code == 0, result.output
    with open(out / "curves.csv") as handle:
        curves = list(csv.DictReader(handle))
    return out, json.loads((out / "metrics.json").read_text())["mean"], curves


def _loss_curve(curves, model):
    return {int(r["step"]): float(r["value"]) for r in curves if r["model"] == model and r["metric"] == "loss"}


def test_final_metrics_are_the_last_evaluation_and_both_models_train(sine_run):
    _, mean, curves = sine_run
    for model, key in (("mlp+lsa", "loss_trained"), ("meta-learned mlp + 1 GD step", "loss_meta_learned"),
                       ("prop2_own_features", "loss_prop2_own_features")):
        curve = _loss_curve(curves, model)
        assert sorted(curve) == [0, 20, STEPS], model
        assert mean[key] == pytest.approx(curve[STEPS], rel=1e-5), model
    for model in ("mlp+lsa", "meta-learned mlp + 1 GD step"):
        curve = _loss_curve(curves, model)
        assert curve[STEPS] < 0.9 * curve[0], model
    assert mean["loss_rel_gap_trained_vs_meta"] == pytest.approx(
        (mean["loss_trained"] - mean["loss_meta_learned_tuned_eta"]) / mean["loss_meta_learned_tuned_eta"])


def test_zero_loss_and_drawn_truth_come_from_the_test_tasks(sine_run):
    out, mean, _ = sine_run
    test = SineTask().sample(128, 2023, 0, Stream.TEST)
    assert mean["loss_zero"] == pytest.approx(float(0.5 * (test.y_query.double() ** 2).mean()), rel=1e-6)
    drawn = SineTask().sample(2, 2023, 1, Stream.TEST)  # the function tasks: step 1 of the test stream
    with open(out / "functions.csv") as handle:
        rows = list(csv.DictReader(handle))
    truth = [r for r in rows if r["model"] == "truth"]
    assert len(truth) == 2 * 20
    for r in truth:
        task, x = int(r["task"]), float(r["x"])
        want = float(drawn.amplitude[task]) * math.sin(x + float(drawn.phase[task]))
        assert float(r["y"]) == pytest.approx(want, abs=1e-5)
    context = [float(r[c]) for r in rows if r["kind"] == "context" and r["task"] == "0" for c in ("x", "y")]
    want = torch.stack([drawn.x_context[0, :, 0], drawn.y_context[0, :, 0]], dim=-1).flatten().tolist()
    assert context == pytest.approx(want)
    assert {r["model"] for r in rows} == {"truth", "context", "mlp+lsa (trained)", "meta-learned mlp + 1 GD step",
                                          "prop2 on trained kernel"}
    for name in ("loss_curves", "alignment_curves", "functions"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 0
