"""The algorithms beyond GD and GD++ (Iterative Newton, preconditioned GD, GD in closed form), the
layer-to-algorithm matching of Fu et al. and the `which-algorithm` study."""

from __future__ import annotations

import json

import pytest
import torch

from icl_gd.constructions.algorithms import IDENTITY_CHECKS
from icl_gd.constructions.prop1 import gd_model
from icl_gd.core.errors import ConfigError
from icl_gd.regression.algorithms import (NewtonPredictor, Preconditioner, PreconditionedGDPredictor, gd_weights_at_steps,
                                          induced_weights, matched_steps, newton_weights_per_step, probe_set,
                                          similarity_grid)
from icl_gd.regression.conditioning import ConditionedTaskConfig
from icl_gd.regression.baselines import GDPredictor, LeastSquaresPredictor
from icl_gd.regression.study import RegressionTaskConfig
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask
from icl_gd.studies.which_algorithm import AlgorithmRun, compare_layers, model_per_layer


@pytest.mark.parametrize("check", IDENTITY_CHECKS, ids=lambda c: c.name)
def test_identities_hold_in_float64(check):
    # Catches a wrong Newton recursion or α, a preconditioner applied on the wrong side, an off-by-one in the
    # closed form's step count: each identity is against an independent closed form or loop.
    result = check.run()
    assert result.passed, result


def test_float32_tokens_give_float64_quality_predictions():
    # The predictors compute in float64 whatever the tokens' dtype: float32 tokens of a full-rank task give least
    # squares to float32 round-off, returned as float32 (catches a predictor iterating in the tokens' dtype).
    task = ConcatTokenTask(LinearRegressionTask(d=5, n_context=20))
    _, tokens = task.batch_tokens(64, seed=1, stream=Stream.TEST, dtype=torch.float32)
    layout = task.layout
    newton = NewtonPredictor(layout, 40)(tokens)
    assert newton.dtype == torch.float32
    torch.testing.assert_close(newton, LeastSquaresPredictor(layout)(tokens.double()).float(), rtol=1e-5, atol=1e-5)
    pgd = PreconditionedGDPredictor(layout, Preconditioner(torch.eye(5), (3.0, 4.0)))(tokens)
    torch.testing.assert_close(pgd, GDPredictor(layout, [3.0, 4.0])(tokens), rtol=1e-6, atol=1e-6)


def test_newton_refuses_one_dimensional_inputs():
    x, y = torch.randn(2, 5, 1, dtype=torch.float64), torch.randn(2, 5, 1, dtype=torch.float64)
    with pytest.raises(ConfigError, match="d ≥ 2"):
        newton_weights_per_step(x, y, 3)


def test_induced_weights_and_matching_on_known_values():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(7, 2, 4, generator=gen, dtype=torch.float64)
    q = torch.randn(7, 9, 4, generator=gen, dtype=torch.float64)
    # Exact for a linear predictor (catches a transposed fit).
    torch.testing.assert_close(induced_weights(q @ W.transpose(1, 2), q), W)
    with pytest.raises(ConfigError, match="at least d"):
        induced_weights(q[:, :3] @ W.transpose(1, 2), q[:, :3])
    # A layer equal to step 2 of an algorithm has similarity 1 there and is matched to it; a negated layer is -1.
    algo = [torch.randn(7, 9, generator=gen, dtype=torch.float64) for _ in range(3)]
    grid = similarity_grid([algo[2], -algo[0]], algo)
    assert grid[0, 2].item() == pytest.approx(1.0) and grid[1, 0].item() == pytest.approx(-1.0)
    assert matched_steps(grid, (5, 10, 20))[0] == 20


def test_a_constructed_gd_stack_is_matched_to_its_own_step_counts():
    # K Prop. 1 layers at the fixed step η are K GD steps at η: layer k must be matched to exactly k steps with
    # SimE = SimW = 1 (catches an off-by-one between layers and steps, the sign convention, a query laid out wrong
    # in the replicated probe tokens).
    K, eta = 3, 2.5
    task = LinearRegressionTask(d=4, n_context=12)
    probe = probe_set(task, n_contexts=40, n_queries=6, seed=3, device="cpu")
    layout = ConcatLayout(4, 1)
    model = gd_model(4, 1, 12, [eta] * K, dtype=torch.float64)
    predictions = model_per_layer(model, probe, layout)
    steps = (1, 2, 3, 4, 6)
    run = AlgorithmRun(steps, gd_weights_at_steps(probe.x, probe.y, eta, steps))
    metrics, rows = compare_layers(predictions, probe, {"gd": run, "gdpp": run})
    assert metrics["matched_steps_gd"] == [1, 2, 3]
    assert metrics["sim_errors_gd"] == pytest.approx([1.0] * K, abs=1e-9)
    assert metrics["sim_weights_gd"] == pytest.approx([1.0] * K, abs=1e-9)
    assert metrics["loss_gd_matched"] == pytest.approx(metrics["loss_trained_per_layer"], rel=1e-9)
    assert len(rows) == K * len(steps) * 2 and sum(r["matched"] for r in rows) == 2 * K


def test_kappa_one_is_the_papers_task_and_kappa_sets_the_condition_number():
    # κ = 1 draws bit-identical batches to the shared task config (catches a changed default task).
    plain, kappa1 = RegressionTaskConfig().build(), ConditionedTaskConfig().build()
    assert torch.equal(plain.sample(8, 0).x, kappa1.sample(8, 0).x)
    task = ConditionedTaskConfig(kappa=20.0).build()
    cov = torch.tensor(task.inputs.covariance, dtype=torch.float64)
    eig = torch.linalg.eigvalsh(cov)
    assert (eig[-1] / eig[0]).item() == pytest.approx(20.0) and cov.trace().item() == pytest.approx(10 / 12)
    with pytest.raises(ConfigError, match="at least 1"):
        ConditionedTaskConfig(kappa=0.5)


def test_tiny_study_run_writes_layers_metrics_and_figures(tmp_path):
    from icl_gd.studies import run as run_study

    out = tmp_path / "run"
    run_study("which-algorithm", out, steps=10, seeds=1, threads=1, overrides=[
        "layers=2", "n_contexts=30", "n_queries=10", "n_tune=128", "n_test=64", "eval_every=15", "batch_size=64",
        "newton_steps=3", "gd_steps=1,2,4", "tuned_steps=3"])
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    for name in ("newton", "gd", "gdpp", "pgd"):
        assert len(mean[f"matched_steps_{name}"]) == 2
    header = (out / "layers.csv").read_text().splitlines()[0]
    assert header == "seed,layer,algorithm,steps,sim_errors,sim_weights,loss_algorithm,loss_layer,matched"
    assert (out / "figures" / "matched_steps.png").exists() and (out / "figures" / "loss_per_layer.png").exists()
