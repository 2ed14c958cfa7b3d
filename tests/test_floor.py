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
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import resolve_study_config
from icl_gd.platform.floor import (DEFAULT_PEAK_GFLOPS, Peak, machine_peak, matmul_flops, measure_peak_gflops,
                                   parse_peak, seed_flops, training_flops)
from icl_gd.claims.plan_floor import packed_s
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
    study = REGISTRY.get("spotlights")
    assert training_flops(study, study.config()) is None


_TINY_DUAL = ("data.dataset=digits", "data.second_task=permuted", "data.train_examples=150", "training.hidden=16",
              "training.epochs=2", "training.batch_size=30", "analysis.n_queries=4", "seeds=1")


@pytest.mark.parametrize("extra", [(), ("training.steps=3", "training.continual_phase_steps=2",
                                        "training.grad_clip=1.0"), ("training.steps=50",)])  # 50: past 2 epochs
@pytest.mark.slow
def test_the_image_dual_form_declares_the_float64_steps_and_products_it_trains(tmp_path, monkeypatch, extra):
    """Every recorded SGD step of a run, counted per trained MLP (a setting): as many steps as each setting
    declares, each with the declared step's FLOPs (the recorder's own products included), in float64. (150 images
    in mini-batches of 30: no short last batch, whose step would count fewer products than the declared one.)"""
    import icl_gd.dual.training as dual_training

    study = REGISTRY.get("dual-form")
    overrides = (*_TINY_DUAL, *extra)
    declared = training_flops(study, resolve_study_config(study, "default", overrides))
    real, models, steps = dual_training.sgd_step, [], []  # the models kept alive: no id is reused

    def counted(run, *args, **kwargs):
        dtypes = frozenset(p.dtype for p in run.model.parameters())
        result = []
        flops = matmul_flops(lambda: result.append(real(run, *args, **kwargs)))
        if not models or models[-1] is not run.model:
            models.append(run.model)
            steps.append([])
        steps[-1].append((flops, dtypes))
        return result[0]

    monkeypatch.setattr(dual_training, "sgd_step", counted)
    execute_run(REGISTRY, "dual-form", tmp_path / "run", "default", overrides, progress=False, figures=False)
    assert [w.label for w in declared] == ["single MLP", "joint MLP", "continual MLP"]
    assert all(w.precision == "float64" for w in declared)
    assert [len(s) for s in steps] == [w.steps for w in declared]
    assert [set(s) for s in steps] == [{(w.flops, frozenset({torch.float64}))} for w in declared]


@pytest.mark.parametrize("steps", ["10", "none"])  # none: 2 epochs, each ending on a shorter window
@pytest.mark.slow
def test_the_language_model_declares_the_steps_and_products_it_trains(tmp_path, monkeypatch, steps):
    """Every recorded step of a dual-form-lm run (the word-level set-up on a written text, tiny LSTM), counted: as
    many as declared, the declared step's FLOPs those of a full window (an epoch's last window may be shorter and
    count fewer), in the training's precision."""
    import icl_gd.dual.lm_training as lm_training
    from test_dual_lm import TINY_MODEL, _grammar_corpus

    text = _grammar_corpus(tmp_path / "grammar.txt")
    overrides = ("seeds=1", "setups=wiki", "n_queries=4", "context=6", "n_passages=2", "verify_queries=4",
                 f"wiki.data.corpus={text}", "wiki.training.epochs=2", f"wiki.training.steps={steps}",
                 *(f"wiki.{key}={value}" for key, value in TINY_MODEL.items()))
    study = REGISTRY.get("dual-form-lm")
    (declared,) = training_flops(study, resolve_study_config(study, "default", overrides))
    real, counted = lm_training.sgd_step, []

    def counting(run, *args, **kwargs):
        result = []
        counted.append((matmul_flops(lambda: result.append(real(run, *args, **kwargs))),
                        {p.dtype for p in run.model.parameters()}))
        return result[0]

    monkeypatch.setattr(lm_training, "sgd_step", counting)
    execute_run(REGISTRY, "dual-form-lm", tmp_path / "run", "default", overrides, progress=False, figures=False)
    assert (declared.label, declared.precision) == ("wiki LSTM", "float32")
    assert len(counted) == declared.steps == (10 if steps == "10" else declared.steps) > 0
    assert max(f for f, _ in counted) == declared.flops and all(d == {torch.float32} for _, d in counted)
    short = [f for f, _ in counted if f != declared.flops]
    assert len(short) == (0 if steps == "10" else 2) and all(0 < f < declared.flops for f in short)


def test_the_peak_is_the_default_given_or_measured_and_kept(tmp_path, monkeypatch):
    cache = tmp_path / "peaks.json"
    default = machine_peak(cache=cache)
    assert (default.gflops, default.of("float64")) == (DEFAULT_PEAK_GFLOPS, DEFAULT_PEAK_GFLOPS / 2)
    assert not cache.exists()
    measured = iter([55.5, 30.5, 61.0, 28.0])
    monkeypatch.setattr("icl_gd.platform.floor.measure_peak_gflops", lambda precision="float32": next(measured))
    peak = machine_peak(measure=True, cache=cache)
    assert (peak.gflops, peak.of("float64")) == (55.5, 30.5)
    kept = machine_peak(cache=cache)
    assert (kept.gflops, kept.of("float32"), kept.of("float64")) == (55.5, 55.5, 30.5)
    assert parse_peak(None, cache=cache).of("float64") == 30.5
    replaced = parse_peak("measure", cache=cache)
    assert (replaced.gflops, replaced.of("float64")) == (61.0, 28.0) and machine_peak(cache=cache).gflops == 61.0
    assert sorted(json.loads(cache.read_text()).values()) == [28.0, 61.0]
    assert parse_peak("40", cache=cache) == Peak(40.0, "given") and parse_peak("40").of("float64") == 20.0


def test_a_seed_s_floor_takes_each_training_at_the_peak_of_its_precision():
    from icl_gd.platform.floor import WorkFlops, seed_floor_s

    peak = Peak(80.0, "given", gflops64=25.0)
    trainings = [WorkFlops("a", 10, 8 * 10 ** 9), WorkFlops("b", 4, 5 * 10 ** 9, "float64")]
    assert seed_floor_s(trainings, peak) == pytest.approx(10 * 8 / 80 + 4 * 5 / 25)  # 1.0 + 0.8 s
    assert seed_flops(trainings) == 100 * 10 ** 9
    with pytest.raises(ConfigError, match="'float16' is not one of"):
        peak.of("float16")
    with pytest.raises(ConfigError, match="precision='float16' is not one of"):
        measure_peak_gflops(precision="float16")


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf", "nan", ""])
def test_a_bad_peak_is_a_config_error(value):
    from icl_gd.core.errors import ConfigError

    with pytest.raises(ConfigError, match="is not a peak"):
        parse_peak(value)


def test_runs_are_packed_longest_first_onto_the_least_loaded_worker():
    assert packed_s([2, 4, 3, 3], 2) == 6 and packed_s([3, 3, 2, 2, 2], 2) == 7 and packed_s([5, 1], 4) == 5 and packed_s([], 2) == 0


def test_the_plan_prints_each_plan_s_estimate_floor_and_their_ratio_and_the_totals(tmp_path):
    from icl_gd.claims.plan import plan_runs, seed_specs, select_claims

    from icl_gd.core.timing import append_attempt

    claims = select_claims(["vo-single-loss", "beyond-spotlights-move"])
    plan = claims[0].runs[0]
    first = tmp_path / "r" / "runs" / seed_specs(plan, quick=False)[0].run_id()
    first.mkdir(parents=True)  # a seed that trained for 130 s, 10 s of it evaluations: 120 s of training
    append_attempt(first, {"wall_s": 150.0, "cpu_s": 149.0, "phases_wall_s": {"training": 130.0,
                                                                             "training > evaluation": 10.0}})
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--plan", "--workers", "2",
                                      "--peak", "50", "--only", "vo-single-loss,beyond-spotlights-move"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("products floor:"))
    assert "50.0 GFLOP/s a core, float64 products at 25.0 (given)" in lines[header]
    assert lines[header + 1].split() == ["seeds", "GFLOP/seed", "estimate", "floor", "est/floor", "trained",
                                         "trained/floor", "plan"]
    single, spotlights = lines[header + 2], lines[header + 3]
    study = REGISTRY.get("single-layer")
    flops = seed_flops(training_flops(study, resolve_study_config(study, "default", ("seeds=1",))))
    floor = flops / 50e9
    assert single.split()[:2] == [str(plan.seeds), f"{flops / 1e9:.4g}"] and single.endswith("single-layer default")
    mean_s = sum(plan.estimate(False, seed) for seed in range(plan.seeds)) / plan.seeds  # later seeds cost less
    assert mean_s < plan.estimate(False, 0) and f" {mean_s:.0f} s " in single
    assert f"{floor:.1f} s" in single and f"{mean_s / floor:.1f}x" in single
    assert " ".join(single.split()).endswith(f" 2.0 min {120 / floor:.1f}x single-layer default")  # trained, ratio
    assert "no model" in spotlights and spotlights.endswith("spotlights default")
    totals, runs = lines[header + 4], len(plan_runs(claims, quick=False))
    assert re.fullmatch(rf"totals over {runs} runs: estimate [\d.]+ CPU min, [\d.]+ min wall on 2 workers; "
                        r"products floor [\d.]+ CPU min, [\d.]+ min wall on 2 workers \(1 plan with no model "
                        r"counts nothing\)", totals), totals
    assert lines[header + 5].startswith("  the plans with a model: estimate ")
    assert list((tmp_path / "r" / "runs").iterdir()) == [first]  # --plan runs nothing


def test_a_float64_training_is_floored_at_the_float64_peak_and_an_unbuilt_one_says_why():
    from icl_gd.claims.plan_floor import PlanFloor, floor_lines
    from icl_gd.claims.plan import plan_runs, select_claims
    from icl_gd.platform.floor import WorkFlops

    runs = tuple(plan_runs(select_claims(["vo-single-loss"]), quick=False))[:1]
    peak = Peak(80.0, "given", gflops64=20.0)
    work = (WorkFlops("single MLP", 1000, 4 * 10 ** 9, "float64"),)  # 4 TFLOP: 200 s at 20, 50 s at 80
    floors = [PlanFloor(runs, 600.0, work, None), PlanFloor(runs, 60.0, None, None, "no images here")]
    lines = floor_lines(floors, peak, workers=1)
    assert lines[2].split()[:6] == ["1", "4000", "10.0", "min", "3.3", "min"] and " 3.0x " in lines[2]
    assert lines[2].endswith(f"{floors[0].name} (float64 products)") and "float64" not in lines[3]
    assert lines[-1] == f"  {floors[1].name}: no model counted here: no images here"


def test_a_plan_whose_dataset_is_missing_prints_no_model_and_why(tmp_path):
    """A dual-form plan's Fashion-MNIST (its only dataset here: task 1 its permutation) looked for where it is not:
    the plan's floor cannot be counted, and says so below the table (a run of it would stop with the same
    message)."""
    from dataclasses import replace as replace_spec

    from icl_gd.claims.plan_floor import floor_lines, plan_floors
    from icl_gd.claims.plan import Plan, PlannedRun, RunRecord, plan_runs, select_claims

    (planned, *_) = [p for p in plan_runs(select_claims(["irie-table1-correct"]), quick=False)
                     if p.spec.study == "dual-form"]
    missing = str(tmp_path / "no-fashion-mnist")
    spec = replace_spec(planned.spec, overrides=(*planned.spec.overrides, "data.dataset=fashion-mnist",
                                                 "data.second_task=permuted", f"data.fashion_mnist_dir={missing}"))
    (floor,) = plan_floors(Plan((PlannedRun(spec, 60.0),), {spec: RunRecord(False)}, 1), REGISTRY)
    assert floor.trainings is None and missing in floor.unbuilt
    lines = floor_lines([floor], Peak(50.0, "given"), workers=1)
    assert "no model" in lines[2] and lines[-1].startswith(f"  {floor.name}: no model counted here: ")


@pytest.mark.parametrize("args, message", [
    (["--plan", "--peak", "fast"], "--peak 'fast' is not a peak"),
    (["--plan", "--peak", "-1"], "--peak '-1' is not a peak"),
    (["--peak", "72"], "--peak sets the products floor that --plan prints"),
])
def test_bad_peak_options_are_one_line_errors(tmp_path, args, message):
    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--only", "vo-single-loss", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert result.output.strip().count("\n") == 0, result.output  # the error alone: nothing planned first
