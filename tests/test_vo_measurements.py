"""The measurements behind von Oswald et al.'s claims: the fixed training set (App. A.12), the
roll-out's median loss and GD's instability (App. A.6), the learned-function distance (Fig. 4) and GD++ tuned the
authors' way (their pre_train_gd_hps)."""

from __future__ import annotations

import math

import pytest
import torch

from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ConfigError
from icl_gd.claims.evidence import SeedEvidence
from icl_gd.claims.statistics import RolloutRise
from icl_gd.regression.rollout.depth import depth_rows, gd_instability, median_task_loss
from icl_gd.regression.evaluation import Scored, relative_prediction_rms
from icl_gd.regression.gd import GDPPParams, gd_predictions_per_step, gdpp_loss
from icl_gd.regression.study import RegressionConfig
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tuning import tune_gdpp_adam


# ---------------------------------------------------------------------------------------------------- fixed training set
def test_a_fixed_training_set_is_the_same_batch_every_step_and_only_for_training():
    task = LinearRegressionTask(d=3, n_context=4, train_tasks=16)
    first, later = task.sample(16, seed=5, step=0), task.sample(16, seed=5, step=7)
    assert torch.equal(first.x, later.x) and torch.equal(first.w, later.w)  # full batch: one fixed set
    other_seed = task.sample(16, seed=6, step=0)
    assert not torch.equal(first.w, other_seed.w)  # the set is drawn from the seed
    fresh = LinearRegressionTask(d=3, n_context=4)
    for stream in (Stream.TEST, Stream.TUNE):  # test and tuning tasks stay fresh
        assert torch.equal(task.sample(8, 5, 0, stream).x, fresh.sample(8, 5, 0, stream).x)
    # a smaller batch is a subset of the same 16 tasks, a different one at another step
    pool_w = {tuple(w.flatten().tolist()) for w in first.w}
    part_a, part_b = task.sample(4, 5, 1).w, task.sample(4, 5, 2).w
    assert all(tuple(w.flatten().tolist()) in pool_w for w in torch.cat([part_a, part_b]))
    assert not torch.equal(part_a, part_b)


def test_a_fixed_training_set_refuses_a_larger_batch_and_bad_sizes():
    with pytest.raises(ConfigError):
        LinearRegressionTask(train_tasks=8).sample(16, 0, 0)
    with pytest.raises(ConfigError):
        LinearRegressionTask(train_tasks=-1)
    with pytest.raises(ConfigError):
        apply_overrides(RegressionConfig(), ["train_tasks=128"]).check_train_tasks()  # batch 2048 > 128 tasks
    fitting = apply_overrides(RegressionConfig(), ["train_tasks=128", "batch_size=128"])
    fitting.check_train_tasks()
    assert fitting.train_config().batch_size == 128


# ---------------------------------------------------------------------------------------------------- roll-out
def test_gd_instability_counts_the_tasks_where_the_repeated_step_diverges():
    """λη λ_max(XᵀX/N) > 2 is exactly where repeated GD blows up: the flagged task's loss grows, the other's falls."""
    N, d = 4, 2
    x = torch.zeros(2, N, d, dtype=torch.float64)
    x[0, :, 0], x[0, :, 1] = torch.tensor([1.0, -1.0, 1.0, -1.0]), torch.tensor([1.0, 1.0, -1.0, -1.0])  # XᵀX/N = I
    x[1] = 2 * x[0]  # XᵀX/N = 4I
    eta = 0.6  # rates 0.6 and 2.4 at λ = 1; 0.3 and 1.2 at λ = 0.5
    out = gd_instability(x, eta, (1.0, 0.5))
    assert out["gd_unstable_share"] == [0.5, 0.0]
    assert out["gd_max_contraction_rate"] == pytest.approx([2.4, 1.2])
    w = torch.tensor([[[1.0, -2.0]]], dtype=torch.float64).expand(2, 1, d)
    y = x @ w.transpose(1, 2)
    x_query = torch.tensor([[0.3, 0.7]], dtype=torch.float64).expand(2, d)
    y_query = (w @ x_query[..., None])[..., 0]
    predictions = gd_predictions_per_step(x, y, x_query, [eta] * 20)
    errors = [((p - y_query) ** 2)[:, 0] for p in predictions[1:]]
    assert errors[-1][1] > errors[0][1] > 0 and errors[-1][0] < 1e-12


def test_depth_rows_report_the_median_and_a_rollout_claim_can_read_it(tmp_path):
    """One diverging task in five lifts the mean loss at every step while the median keeps falling."""
    targets = torch.zeros(5, 1)
    typical = [torch.tensor([[s], [s], [s], [s], [10.0 ** n]]) for n, s in enumerate((1.0, 0.5, 0.25), start=1)]
    rows = depth_rows({"trained": typical, "gd": typical}, targets, 0.75)
    assert [r["median_loss"] for r in rows[:3]] == pytest.approx([0.5, 0.125, 0.03125])
    assert rows[0]["loss"] == pytest.approx(0.5 * (4 * 1.0 + 100) / 5)
    assert median_task_loss(typical[0], targets) == pytest.approx(0.5)
    with open(tmp_path / "depth.csv", "w") as handle:
        handle.write("damping,applications,model,loss,median_loss\n")
        handle.writelines(f"{r['damping']},{r['applications']},{r['model']},{r['loss']},{r['median_loss']}\n"
                          for r in rows)
    evidence = SeedEvidence(({},), (tmp_path,))
    assert RolloutRise(0.75)(evidence) > 0  # the mean rises
    assert RolloutRise(0.75, column="median_loss")(evidence) == pytest.approx(-0.75)  # the error halves


def test_the_median_loss_counts_an_overflowed_task_as_infinite_not_as_nan():
    """One task in five overflowed (inf - inf = NaN in its prediction): the median stays the typical task's loss
    (torch.median alone returns NaN, which the rows then wrote as an infinite median)."""
    targets = torch.zeros(5, 1)
    prediction = torch.tensor([[1.0], [1.0], [2.0], [3.0], [float("nan")]])
    assert median_task_loss(prediction, targets) == pytest.approx(2.0)
    prediction[:3] = float("inf")  # three of five tasks diverged: then the median is infinite
    assert median_task_loss(prediction, targets) == float("inf")


# ---------------------------------------------------------------------------------------------------- Fig. 4
def test_relative_prediction_rms_is_the_relative_l2_distance_of_two_functions():
    f = torch.tensor([[1.0], [-2.0], [2.0]])
    scored = lambda p: Scored(p, torch.zeros(3, 1), 0.0)  # noqa: E731
    assert relative_prediction_rms(scored(f), scored(f)) == 0.0
    assert relative_prediction_rms(scored(2 * f), scored(f)) == pytest.approx(1.0)
    assert relative_prediction_rms(scored(f + 0.3), scored(f)) == pytest.approx(0.3 / math.sqrt(3.0))


# ---------------------------------------------------------------------------------------------------- GD++, theirs
def _tasks(n: int, step: int):
    b = LinearRegressionTask(d=4, n_context=6).sample(n, 3, step, Stream.TUNE, dtype=torch.float64)
    return b.x_context, b.y_context, b.x_query, b.y_query


def test_authors_gdpp_tuning_starts_from_the_scanned_coupled_eta_then_adam_lowers_the_loss():
    scan, N = _tasks(512, 0), 6
    grid = (0.5, 1.0, 2.0, 4.0, 8.0)
    start = tune_gdpp_adam(scan, lambda step: scan, 2, shared=True, adam_steps=0, lr=1e-3, grad_clip=1.0,
                           scan_etas=grid)
    losses = {eta: gdpp_loss(*scan, GDPPParams((eta,) * 2, (eta / N ** 2,) * 2)) for eta in grid}
    best = min(losses, key=losses.get)
    assert start.etas == pytest.approx((best, best)) and start.gammas == pytest.approx((best / N ** 2,) * 2)
    tuned = tune_gdpp_adam(scan, lambda step: _tasks(64, 1 + step), 2, shared=False, adam_steps=20, lr=1e-2,
                           grad_clip=10.0, scan_etas=grid)
    assert tuned.etas[0] != tuned.etas[1]  # per-layer parameters when not shared
    assert gdpp_loss(*scan, tuned) < gdpp_loss(*scan, start)
