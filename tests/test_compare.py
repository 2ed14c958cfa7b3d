"""Any in-context learner against the references (icl_gd.regression.compare.comparison, icl-gd compare, the GPT model and the
foreign-transformer study)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from icl_gd.constructions.prop1 import gd_model
from icl_gd.core.errors import ConfigError
from icl_gd.regression.compare.comparison import CompareConfig, ForeignPredictor, compare, resolve_call
from icl_gd.regression.compare.gpt import EveryPrefix, EveryPrefixTokenTask, GPTConfig, GPTRegressor
from icl_gd.regression.separate.tokens import InterleavedLayout
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatLayout
from icl_gd.regression.tuning import tune_gd

torch.set_num_threads(1)
D, N = 4, 8
TASK = LinearRegressionTask(d=D, n_context=N)
SMALL = CompareConfig(steps=2, newton_steps=2, n_contexts=40, n_queries=6, gd_steps=(1, 2, 4), tuned_steps=3)
SETS = dict(n_test=256, n_tune=256, seed=2023)


def tuned_eta() -> float:
    tune = TASK.sample(SETS["n_tune"], SETS["seed"], 0, Stream.TUNE, dtype=torch.float64)
    return tune_gd(tune.x_context, tune.y_context, tune.x_query, tune.y_query, 1).etas[0]


@pytest.fixture(scope="module")
def prop1_frame():
    model = gd_model(D, 1, N, [tuned_eta()])  # Prop. 1 weights at tuned GD's own η, float64

    def layers(tokens):
        _, states = model(tokens, return_tokens=True)
        return [-s[:, -1, D:] for s in states[1:]]

    return compare(model, TASK, "concat", SMALL, layers=layers, **SETS)


def test_prop1_through_the_call_is_one_tuned_gd_step(prop1_frame):
    # The acceptance identity: the constructed layer, laid out as concatenated tokens by the call, is tuned GD's
    # one step (catches a sign flip, a wrong split of the tokens, a float32 detour, a wrong η in the tuner).
    row = prop1_frame[prop1_frame["layer"].isna() & (prop1_frame["reference"] == "gd")
                      & (prop1_frame["steps"] == 1)].iloc[0]
    assert row["pred_diff"] < 1e-14
    assert row["cos_sensitivity"] == pytest.approx(1.0, abs=1e-12)
    assert row["loss"] == pytest.approx(row["loss_reference"], rel=1e-12)
    two = prop1_frame[(prop1_frame["reference"] == "gd") & (prop1_frame["steps"] == 2)].iloc[0]
    assert two["pred_diff"] > 1e-3  # it is one step, not two: the comparison can tell them apart


def test_the_frame_is_tidy_and_holds_every_reference(prop1_frame):
    output = prop1_frame[prop1_frame["layer"].isna()]
    assert set(output["reference"]) == {"gd", "gdpp", "pgd", "newton", "least_squares", "ridge"}
    assert sorted(output[output["reference"] == "gd"]["steps"].tolist()) == [1, 2]
    assert json.loads(output[output["reference"] == "gd"].iloc[0]["parameters"])["eta"] == pytest.approx(tuned_eta())
    layers = prop1_frame[prop1_frame["layer"].notna()]
    assert set(layers["reference"]) == {"newton", "gd_fixed_step", "gdpp", "pgd"} and set(layers["layer"]) == {1}
    assert prop1_frame.attrs["parameters"]["ridge"]["lambda"] > 0


def test_a_wrong_layout_breaks_the_identity_or_is_refused():
    # Declared wrong, the identity must not survive (catches a layout silently ignored): fed Garg et al.'s
    # interleaved tokens, Prop. 1's layer (which pads narrower tokens) computes something else than GD; called
    # with three arguments it fails, and that is a one-line ConfigError naming the call it was given.
    model = gd_model(D, 1, N, [tuned_eta()])
    frame = compare(model, TASK, "interleaved", CompareConfig(steps=1, newton_steps=1), **SETS)
    row = frame[(frame["reference"] == "gd") & (frame["steps"] == 1)].iloc[0]
    assert row["pred_diff"] > 1e-2 and row["cos_sensitivity"] < 0.99
    with pytest.raises(ConfigError, match=re.escape("failed on f(x_ctx (2, 8, 4), y_ctx (2, 8), x_q (2, 4))")) as info:
        compare(model, TASK, "arguments", SMALL, **SETS)
    assert "\n" not in str(info.value)


def test_a_layout_object_must_fit_the_task():
    with pytest.raises(ConfigError, match="does not fit the task"):
        resolve_call(ConcatLayout(5, 1), TASK)
    with pytest.raises(ConfigError, match="does not fit the task"):
        resolve_call(InterleavedLayout(D, 1, N + 1), TASK)
    with pytest.raises(ConfigError, match="not one of arguments, concat, interleaved"):
        resolve_call("garg", TASK)
    assert resolve_call(ConcatLayout(D, 1), TASK).layout == ConcatLayout(D, 1)


def test_an_output_of_the_wrong_shape_is_a_one_line_error_naming_the_shapes():
    tokens = ConcatLayout(D, 1).tokens(TASK.sample(3, 0, dtype=torch.float64))
    wrong = ForeignPredictor(lambda x, y, q: x[:, :, 0], resolve_call("arguments", TASK))  # (B, N), not (B,)
    with pytest.raises(ConfigError, match=re.escape("returned shape (3, 8), expected (3,) or (3, 1)")):
        wrong.check(tokens)
    with pytest.raises(ConfigError, match="returned a tuple"):
        ForeignPredictor(lambda x, y, q: (q,), resolve_call("arguments", TASK)).check(tokens)


def test_the_arguments_call_gives_y_without_its_last_axis_and_takes_a_flat_prediction():
    # Least squares written as a foreign callable f(x_ctx, y_ctx (B, N), x_q) -> (B,) is the least-squares reference.
    def least_squares(x, y, q):
        return (q[:, None, :] @ torch.linalg.pinv(x) @ y[..., None])[:, 0, 0]

    frame = compare(least_squares, TASK, "arguments", CompareConfig(steps=1, newton_steps=1), **SETS)
    row = frame[frame["reference"] == "least_squares"].iloc[0]
    assert row["pred_diff"] < 1e-12 and row["cos_sensitivity"] == pytest.approx(1.0, abs=1e-9)
    assert frame.attrs["layer_metrics"] == {}


def test_interleaved_layout_round_trips_and_every_prefix_targets_align():
    task = LinearRegressionTask(d=3, n_context=5, d_y=2)
    batch = task.sample(4, 1, dtype=torch.float64)
    layout = InterleavedLayout(3, 2, 5)
    tokens = layout.tokens(batch)
    assert tokens.shape == (4, 11, 3)
    x, y, q = layout.split(tokens)
    assert torch.equal(x, batch.x_context) and torch.equal(y, batch.y_context) and torch.equal(q, batch.x_query)
    assert (tokens[:, 1::2, 2] == 0).all()  # a label token is (y, 0, ...)
    # The training view reads the prediction at every x token; its targets are those tokens' labels, in order.
    _, targets = EveryPrefixTokenTask(task).train_batch(4, 1, 0, torch.device("cpu"), torch.float64)
    assert torch.allclose(targets * 6 ** 0.5, batch.y.flatten(1))


def test_gpt_is_causal_and_its_last_layer_read_out_is_the_model():
    config = GPTConfig(d_in=3, d_y=1, n_tokens=11, width=16, layers=2, heads=2)
    model = GPTRegressor(config, seed=0).double()
    layout = InterleavedLayout(3, 1, 5)
    tokens = layout.tokens(LinearRegressionTask(d=3, n_context=5).sample(8, 0, dtype=torch.float64))
    changed = tokens.clone()
    changed[:, -1] += 1.0  # the query changes: no earlier prediction may move (catches a missing causal mask)
    every, every_changed = EveryPrefix(model)(tokens), EveryPrefix(model)(changed)
    assert torch.equal(every[:, :-1], every_changed[:, :-1]) and not torch.equal(every[:, -1], every_changed[:, -1])
    assert torch.allclose(every[:, -1] * 6 ** 0.5, model(tokens)[:, 0])
    with pytest.raises(ConfigError, match="fit_probes first"):
        model.layer_predictions(tokens)
    model.fit_probes(tokens, torch.randn(8, 1, dtype=torch.float64))
    per_layer = model.layer_predictions(tokens)
    assert per_layer.shape == (2, 8, 1) and torch.equal(per_layer[-1], model(tokens))
    assert torch.equal(GPTRegressor(config, seed=0).read_in.weight, GPTRegressor(config, seed=0).read_in.weight)


def test_compare_command_writes_config_table_figure_and_metrics(tmp_path):
    from typer.testing import CliRunner
    import typer

    from icl_gd.regression.compare.cli import compare as compare_command

    app = typer.Typer()
    app.command()(compare_command)
    app.command("other")(lambda: None)  # two commands: `compare` is a sub-command, as in icl-gd
    model_file = tmp_path / "prop1_model.py"
    model_file.write_text("from icl_gd.constructions.prop1 import gd_model\n"
                          "layout = 'concat'\n"
                          "def build(d, n):\n    model = gd_model(d, 1, n, [1.0])\n    model.layout = layout\n"
                          "    return model\n")
    out = tmp_path / "cmp"
    args = ["compare", "--model", f"{model_file}:build", "--d", "3", "--n", "6", "--out", str(out), "--steps", "1",
            "--no-figures"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["layout"] == "concat" and config["config"]["seed"] == 2023
    header = (out / "comparison.csv").read_text().splitlines()[0]
    assert header.startswith("layer,reference,steps,loss,loss_reference,pred_diff,cos_sensitivity")
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    assert mean["closest_reference"] in ("gd", "gdpp", "pgd", "newton", "least_squares", "ridge") and mean["loss"] > 0
    bad = CliRunner().invoke(app, ["compare", "--model", f"{model_file}:build", "--d", "3", "--n", "6", "--out",
                                   str(tmp_path / "bad"), "--layout", "arguments"])
    assert bad.exit_code == 2 and "failed on f(x_ctx (2, 6, 3), y_ctx (2, 6), x_q (2, 3))" in bad.output
    assert len([line for line in bad.output.splitlines() if line.strip()]) == 1
    missing = CliRunner().invoke(app, ["compare", "--model", "nowhere.py:build", "--out", str(tmp_path / "m")])
    assert missing.exit_code == 2 and "no file nowhere.py" in missing.output


def test_the_docs_example_runs(tmp_path, monkeypatch):
    text = (Path(__file__).parents[1] / "docs" / "compare.md").read_text()
    code = re.search(r"<!-- compare-example -->\n```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/compare.md", "exec"), namespace)
    frame = namespace["frame"]
    one_step = frame[(frame["reference"] == "gd") & (frame["steps"] == 1) & frame["layer"].isna()].iloc[0]
    assert one_step["pred_diff"] < 1e-14


def test_tiny_study_run(tmp_path):
    from icl_gd.studies import run as run_study

    out = tmp_path / "run"
    run_study("foreign-transformer", out, steps=6, seeds=1, threads=1, figures=False, overrides=[
        "evaluation.n_test=64", "evaluation.n_tune=96", "eval_every=3", "batch_size=16", "compare.steps=2",
        "newton_steps=2", "n_contexts=20", "n_queries=4", "gd_steps=1,2", "tuned_steps=2", "width=8", "layers=2"])
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    assert len(mean["matched_steps_newton"]) == 2 and mean["loss_gd_1"] > mean["loss_least_squares"]
    assert json.loads((out / "config.json").read_text())["config"]["evaluation"]["seed"] == 0
    assert (out / "comparison.csv").read_text().splitlines()[0].startswith("seed,layer,reference,steps")


def test_the_proposed_claims_read_metrics_the_study_writes():
    # Each claim's statistic names a metric the study records (catches a renamed metric, found otherwise only by a
    # full claims run).
    import dataclasses

    from icl_gd.claims.registry.beyond_foreign import BEYOND_FOREIGN_CLAIMS
    from icl_gd.studies.foreign_transformer import STUDY

    written = {"pred_diff_ratio_least_squares_over_gd_1", "loss_ratio_trained_over_gd_1"}
    for claim in BEYOND_FOREIGN_CLAIMS:
        assert claim.runs[0].study == STUDY.name
        assert dataclasses.asdict(claim.statistic)["key"] in written


# ------------------------------------------------------------------ what `icl-gd compare` refuses, in one line
BAD_MODELS = {
    # name: (the model file's text, what the one error line must say)
    "raises": ("def build():\n    raise RuntimeError('factory exploded on purpose')\n",
               "build() in {file} raised RuntimeError: factory exploded on purpose"),
    "exits": ("import sys\nsys.exit(3)\ndef build():\n    return None\n", "importing {file} exited (sys.exit(3))"),
    "constant": ("import torch\ndef build():\n    return lambda x, y, q: torch.ones(q.shape[0])\n",
                 "constant output"),
    "constant_in_graph": ("import torch\ndef build():\n    return lambda x, y, q: 0 * q.sum(-1) + 1\n",
                          "constant output"),
    "nan": ("import torch\ndef build():\n    return lambda x, y, q: q.sum(-1) * float('nan')\n", "NaN or inf"),
    "inf": ("import torch\ndef build():\n    return lambda x, y, q: q.sum(-1) + float('inf')\n", "NaN or inf"),
    "nan_later": ("import torch\ndef build():\n"
                  "    return lambda x, y, q: q.sum(-1) * torch.where(x[:, 0, 0] > 0.45, float('nan'), 1.0)\n",
                  "NaN or inf"),
    "integers": ("import torch\ndef build():\n    return lambda x, y, q: (q.sum(-1) > 0).long()\n",
                 "dtype torch.int64"),
    "no_gradient": ("import torch\ndef build():\n"
                    "    return lambda x, y, q: torch.tensor(q.sum(-1).detach().numpy())\n",
                    "does not depend on the query x_q through autograd"),
}


def _compare_app():
    from icl_gd.cli import app

    return app


def _one_error_line(text: str) -> bool:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith("icl-gd: error: ") and "Traceback" not in text


def _looks_like_no_result(out: Path) -> bool:
    return not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("figures", ["--figures", "--no-figures"])
@pytest.mark.parametrize("name", list(BAD_MODELS))
def test_a_bad_model_is_one_line_exit_2_and_leaves_no_result(tmp_path, name, figures):
    # Each fails before the fix: a traceback (the factory's error, autograd's "does not require grad", pandas'
    # "Encountered all NA values", a log-scale plotting error), exit 3 with no message (sys.exit on import), or
    # exit 0 with "loss": "inf"; config.json was left alone in --out.
    from typer.testing import CliRunner

    text, expected = BAD_MODELS[name]
    model_file = tmp_path / f"{name}_model.py"
    model_file.write_text(text)
    out = tmp_path / "cmp"
    result = CliRunner().invoke(_compare_app(), ["compare", "--model", f"{model_file}:build", "--d", "3", "--n", "6",
                                                 "--out", str(out), "--steps", "1", figures])
    assert result.exit_code == 2, result.output
    assert _one_error_line(result.output), result.output
    assert expected.format(file=model_file) in result.output, result.output
    assert _looks_like_no_result(out), sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize("option,expected", [(["--threads", "0"], "--threads must be a positive integer, got 0"),
                                             (["--threads", "100000"], "logical cores"),
                                             (["--device", "tpu"], "--device 'tpu'"),
                                             (["--d", "0"], "d must be a positive integer"),
                                             (["--task", "garg"], "--task 'garg' is not one of")])
def test_bad_compare_options_are_one_line_exit_2(tmp_path, option, expected):
    from typer.testing import CliRunner

    model_file = tmp_path / "ls_model.py"
    model_file.write_text("import torch\ndef build():\n"
                          "    return lambda x, y, q: (q[:, None] @ torch.linalg.pinv(x) @ y[..., None])[:, 0, 0]\n")
    out = tmp_path / "cmp"
    result = CliRunner().invoke(_compare_app(), ["compare", "--model", f"{model_file}:build", "--out", str(out),
                                                 *option])
    assert result.exit_code == 2, result.output
    assert _one_error_line(result.output) and expected in result.output, result.output
    assert _looks_like_no_result(out)


def test_an_internal_failure_is_one_line_exit_1_and_leaves_no_result(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import icl_gd.regression.compare.command as command

    def broken(*args, **kwargs):
        raise ValueError("a bug inside the comparison")

    monkeypatch.setattr(command, "compare_predictor", broken)
    model_file = tmp_path / "ls_model.py"
    model_file.write_text("def build():\n    return lambda x, y, q: q.sum(-1)\n")
    out = tmp_path / "cmp"
    result = CliRunner().invoke(_compare_app(), ["compare", "--model", f"{model_file}:build", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert _one_error_line(result.output) and "ValueError: a bug inside the comparison" in result.output
    assert _looks_like_no_result(out)
