"""Blocked scoring equals dense scoring; the last layer's contributions add up to the logit; key removal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_gd.constructions.dual_form import DualCase, train_recorded
from icl_gd.dual.scan import (
    score_queries,
)
from icl_gd.dual.layer import dual_layer
from icl_gd.core.errors import ConfigError
from icl_gd.dual.removal import UnitSelection, keys_removed, removal_delta
from icl_gd.dual.analysis import vote, vote_agreement
from icl_gd.dual.form import DualForm
from icl_gd.dual.settings import LAYERS
from oracles import dense_scores


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_recorded(DualCase(epochs=3, n_examples=40, batch_size=8), tmp_path_factory.mktemp("q"))


def _queries(run):
    x = run.inputs[:7]
    batch = run.dual_form().inputs(x)
    return batch.logits, [batch.query(n) for n in LAYERS], [batch.readout(n) for n in LAYERS]


@pytest.mark.parametrize("name,index", [("input", 0), ("hidden", 1), ("output", 2)])
def test_blocked_scoring_equals_dense(run, name, index):
    _, inputs, readouts = _queries(run)
    layer = dual_layer(run.store[name])
    k = 5
    s = score_queries(layer, inputs[index], readouts[index], k=k, n_classes=3, n_tasks=1, n_epochs=3,
                      n_examples=40, block_rows=7, dtype=torch.float64)
    attention, contribution, prov = dense_scores(layer, inputs[index], readouts[index])
    np.testing.assert_allclose(s.attention_total, attention.sum(0), rtol=1e-12)
    np.testing.assert_allclose(s.contribution_total, contribution.sum(0), rtol=1e-10, atol=1e-12)
    for top, matrix in ((s.attention_top, attention), (s.proponents, contribution), (s.opponents, -contribution)):
        expected = -np.sort(-matrix, axis=0)[:k].T
        np.testing.assert_allclose(np.abs(top.score), np.abs(expected), rtol=1e-12)
        np.testing.assert_array_equal(top.example, prov["example"][top.row])
        np.testing.assert_array_equal(top.epoch, prov["epoch"][top.row])
    p = attention / attention.sum(0)
    np.testing.assert_allclose(s.entropy, -(p * np.log(p)).sum(0), rtol=1e-10)
    n_units = attention.shape[0]
    assert np.all((s.effective_keys >= 1) & (s.effective_keys <= n_units))  # exp(entropy) of a distribution
    for by, column in ((s.attention_by_class, "label"), (s.attention_by_epoch, "epoch"), (s.attention_by_task, "task")):
        groups = by.shape[1]
        dense = np.stack([attention[prov[column] == g].sum(0) for g in range(groups)], 1)
        np.testing.assert_allclose(by, dense, rtol=1e-12, atol=1e-14)
    dense_te = np.stack([np.stack([attention[(prov["task"] == t) & (prov["epoch"] == e)].sum(0) for e in range(3)], 1)
                         for t in range(1)], 1)
    np.testing.assert_allclose(s.attention_by_task_epoch, dense_te, rtol=1e-12, atol=1e-14)
    dense_ex = np.stack([contribution[prov["example"] == e].sum(0) for e in range(40)], 1)
    np.testing.assert_allclose(s.contribution_by_example, dense_ex, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.attention_by_class.sum(1), s.attention_total, rtol=1e-12)


def test_float32_scoring_close_to_float64(run):
    _, inputs, readouts = _queries(run)
    layer = dual_layer(run.store["hidden"])
    s32 = score_queries(layer, inputs[1], readouts[1], n_classes=3, n_epochs=3, block_rows=16)
    s64 = score_queries(layer, inputs[1], readouts[1], n_classes=3, n_epochs=3, dtype=torch.float64)
    np.testing.assert_allclose(s32.attention_by_class, s64.attention_by_class, rtol=1e-5)
    top32, top64 = s32.attention_top, s64.attention_top
    np.testing.assert_allclose(top32.score[:, 0], top64.score[:, 0], rtol=1e-5)
    # The same unit wins wherever float32 can tell the float64 top two apart (a near-tie may go either way).
    clear = np.abs(top64.score[:, 0] - top64.score[:, 1]) > 1e-5 * np.abs(top64.score[:, 0])
    assert clear.sum() >= len(clear) - 1
    np.testing.assert_array_equal(top32.row[clear, 0], top64.row[clear, 0])


def test_bfloat16_products_are_close_to_float32(run):
    _, inputs, readouts = _queries(run)
    layer = dual_layer(run.store["hidden"])
    s32 = score_queries(layer, inputs[1], readouts[1], n_classes=3, n_epochs=3, block_rows=16)
    bf16 = score_queries(layer, inputs[1], readouts[1], n_classes=3, n_epochs=3, block_rows=16,
                         matmul_dtype=torch.bfloat16)
    # bfloat16 keeps 8 mantissa bits: totals agree to about 1%, and the fast path really ran (not identical).
    np.testing.assert_allclose(bf16.attention_by_class, s32.attention_by_class, rtol=2e-2)
    np.testing.assert_allclose(bf16.attention_total, s32.attention_total, rtol=2e-2)
    assert not np.array_equal(bf16.attention_total, s32.attention_total)
    with pytest.raises(ConfigError, match="matmul_dtype"):
        score_queries(layer, inputs[1], readouts[1], n_classes=3, n_epochs=3, matmul_dtype=torch.int8)


def test_output_layer_contributions_sum_to_predicted_logit(run):
    logits, inputs, readouts = _queries(run)
    layer = dual_layer(run.store["output"])
    s = score_queries(layer, inputs[2], readouts[2], n_classes=3, n_epochs=3, dtype=torch.float64)
    pred = logits.argmax(1).numpy()
    initial = layer.initial_scale_w * inputs[2] @ layer.initial_weight.T + layer.initial_scale_b * layer.initial_bias
    np.testing.assert_allclose(s.contribution_total + initial[np.arange(7), pred],
                               logits.numpy()[np.arange(7), pred], rtol=1e-10)
    np.testing.assert_array_equal(readouts[2], np.eye(3)[pred])


def test_vote_functions():
    by_class = np.array([[1.0, 3.0, 2.0], [5.0, 0.0, 1.0], [0.0, 0.0, 9.0]])
    np.testing.assert_array_equal(vote(by_class), [1, 0, 2])
    assert vote_agreement(by_class, np.array([1, 0, 0]), np.array([2, 0, 2])) == (2 / 3, 2 / 3)


def test_removing_every_key_leaves_scaled_initial_weights(run):
    for name, module in zip(run.store, run.modules):
        layer = dual_layer(run.store[name])
        dW, db = removal_delta(layer, UnitSelection())
        W = module.weight.detach().numpy()
        np.testing.assert_allclose(W - dW, layer.initial_scale_w * layer.initial_weight, rtol=0, atol=1e-13)
        np.testing.assert_allclose(module.bias.detach().numpy() - db,
                                   layer.initial_scale_b * layer.initial_bias, rtol=0, atol=1e-13)


def test_removal_by_parts_adds_up_and_restores_exactly(run):
    layer = dual_layer(run.store["output"])
    total, _ = removal_delta(layer, UnitSelection())
    parts = sum(removal_delta(layer, UnitSelection(classes=(c,)))[0] for c in range(3))
    np.testing.assert_allclose(parts, total, rtol=0, atol=1e-13)
    by_epoch = sum(removal_delta(layer, UnitSelection(epochs=(e,)))[0] for e in range(3))
    np.testing.assert_allclose(by_epoch, total, rtol=0, atol=1e-13)
    examples = sum(removal_delta(layer, UnitSelection(examples=(e,)))[0] for e in range(40))
    np.testing.assert_allclose(examples, total, rtol=0, atol=1e-13)
    early, _ = removal_delta(layer, UnitSelection(steps=(0, 5)))
    late, _ = removal_delta(layer, UnitSelection(steps=(5, 10**9)))
    np.testing.assert_allclose(early + late, total, rtol=0, atol=1e-13)
    x = run.inputs
    before = run.model(x).detach().clone()
    dW, db = removal_delta(layer, UnitSelection(classes=(0,)))
    with keys_removed([(run.modules[2], dW, db)]):
        during = run.model(x).detach()
    after = run.model(x).detach()
    assert torch.equal(before, after)
    assert (during - before).abs().max() > 1e-3
    # Removing class 0's patterns from the read-out lowers the class-0 logit relative to the others on average.
    assert ((during[:, 0] - during[:, 1:].mean(1)) < (before[:, 0] - before[:, 1:].mean(1))).float().mean() > 0.5


def test_scoring_errors(run):
    _, inputs, readouts = _queries(run)
    layer = dual_layer(run.store["output"])
    with pytest.raises(ConfigError, match=r"queries must be \(nq, 8\)"):
        score_queries(layer, inputs[0], readouts[2])
    with pytest.raises(ConfigError, match=r"readouts must be \(7, 3\)"):
        score_queries(layer, inputs[2], readouts[1])
    with pytest.raises(ConfigError, match="k must be positive"):
        score_queries(layer, inputs[2], readouts[2], k=0)
    with pytest.raises(ConfigError, match="classes id 2 is outside 0..1"):
        score_queries(layer, inputs[2], readouts[2], n_classes=2, n_epochs=3)
    with pytest.raises(ConfigError, match="n_examples=10"):
        score_queries(layer, inputs[2], readouts[2], n_classes=3, n_epochs=3, n_examples=10)
    with pytest.raises(ConfigError, match="not used"):
        DualForm(run.store, run.model, {"input": torch.nn.Linear(2, 2)}).inputs(run.inputs[:2])
