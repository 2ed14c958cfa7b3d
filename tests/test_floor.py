"""The products floor: the FLOPs a study declares it trains, counted, and the floor ``icl-gd reproduce --plan``
prints beside each plan's estimate."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import icl_gd.regression.study as regression_study
from icl_gd.cli import app
from icl_gd.core.study import resolve_study_config
from icl_gd.platform.floor import (DEFAULT_PEAK_GFLOPS, Peak, machine_peak, matmul_flops, parse_peak, seed_flops,
                                   training_flops)
from icl_gd.platform.claims.plan_floor import packed_s
from icl_gd.platform.runner import execute_run
from icl_gd.regression.training import train
from icl_gd.studies import REGISTRY


def lsa_step_hand_count(d: int, n: int, batch: int) -> int:
    """Matrix-product FLOPs of one training step of one linear LSA layer (one head) on concatenated tokens of width
    D = d + 1, computed at W = D rounded up to a multiple of 4 (``lsa._padded_width``), ŷ through C
    (``lsa._query_columns_update``, one y column). A (m, k) by (k, n) product is 2·m·k·n.

    Forward: KQ = W_Kᵀ W_Q and PV = P W_V (2D³ each); C = Σ_i e_i e_iᵀ (B products of (W, N) by (N, W)); C by PV's y
    row ((B·W, W) by (W, 1)); u = e_q KQᵀ ((B, W) by (W, W)). Backward: the tokens are data, so only the weights
    get gradients: ∂KQ from u ((W, B) by (B, W)), ∂PV's row from C·PV ((W, B·W) by (B·W, 1)), and the four weight
    matrices from KQ and PV (two (D, D) products each)."""
    D = d + 1
    W = -(-D // 4) * 4
    forward = 2 * (2 * D ** 3) + batch * 2 * W * n * W + 2 * batch * W * W * 1 + 2 * batch * W * W
    backward = 2 * W * batch * W + 2 * W * batch * W * 1 + 4 * (2 * D ** 3)
    return forward + backward


def test_a_tiny_lsa_step_counts_every_product_once():
    d, n, batch = 2, 3, 4  # every term differs: a missed or doubled product changes the total
    study = REGISTRY.get("single-layer")
    config = resolve_study_config(study, "default", (f"task.d={d}", f"task.n_context={n}", f"batch_size={batch}"))
    (work,) = training_flops(study, config)
    assert (work.label, work.steps) == ("trained", 5000)
    assert work.flops == lsa_step_hand_count(d, n, batch) == 1220
    assert seed_flops([work]) == 5000 * 1220


def test_matmul_flops_counts_a_product_and_its_backward():
    a, b = torch.randn(3, 5, requires_grad=True), torch.randn(5, 7)
    assert matmul_flops(lambda: (a @ b).sum()) == 2 * 3 * 5 * 7
    assert matmul_flops(lambda: (a @ b).sum().backward()) == 2 * (2 * 3 * 5 * 7)  # forward, and ∂a = g bᵀ


# Tiny configs of one seed, as the plans run them (several seeds may train as one batched model): the studies' work
# before training (test sets, tuning) takes a moment; what they train is the same
# kind of model as at full size.
_TINY = ("seeds=1", "evaluation.n_test=64", "evaluation.n_tune=64", "training.batch_size=16", "training.steps=3",
         "eval_every=3")
DECLARING = [
    ("single-layer", "default", ("task.d=3", "task.n_context=4")),
    ("multi-layer", "default", ("task.d=3", "task.n_context=4", "layers=2", "recurrent=false",
                                "gdpp_adam_steps=0", "n_ood=16")),
    ("sine", "default", ("hidden=8",)),
    ("sine", "default", ("architecture=tokens", "hidden=8")),
    ("separate-tokens", "default", ("task.d=3", "task.n_context=4", "heads=1,2")),
    ("softmax-heads", "default", ("task.d=3", "task.n_context=4", "heads=1,2")),
    ("which-algorithm", "default", ("task.d=3", "task.n_context=4", "layers=2", "n_contexts=4", "n_queries=3",
                                    "newton_steps=2", "gd_steps=1,2", "tuned_steps=2")),
    ("foreign-transformer", "default", ("task.d=3", "task.n_context=4", "width=8", "layers=1", "compare.steps=1",
                                        "compare.newton_steps=1", "compare.n_contexts=4", "compare.n_queries=3",
                                        "compare.gd_steps=1", "compare.tuned_steps=1")),
]


class _Enough(Exception):
    pass


@pytest.mark.parametrize("study_name, preset, overrides", DECLARING)
def test_the_declared_training_is_what_the_study_trains(study_name, preset, overrides):
    """Each ``train`` call of a run, captured, has the steps and the step FLOPs its study declares, in order."""
    study = REGISTRY.get(study_name)
    overrides = (*_TINY, *overrides)
    declared = training_flops(study, resolve_study_config(study, preset, overrides))
    captured = []

    def capture(models, task, config, seeds, **kwargs):
        one_step = replace(config, steps=1, eval_every=1, checkpoint_every=1)
        fresh = [__import__("copy").deepcopy(m) for m in models]
        captured.append((config.steps, matmul_flops(lambda: train(fresh, task, one_step, seeds))))
        if len(captured) == len(declared):
            raise _Enough
        return train(models, task, one_step, seeds)

    real = regression_study.train
    regression_study.train = capture
    try:
        with tempfile.TemporaryDirectory() as tmp:
            execute_run(REGISTRY, study_name, Path(tmp) / "run", preset, overrides, progress=False, figures=False)
    except _Enough:
        pass
    finally:
        regression_study.train = real
    assert captured == [(w.steps, w.flops) for w in declared]


def test_a_study_without_a_declared_training_has_no_model():
    study = REGISTRY.get("dual-form")
    assert training_flops(study, study.config()) is None


def test_the_peak_is_the_default_given_or_measured_and_kept(tmp_path, monkeypatch):
    cache = tmp_path / "peaks.json"
    assert machine_peak(cache=cache).gflops == DEFAULT_PEAK_GFLOPS and not cache.exists()
    measured = iter([55.5, 61.0])
    monkeypatch.setattr("icl_gd.platform.floor.measure_peak_gflops", lambda: next(measured))
    assert machine_peak(measure=True, cache=cache).gflops == 55.5
    assert machine_peak(cache=cache).gflops == 55.5 and parse_peak(None, cache=cache).gflops == 55.5  # kept
    assert parse_peak("measure", cache=cache).gflops == 61.0 and machine_peak(cache=cache).gflops == 61.0  # replaced
    assert list(json.loads(cache.read_text()).values()) == [61.0]
    assert parse_peak("40", cache=cache) == Peak(40.0, "given")


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf", "nan", ""])
def test_a_bad_peak_is_a_config_error(value):
    from icl_gd.core.errors import ConfigError

    with pytest.raises(ConfigError, match="is not a peak"):
        parse_peak(value)


def test_runs_are_packed_longest_first_onto_the_least_loaded_worker():
    assert packed_s([2, 4, 3, 3], 2) == 6 and packed_s([3, 3, 2, 2, 2], 2) == 7 and packed_s([5, 1], 4) == 5 and packed_s([], 2) == 0


def test_the_plan_prints_each_plan_s_estimate_floor_and_their_ratio_and_the_totals(tmp_path):
    from icl_gd.platform.claims.reproduce import plan_runs, seed_specs, select_claims

    from icl_gd.core.timing import append_attempt

    claims = select_claims(["vo-single-loss", "irie-table1-correct"])
    plan = claims[0].runs[0]
    first = tmp_path / "r" / "runs" / seed_specs(plan, quick=False)[0].run_id()
    first.mkdir(parents=True)  # a seed that trained for 130 s, 10 s of it evaluations: 120 s of training
    append_attempt(first, {"wall_s": 150.0, "cpu_s": 149.0, "phases_wall_s": {"training": 130.0,
                                                                             "training > evaluation": 10.0}})
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan", "--workers", "2",
                                      "--peak", "50", "--only", "vo-single-loss,irie-table1-correct"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("products floor:"))
    assert "50.0 GFLOP/s a core (given)" in lines[header]
    assert lines[header + 1].split() == ["seeds", "GFLOP/seed", "estimate", "floor", "est/floor", "trained",
                                         "trained/floor", "plan"]
    single, dual = lines[header + 2], lines[header + 3]
    study = REGISTRY.get("single-layer")
    flops = seed_flops(training_flops(study, resolve_study_config(study, "default", ("seeds=1",))))
    floor = flops / 50e9
    assert single.split()[:2] == [str(plan.seeds), f"{flops / 1e9:.4g}"] and single.endswith("single-layer default")
    assert f"{floor:.1f} s" in single and f"{plan.estimate_s / floor:.1f}x" in single
    assert " ".join(single.split()).endswith(f" 2.0 min {120 / floor:.1f}x single-layer default")  # trained, ratio
    assert "no model" in dual and dual.endswith("dual-form paper key_dtype=float32 single_task=0 settings=single")
    totals, runs = lines[header + 4], len(plan_runs(claims, quick=False))
    assert re.fullmatch(rf"totals over {runs} runs: estimate [\d.]+ CPU min, [\d.]+ min wall on 2 workers; "
                        r"products floor [\d.]+ CPU min, [\d.]+ min wall on 2 workers \(1 plan with no model "
                        r"counts nothing\)", totals), totals
    assert lines[header + 5].startswith("  the plans with a model: estimate ")
    assert list((tmp_path / "r" / "runs").iterdir()) == [first]  # --plan runs nothing


@pytest.mark.parametrize("args, message", [
    (["--plan", "--peak", "fast"], "--peak 'fast' is not a peak"),
    (["--plan", "--peak", "-1"], "--peak '-1' is not a peak"),
    (["--peak", "72"], "--peak sets the products floor that --plan prints"),
])
def test_bad_peak_options_are_one_line_errors(tmp_path, args, message):
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--only", "vo-single-loss", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert result.output.strip().count("\n") == 0, result.output  # the error alone: nothing planned first
