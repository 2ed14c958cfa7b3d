"""The spotlights study's ground truth: the LDS code, the retraining loop, the refusal without dattri."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.dual.classifier import ClassificationTask
from icl_gd.dual.datasets import load_digits_dataset
from icl_gd.dual.lds import lds, random_subsets, retrain, subset_targets, top_examples, without
from icl_gd.dual.settings import ClassifierTrainingConfig, train_setting


def _one_gd_step_model(n: int = 60, d: int = 5, nq: int = 200, eta: float = 0.1):
    """A tiny model whose retraining ground truth is known exactly: a bias-free linear layer from W = 0, one
    full-batch GD step on the summed loss ½ Σ (W x_i - y_i)², so W = η Σ_{i∈S} y_i x_iᵀ and the query's output is
    Σ_{i∈S} τ_i with τ_i(q) = η y_i (x_i·q): the dual form's contribution, additive over any subset."""
    rng = np.random.default_rng(0)
    x, y, q = rng.standard_normal((n, d)), rng.standard_normal(n), rng.standard_normal((nq, d))

    def train_targets(keep: np.ndarray, seed: int) -> np.ndarray:
        layer = torch.nn.Linear(d, 1, bias=False, dtype=torch.float64)
        torch.nn.init.zeros_(layer.weight)
        xs, ys = torch.as_tensor(x[keep]), torch.as_tensor(y[keep])
        (0.5 * ((layer(xs)[:, 0] - ys) ** 2).sum()).backward()
        torch.optim.SGD(layer.parameters(), lr=eta).step()
        with torch.no_grad():
            return layer(torch.as_tensor(q))[:, 0].numpy()

    exact = eta * y[None, :] * (q @ x.T)  # (nq, n)
    return train_targets, exact, n


def test_lds_is_one_for_the_exact_attribution_and_about_zero_for_a_random_one():
    """Catches a wrong subset sum (the complement, or another subset's row), a sign flip, ranks taken along the
    wrong axis or a correlation that is not per query: each turns the exact attribution's 1 into something else."""
    train_targets, exact, n = _one_gd_step_model()
    subsets = random_subsets(n, 50, 0.5, seed=0)
    assert subsets.shape == (50, 30) and all(len(set(row)) == 30 for row in subsets)
    truth = subset_targets(train_targets, subsets, seeds=[0, 1])  # (S, nq), retrained, averaged over seeds
    np.testing.assert_allclose(lds(exact, subsets, truth), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lds(-exact, subsets, truth), -1.0, rtol=0, atol=1e-12)
    noise = np.random.default_rng(1).standard_normal(exact.shape)
    random = lds(noise, subsets, truth)
    # Spearman of independent draws over 50 subsets: sd 1/7 per query, 0.01 over 200 queries.
    assert abs(random.mean()) < 0.05 and random.std() < 0.25
    assert np.isnan(lds(np.zeros_like(exact), subsets, truth)).all()  # all tied: no rank correlation, not 0


def test_leave_k_out_sets():
    scores = np.array([0.5, 3.0, -1.0, 3.0, 2.0])
    np.testing.assert_array_equal(top_examples(scores, 3), [1, 3, 4])  # ties: lower index first
    np.testing.assert_array_equal(without(5, [1, 3]), [0, 2, 4])
    with pytest.raises(ConfigError):
        top_examples(scores, 6)


def test_retraining_on_the_full_set_is_the_recorded_training_bit_for_bit(tmp_path):
    """The leave-k-out and LDS retrainings run their own loop (no recorder); on the full set with the training seed
    it must give the recorded model exactly, or a retrained model differs by more than the removed examples."""
    data = load_digits_dataset().first_train(150)
    task = ClassificationTask(0, data, 0, 0)
    config = ClassifierTrainingConfig(hidden=8, epochs=2, batch_size=32, grad_clip=1.0)
    trained = train_setting(config, "single", (task, task), 3, tmp_path / "store", torch.device("cpu"))
    lrs = []
    again = retrain(config, task, np.arange(150), 3, torch.device("cpu"), on_epoch=lambda e, m, lr: lrs.append(lr))
    for a, b in zip(again.parameters(), trained.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert lrs == [config.lr, config.lr * config.lr_decay]
    fewer = retrain(config, task, np.arange(1, 150), 3, torch.device("cpu"))
    assert not torch.equal(fewer.output.weight, trained.model.output.weight)


def test_the_study_refuses_without_dattri_in_one_line_naming_the_extra(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from icl_gd.cli import app

    monkeypatch.setitem(sys.modules, "dattri", None)  # import dattri now raises ImportError
    result = CliRunner().invoke(app, ["run", "spotlights", "--out", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "icl-gd[attribution]" in lines[0], result.output
    assert not (tmp_path / "run" / "store").exists()  # refused before training
