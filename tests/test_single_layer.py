"""A trained layer applied many times with damping (icl_gd.iteration) and the `single-layer` study's depth part."""

import csv

import pytest
import torch

from icl_gd.constructions.gdpp import gdpp_step_weights
from icl_gd.constructions.prop1 import gd_step_weights, stacked_model
from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predictions_per_step, gdpp_predictions_per_step
from icl_gd.regression.rollout.iteration import iterated_predictions
from icl_gd.regression.lsa import LSAConfig, LSALayer
from icl_gd.core.results import read_json
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatLayout
from icl_gd.studies import RunContext, get_study
from icl_gd.studies.single_layer import SingleLayerConfig


def _data(d=6, n=8, d_y=2, dtype=torch.float64):
    task = LinearRegressionTask(d=d, n_context=n, d_y=d_y)
    data = task.sample(32, seed=4, stream=Stream.TEST, dtype=dtype)
    return data, ConcatLayout(d, d_y).tokens(data)


@pytest.mark.parametrize("update", ["y", "all"])
def test_prop1_layer_applied_n_times_is_n_gd_steps_of_damped_eta(update):
    # The Prop. 1 layer writes no x update, so both modes are GD with step λη. Catches λ applied twice or not at
    # all, a sign error in ŷ, or the wrong slots kept in "y" mode.
    data, tokens = _data()
    eta, damping = 1.7, 0.75
    layer = stacked_model([gd_step_weights(6, 2, 8, eta)], 2).layers[0]
    got = torch.stack(iterated_predictions(layer, tokens, 7, damping, update, d_y=2))
    want = gd_predictions_per_step(data.x_context, data.y_context, data.x_query, [damping * eta] * 7)[1:]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-13)


def test_all_updates_of_a_gdpp_layer_are_damped_gdpp_steps_and_y_mode_is_gd():
    data, tokens = _data()
    eta, gamma, damping = 1.2, 0.02, 0.5
    layer = stacked_model([gdpp_step_weights(6, 2, 8, eta, gamma)], 2).layers[0]
    args = (data.x_context, data.y_context, data.x_query)
    full = torch.stack(iterated_predictions(layer, tokens, 5, damping, "all", d_y=2))
    torch.testing.assert_close(full, gdpp_predictions_per_step(*args, [damping * eta] * 5,
                                                               [damping * gamma] * 5)[1:], rtol=1e-12, atol=1e-13)
    y_only = torch.stack(iterated_predictions(layer, tokens, 5, damping, "y", d_y=2))
    torch.testing.assert_close(y_only, gd_predictions_per_step(*args, [damping * eta] * 5)[1:], rtol=1e-12,
                               atol=1e-13)
    assert not torch.allclose(full, y_only)


def test_float32_layer_tracks_float64_gd():
    data, tokens = _data(dtype=torch.float64)
    layer = stacked_model([gd_step_weights(6, 2, 8, 2.0, dtype=torch.float32)], 2, dtype=torch.float32).layers[0]
    got = torch.stack(iterated_predictions(layer, tokens.float(), 20, 0.75, "y", d_y=2)).double()
    want = gd_predictions_per_step(data.x_context, data.y_context, data.x_query, [1.5] * 20)[1:]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_bad_iteration_arguments_raise():
    layer = stacked_model([gd_step_weights(2, 1, 3, 1.0)], 1).layers[0]
    tokens = torch.zeros(1, 4, 3, dtype=torch.float64)
    for kwargs in (dict(update="x"), dict(n_applications=0), dict(damping=0.0)):
        args = {"n_applications": 2, "damping": 1.0, "update": "y", **kwargs}
        with pytest.raises(ConfigError):
            iterated_predictions(layer, tokens, **args)
    for bad in ("iterate_update=x", "dampings=0", "max_applications=0"):
        with pytest.raises(ConfigError):
            apply_overrides(SingleLayerConfig(), [bad])


@pytest.mark.slow
def test_study_writes_depth_rows_metrics_and_figure(tmp_path):
    settings = dict(steps=6, batch_size=32, eval_every=6, checkpoint_every=6, n_test=64, n_tune=128, n_ood=16,
                    max_applications=5, dampings="1.0,0.75", interpolation_points=2, rollout_draws=3)
    config = apply_overrides(SingleLayerConfig(), [f"{k}={v}" for k, v in settings.items()])
    get_study("single-layer").run(config, RunContext(out=tmp_path, device=torch.device("cpu"), progress=False))
    m = read_json(tmp_path / "metrics.json")["mean"]
    with open(tmp_path / "depth.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 5  # models x dampings x applications
    gd_last = [float(r["loss"]) for r in rows if r["model"] == "gd" and r["applications"] == "5"]
    assert m["depth_loss_gd"] == pytest.approx(gd_last, rel=1e-9)
    assert all(lo <= last for lo, last in zip(m["depth_min_loss_trained"], m["depth_loss_trained"]))
    # One application at λ = 1 is the trained layer itself, in "y" mode its prediction is unchanged (ŷ is a y slot).
    first = next(float(r["loss"]) for r in rows if r["model"] == "trained" and r["applications"] == "1"
                 and float(r["damping"]) == 1.0)
    assert first == pytest.approx(m["loss_trained"], rel=1e-5)
    assert (tmp_path / "figures" / "past_training_depth.png").exists()
    # The roll-out on 3 independent test draws: draw 0 is the test set (depth.csv's rows), the others fresh tasks.
    with open(tmp_path / "rollout_draws.csv") as handle:
        drawn = list(csv.DictReader(handle))
    assert len(drawn) == 3 * len(rows) and {r["draw"] for r in drawn} == {"0", "1", "2"}
    assert [{k: v for k, v in r.items() if k != "draw"} for r in drawn if r["draw"] == "0"] == rows
    gd_last = {r["draw"]: r["loss"] for r in drawn if r["model"] == "gd" and r["applications"] == "5"}
    assert len(set(gd_last.values())) == 3
    with open(tmp_path / "rollout_tasks.csv") as handle:
        tasks = list(csv.DictReader(handle))
    assert {(r["draw"], r["damping"]) for r in tasks} == {(k, g) for k in "012" for g in ("1.0", "0.75")}


def test_paper_preset_differs_from_default_only_where_the_authors_did():
    from icl_gd.core.study import resolve_study_config

    study = get_study("single-layer")
    paper, default = resolve_study_config(study, "paper"), resolve_study_config(study)
    assert (paper.n_ood, paper.dampings, paper.iterate_update) == (1000, (0.75,), "y")
    assert paper.train_config() == default.train_config() and paper.evaluation == default.evaluation
    resolved = paper.train_config()
    assert (resolved.steps, resolved.batch_size, resolved.lr, resolved.grad_clip) == (5000, 2048, 1e-3, 1e-3)
    assert (paper.evaluation.n_test, paper.evaluation.eval_every) == (10_000, 100)


def _leaves(value):
    """The numbers of a metric, a scalar or a (nested) list, as a flat list."""
    return [x for v in value for x in _leaves(v)] if isinstance(value, list) else [value]


def test_batched_seeds_give_each_seed_its_sequential_run(tmp_path):
    """Three seeds trained as one batched model write, seed by seed, the metrics and curves of three lone runs, up
    to float32 round-off (the vmapped kernels sum in another order). Fails if the seeds shared one task stream,
    shared a gradient clip (1e-5 binds at every step here) or if a row were filed under another seed."""
    settings = dict(steps=8, batch_size=32, eval_every=4, checkpoint_every=8, n_test=64, n_tune=128, n_ood=16,
                    max_applications=3, dampings="1.0", interpolation_points=2, grad_clip=1e-5,
                    seeds=3, seed=4)
    runs = {}
    for batched in (True, False):
        config = apply_overrides(SingleLayerConfig(), [f"{k}={v}" for k, v in settings.items()]
                                 + [f"batched_seeds={str(batched).lower()}"])
        out = tmp_path / str(batched)
        get_study("single-layer").run(config, RunContext(out=out, device=torch.device("cpu"), progress=False,
                                                         figures=False))
        with open(out / "curves.csv") as handle:
            curves = {(r["step"], r["seed"], r["model"], r["metric"]): float(r["value"])
                      for r in csv.DictReader(handle)}
        checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
        runs[batched] = read_json(out / "metrics.json")["seeds"], curves, checkpoints
    (batched, batched_curves, batched_files), (lone, lone_curves, lone_files) = runs[True], runs[False]
    assert batched_files == ["trained_seeds4-6.pt"]
    assert lone_files == ["trained_seed4.pt", "trained_seed5.pt", "trained_seed6.pt"]
    assert sorted(batched) == sorted(lone) == ["4", "5", "6"]
    for seed in lone:
        assert sorted(batched[seed]) == sorted(lone[seed])
        for key, value in lone[seed].items():
            if key == "diverged":  # the models' labels (a flag, not a number): the same models in both
                assert batched[seed][key] == value, seed
                continue
            assert _leaves(batched[seed][key]) == pytest.approx(_leaves(value), rel=1e-4, abs=1e-7), (seed, key)
    assert batched_curves.keys() == lone_curves.keys()
    for key, value in lone_curves.items():
        assert batched_curves[key] == pytest.approx(value, rel=1e-4, abs=1e-7), key
    assert len({lone[s]["loss_trained"] for s in lone}) == 3  # the seeds really differ


@pytest.mark.parametrize("update", ["y", "all"])
@pytest.mark.parametrize("heads,d,n,d_y", [(1, 10, 100, 1), (2, 5, 7, 2), (1, 3, 20, 1)])
def test_linear_roll_out_gives_the_bits_of_the_whole_update_loop(update, heads, d, n, d_y):
    """The linear roll-out (context and query padded once, updated in place) against the plain loop over whole
    tokens: the same products on the same inputs, so the same bits, until and after some tasks overflow (a
    damping of 3 on an unstable layer). Catches a padded column that stops being zero, the damping applied
    after the sum, or x slots moved in "y" mode."""
    from oracles import iterated_predictions_loop

    task = LinearRegressionTask(d=d, n_context=n, d_y=d_y)
    tokens = ConcatLayout(d, d_y).tokens(task.sample(64, seed=1, stream=Stream.TEST, dtype=torch.float32))
    layer = LSALayer(LSAConfig(d_model=d + d_y, d_y=d_y, n_heads=heads, init_scale=0.5),
                     torch.Generator().manual_seed(3))
    for damping, steps in ((0.75, 12), (3.0, 40)):
        got = torch.stack(iterated_predictions(layer, tokens, steps, damping, update, d_y))
        want = torch.stack(iterated_predictions_loop(layer, tokens, steps, damping, update, d_y))
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.isfinite(got[0]).all()
    assert not torch.isfinite(got[-1]).all()  # the unstable roll-out did overflow
