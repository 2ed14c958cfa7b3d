"""Garg et al.'s curriculum (icl_gd.regression.compare.curriculum) and the learning-rate warm-up (training.warmup_factor)."""

from __future__ import annotations

import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.compare.curriculum import CurriculumConfig, CurriculumTokenTask
from icl_gd.regression.compare.gpt import (
    EveryPrefix,
    EveryPrefixTokenTask,
    GPTConfig,
    GPTRegressor,
)
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.training import TrainConfig, warmup_factor


def garg_task(d: int = 3, n: int = 8) -> LinearRegressionTask:
    return LinearRegressionTask(d=d, n_context=n, inputs=NormalInputs())


def test_schedule_follows_its_declaration():
    # the claims' plan: 20 000 steps, stages of 10% = Garg et al.'s 2000-step interval; d 1 -> 3 by 1, N 3 -> 8 by 2
    stages = CurriculumConfig().schedule(3, 8, 20_000)
    assert stages.interval == 2000
    assert stages.stages() == [(0, 1, 3), (2000, 2, 5), (4000, 3, 7), (6000, 3, 8)]
    assert stages.full_from() == 6000
    assert stages.at(1999) == (1, 3) and stages.at(2000) == (2, 5) and stages.at(19_999) == (3, 8)
    # Garg et al.'s own configuration: 5 -> 20 dimensions by 1, 11 -> 41 points by 2, every 2000 steps
    garg = CurriculumConfig(d_start=5, n_start=11, stage=2000 / 500_000).schedule(20, 41, 500_000)
    assert garg.interval == 2000 and garg.full_from() == 15 * 2000 and garg.at(14 * 2000) == (19, 39)


def test_no_curriculum_is_the_full_task_throughout():
    stages = CurriculumConfig(stage=0).schedule(3, 8, 20_000)
    assert stages.at(0) == (3, 8) and stages.stages() == [(0, 3, 8)]


@pytest.mark.parametrize("bad", [dict(stage=1.5), dict(stage=-0.1), dict(d_start=0), dict(n_increment=-1),
                                 dict(n_start=1.5)])
def test_bad_curriculum_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        CurriculumConfig(**bad)


def test_a_stage_batch_zeroes_the_dead_inputs_and_stops_after_its_points():
    task = garg_task()
    stages = CurriculumConfig().schedule(3, 8, 20_000)
    cur = CurriculumTokenTask(task, curriculum=stages)
    full = EveryPrefixTokenTask(task)
    tokens, targets = cur.train_batch(16, 4, 2500, torch.device("cpu"), torch.float64)  # stage 1: d 2, N 5
    full_tokens, _ = full.train_batch(16, 4, 2500, torch.device("cpu"), torch.float64)
    assert tokens.shape == (16, 2 * 5 + 1, full_tokens.shape[2]) and targets.shape == (16, 6)
    batch = task.sample(16, 4, 2500, Stream.TRAIN, "cpu", torch.float64)
    x = batch.x[:, :6].clone()
    x[..., 2:] = 0
    labels = torch.einsum("bnd,bkd->bn", x, batch.w)  # y = w·x on the two live coordinates only
    torch.testing.assert_close(targets, labels / 6 ** 0.5, rtol=1e-12, atol=1e-12)
    x_slots = tokens[:, 0::2]  # the x tokens: the third input coordinate is zero, the first two are the task's
    assert torch.count_nonzero(x_slots[..., 2]) == 0
    torch.testing.assert_close(x_slots[..., :2], full_tokens[:, 0:11:2, :2], rtol=0, atol=0)


def test_the_full_stage_is_the_plain_task():
    task = garg_task()
    cur = CurriculumTokenTask(task, curriculum=CurriculumConfig().schedule(3, 8, 20_000))
    got = cur.train_batch(8, 1, 6000, torch.device("cpu"), torch.float32)
    want = EveryPrefixTokenTask(task).train_batch(8, 1, 6000, torch.device("cpu"), torch.float32)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_prefix_reads_as_the_start_of_the_full_sequence():
    # what training on fewer points rests on: the causal model's predictions on a prefix are the full one's first
    task = garg_task()
    model = GPTRegressor(GPTConfig(task.d, 1, 2 * task.n_context + 1, 16, 2, 2), seed=3).double()
    tokens, _ = EveryPrefixTokenTask(task).train_batch(4, 0, 0, torch.device("cpu"), torch.float64)
    every = EveryPrefix(model)
    full = every(tokens) * (task.n_context + 1) ** 0.5
    prefix = every(tokens[:, :7]) * 4 ** 0.5
    torch.testing.assert_close(prefix, full[:, :4], rtol=1e-12, atol=1e-12)
    with pytest.raises(ConfigError):
        model(torch.zeros(2, 2 * task.n_context + 2, task.d, dtype=torch.float64))


def test_noisy_tasks_are_refused():
    noisy = LinearRegressionTask(d=3, n_context=8, inputs=NormalInputs(), label_noise=0.1)
    with pytest.raises(ConfigError, match="noiseless"):
        CurriculumTokenTask(noisy, curriculum=CurriculumConfig().schedule(3, 8, 100))


def test_warmup_rises_linearly_then_holds():
    assert [warmup_factor(s, 100, 0.05) for s in range(6)] == [0.2, 0.4, 0.6, 0.8, 1.0, 1.0]
    assert warmup_factor(0, 100, 0.0) == 1.0
    with pytest.raises(ConfigError, match="warmup"):
        TrainConfig(warmup=1.0)


def test_warmup_sets_the_optimisers_rate_during_training(monkeypatch):
    import icl_gd.regression.training as training

    rates: list[float] = []

    class Recording(torch.optim.AdamW):
        def step(self, closure=None):  # the rate the loop set before this step
            rates.append(self.param_groups[0]["lr"])
            return super().step(closure)

    monkeypatch.setattr(training, "make_optimizer", lambda kind, params, config: Recording(params, lr=config.lr))
    task = CurriculumTokenTask(garg_task(), curriculum=None)
    model = EveryPrefix(GPTRegressor(GPTConfig(3, 1, 17, 8, 1, 1), seed=0))
    training.train([model], task, TrainConfig(steps=8, batch_size=4, lr=1e-3, grad_clip=None, eval_every=8,
                                              warmup=0.5), [0])
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3])


def test_the_divergence_check_scores_the_query_prediction_of_a_training_view(tmp_path):
    # EveryPrefix's output is every prefix's prediction (B, N+1); the check must score the wrapped model's query
    # prediction (B, d_y), as the study's evaluation does. A read-out of zeros predicts 0: exactly the zero
    # predictor's loss, which is not divergence; scored through the view it broadcast against the targets.
    import warnings

    from icl_gd.core.config import apply_overrides
    from icl_gd.core.errors import ICLGDNotice
    from icl_gd.core.study import RunContext
    from icl_gd.regression.study import RegressionRun
    from icl_gd.studies.foreign_transformer import ForeignTransformerConfig, train_task

    config = apply_overrides(ForeignTransformerConfig(), ["training.steps=1", "batch_size=4", "n_test=64",
                                                          "n_tune=64", "eval_every=1", "width=8", "layers=1"])
    run = RegressionRun(config, RunContext(tmp_path, torch.device("cpu"), progress=False, figures=False),
                        train_task(config))

    def silent(seed: int) -> EveryPrefix:
        view = EveryPrefix(config.model.build(run.layout, seed))
        torch.nn.init.zeros_(view.model.read_out.weight)
        torch.nn.init.zeros_(view.model.read_out.bias)
        view.model.read_out.weight.requires_grad_(False)
        view.model.read_out.bias.requires_grad_(False)
        return view

    with warnings.catch_warnings():
        warnings.simplefilter("error", ICLGDNotice)
        run.train_seeds("gpt", silent, None, predictor=lambda m: m.model)
    assert not run._diverged
