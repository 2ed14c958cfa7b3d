"""The memory pre-check: a run too large for the free memory is refused before it starts, naming the key to lower;
a run that fits is never refused."""

from dataclasses import dataclass

import pytest
import torch
from typer.testing import CliRunner

import icl_gd.regression.gd as gd
import icl_gd.regression.tuning as tuning
import icl_gd.regression.metrics as metrics

from icl_gd.cli import app
from icl_gd.core.errors import ConfigError
from icl_gd.platform.memory import ROW_BYTES, SEED_BYTES, available_memory, check_memory, estimate_run_memory
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.core.study import MemoryPart, RunMemory, Study, resolve_study_config
from icl_gd.studies import get_study

GiB = 2**30


def _config(study="single-layer", *overrides):
    return resolve_study_config(get_study(study), "default", list(overrides))


def _estimate(study="single-layer", *overrides):
    return estimate_run_memory(get_study(study), _config(study, *overrides))


def test_the_issue_command_is_a_one_line_error_naming_batch_size(tmp_path):
    out = tmp_path / "big"
    result = CliRunner().invoke(app, ["run", "single-layer", "--out", str(out), "--set", "batch_size=100000000"])
    assert result.exit_code == 2, result.output
    assert "lower batch_size" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()  # refused before the run directory was made


@pytest.mark.parametrize("key,value,named", [("n_test", 10**9, "n_test"), ("n_tune", 10**9, "n_tune"),
                                             ("batch_size", 10**8, "batch_size")])
def test_the_refusal_names_the_largest_part(key, value, named):
    config = _config("single-layer", f"{key}={value}")
    with pytest.raises(ConfigError, match=f"lower {named} "):
        check_memory(get_study("single-layer"), config, __import__("torch").device("cpu"), available=4 * GiB)


def test_the_estimate_scales_with_what_the_run_holds():
    base = _estimate()
    doubled = _estimate("single-layer", "batch_size=4096")
    assert doubled["training.batch_size"] == 2 * base["training.batch_size"]
    assert doubled["evaluation.n_test"] == base["evaluation.n_test"]
    deep = _estimate("multi-layer", "layers=8", "seeds=1")
    shallow = _estimate("multi-layer", "layers=2", "seeds=1")
    assert deep["training.batch_size"] > 2 * shallow["training.batch_size"]
    # tuning and scoring go through deep models in chunks of tasks: their memory stops growing with depth
    assert deep["evaluation.n_tune"] > shallow["evaluation.n_tune"]
    deeper = _estimate("multi-layer", "layers=20", "seeds=1")
    very_deep = _estimate("multi-layer", "layers=200", "seeds=1")
    assert very_deep["evaluation.n_tune"] == deeper["evaluation.n_tune"] < GiB
    assert very_deep["evaluation.n_test"] == deeper["evaluation.n_test"] < GiB
    batched = _estimate("multi-layer", "layers=2", "seeds=3")  # seeds train as one model
    assert batched["training.batch_size"] == 3 * shallow["training.batch_size"]


@pytest.mark.parametrize("study", ["single-layer", "multi-layer", "sine", "separate-tokens", "softmax-heads",
                                   "dual-form"])
def test_every_default_config_fits_this_machine(study):
    free = available_memory(__import__("torch").device("cpu"))
    assert free is not None and free > 0
    check_memory(get_study(study), _config(study), __import__("torch").device("cpu"))  # no ConfigError
    assert max(_estimate(study).values(), default=0) < 2 * GiB


# ------------------------------------------------------------------ memory that does not grow with depth
def _tasks(n=96, d=4, N=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N, d, generator=g, dtype=torch.float64)
    w = torch.randn(n, 1, d, generator=g, dtype=torch.float64)
    xq = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x, x @ w.transpose(1, 2), xq, (w @ xq[..., None])[..., 0]


def test_a_tuning_pass_in_chunks_gives_the_one_pass_loss_and_gradient():
    tasks = tuning._TuningSet.of(*_tasks(), None)
    g = torch.Generator().manual_seed(5)
    for _ in range(3):  # per-step GD++ at random (η_k, γ_k) of 3 steps
        etas, gammas = torch.rand(2, 3, generator=g, dtype=torch.float64)
        point = [2 * etas, gammas / 10]
        results = []
        for parts in (tuning._task_parts(96, 3), [slice(a, min(a + 10, 96)) for a in range(0, 96, 10)]):
            params = [p.clone().requires_grad_() for p in point]
            value = tuning._backward_in_parts(lambda ps, part: tasks.gdpp_loss(ps[0], ps[1], part), params, parts, 96)
            results.append((value, params[0].grad, params[1].grad))
        assert len(tuning._task_parts(96, 3)) == 1  # the default: one pass
        for whole, chunked in zip(*results):
            torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=0)


@pytest.mark.parametrize("shared", [True, False])
def test_tuning_in_chunks_of_tasks_finds_the_same_step_sizes(monkeypatch, shared):
    """End to end: chunked tuning of GD (a smooth, single-basin loss) and shared GD++ lands where one pass does.
    Per-step GD++ only over a few L-BFGS iterations: its loss has flat valleys where a last-digit difference in
    the summation order can send a long descent to a different, equally good point (seen on another CPU)."""
    tasks = _tasks()
    whole_gd = tuning.tune_gd(*tasks, 3, shared=shared)
    max_iter = 200 if shared else 5
    whole_gdpp = tuning.tune_gdpp(*tasks, 3, shared=shared, start=whole_gd, gamma_starts=(0.0, 0.5),
                                  max_iter=max_iter, stretch=None)
    monkeypatch.setattr(tuning, "TUNE_TASK_STEPS", 30)  # 10 tasks per pass of 3 steps: 10 chunks
    assert len(tuning._task_parts(96, 3)) == 10
    chunked_gd = tuning.tune_gd(*tasks, 3, shared=shared)
    chunked_gdpp = tuning.tune_gdpp(*tasks, 3, shared=shared, start=whole_gd, gamma_starts=(0.0, 0.5),
                                    max_iter=max_iter, stretch=None)
    assert chunked_gd.etas == pytest.approx(whole_gd.etas, rel=1e-7)
    assert chunked_gdpp.etas == pytest.approx(whole_gdpp.etas, rel=1e-6)
    assert chunked_gdpp.gammas == pytest.approx(whole_gdpp.gammas, rel=1e-6, abs=1e-12)
    assert chunked_gdpp.gammas != whole_gd.gammas  # L-BFGS moved off the start


def test_sensitivities_in_chunks_of_tasks_equal_one_pass(monkeypatch):
    model = LSAModel(LSAConfig(d_model=5, n_layers=4), seed=3).double()
    tokens = torch.randn(50, 7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    whole = metrics.predictions_and_sensitivities(model, tokens, 4)
    monkeypatch.setattr(metrics, "EVAL_TASK_LAYERS", 24)  # 6 tasks per pass of 4 layers: 9 chunks
    chunked = metrics.predictions_and_sensitivities(model, tokens, 4)
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_predictor_depth_of_models_and_baselines():
    from icl_gd.regression.baselines import GDPPPredictor, GDPredictor, InFloat64, ZeroPredictor
    from icl_gd.regression.tokens import ConcatLayout

    layout = ConcatLayout(4, 1)
    assert metrics.predictor_depth(LSAModel(LSAConfig(d_model=5, n_layers=7))) == 7
    assert metrics.predictor_depth(InFloat64(LSAModel(LSAConfig(d_model=5, n_layers=3)))) == 3
    assert metrics.predictor_depth(GDPredictor(layout, [0.1] * 5)) == 5
    assert metrics.predictor_depth(GDPPPredictor(layout, gd.GDPPParams((0.1,) * 6, (0.0,) * 6))) == 6
    assert metrics.predictor_depth(ZeroPredictor(layout)) == 1


# ------------------------------------------------------------------ what a study declares is what is checked
@dataclass(frozen=True)
class _ReplicaConfig:  # none of the regression keys: the platform can only know what the study declares
    replicas: int = 1
    width: int = 1


def _declaring(memory):
    return Study(name="toy", summary="toy", default_config=_ReplicaConfig, run=lambda config, ctx: {}, memory=memory)


def test_the_check_reads_only_what_the_study_declares():
    declared = _declaring(lambda c: RunMemory(seeds_key="replicas", seeds=c.replicas, evaluations=9,
                                              device=(MemoryPart("width", c.width, c.width * GiB),)))
    cpu = torch.device("cpu")
    assert estimate_run_memory(declared, _ReplicaConfig(replicas=3, width=2)) == {
        "width": 2 * GiB, "replicas": 3 * (SEED_BYTES + 9 * ROW_BYTES)}
    with pytest.raises(ConfigError, match=r"for width \(width=8\) but cpu has 4\.0 GiB free; lower width "):
        check_memory(declared, _ReplicaConfig(width=8), cpu, available=4 * GiB)
    with pytest.raises(ConfigError, match=r"\(replicas=1000000000\).*lower replicas "):
        check_memory(declared, _ReplicaConfig(replicas=10**9), cpu, available=4 * GiB)
    check_memory(declared, _ReplicaConfig(width=3), cpu, available=4 * GiB)  # fits
    check_memory(_declaring(None), _ReplicaConfig(replicas=10**9, width=8), cpu, available=4 * GiB)  # unchecked
