"""Irie et al.'s Table 1 split (their print_predictive_power.py), attention per key of each phase, and the continual
counterfactual: a layer's attention restricted to the first phase's keys."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_gd.dual.analysis import (TABLE1_SPLITS, AnalysisConfig, TheirScoreTotals, analyse, attention_per_key,
                                  restricted_accuracies, table1_metrics, table1_split)
from icl_gd.studies.dual_form import table1_rows
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.settings import LAYERS, accuracy, ClassifierTrainingConfig, train_setting
from icl_gd.dual.removal import UnitSelection, keys_removed, removal_delta, restriction_delta
from icl_gd.dual.store_reader import open_store
from icl_gd.dual.layer import dual_layer

TASKS = TaskPairConfig(dataset="digits", train_examples=50).build()
# weight decay on: restricting to no key must then give the initial weights times decay's shrinkage, not W_0
TINY = ClassifierTrainingConfig(hidden=8, epochs=2, steps=None, batch_size=25, weight_decay=1e-3)


def test_table1_split_counts_as_their_match_tracker():
    # 4 correct queries (votes right on 3), 4 misclassified: vote = wrong output on 2, = target on 1, neither on 1
    labels = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    preds = np.array([0, 1, 2, 3, 9, 9, 9, 9])
    votes = np.array([0, 1, 2, 8, 9, 9, 6, 1])
    split = table1_split(votes, preds, labels)
    assert split == {"correct": 0.75, "misclassified_output": 0.5, "misclassified_target": 0.25}


def test_table1_split_is_nan_for_an_empty_split():
    labels = np.arange(3)
    split = table1_split(labels.copy(), labels.copy(), labels)
    assert split["correct"] == 1.0
    assert np.isnan(split["misclassified_output"]) and np.isnan(split["misclassified_target"])


def test_attention_per_key_is_one_for_attention_by_count_and_scales_with_it():
    units = np.array([30, 10])
    by_task = np.array([[3.0, 1.0], [6.0, 6.0]])  # query 0 attends by count; query 1 gives task 1 3x its share
    out = attention_per_key(by_task, by_task.sum(1), units, [0, 1])
    np.testing.assert_allclose(out["attention_per_key_task0"], np.mean([1.0, (6 / 30) / (12 / 40)]))
    np.testing.assert_allclose(out["attention_per_key_task1"], np.mean([1.0, (6 / 10) / (12 / 40)]))


@pytest.fixture(scope="module")
def continual(tmp_path_factory):
    store = tmp_path_factory.mktemp("continual")
    trained = train_setting(TINY, "continual", TASKS, seed=0, store=store, device=torch.device("cpu"))
    store = open_store(trained.store)
    return trained, [dual_layer(store[name]) for name in LAYERS]


def test_restricting_to_every_key_is_the_trained_model(continual):
    trained, layers = continual
    n_steps = layers[0].n_steps
    out = restricted_accuracies(trained, trained.dual_form(), n_steps, "r")
    for t in trained.tasks:
        full = accuracy(trained.model, t)
        assert all(out[f"r.{name}.task{t.index}_accuracy"] == full for name in (*LAYERS, "all"))


def test_restricting_to_no_key_is_the_initial_weights(continual):
    trained, layers = continual
    for module, layer in zip(trained.model.layers, layers):
        dW, db = restriction_delta(layer, 0)
        with keys_removed([(module, dW, db)]):
            np.testing.assert_allclose(module.weight.detach().numpy(), layer.initial_scale_w * layer.initial_weight,
                                       rtol=0, atol=1e-10)
            np.testing.assert_allclose(module.bias.detach().numpy(), layer.initial_scale_b * layer.initial_bias,
                                       rtol=0, atol=1e-10)
            restricted = accuracy(trained.model, trained.tasks[0])
        assert layer.initial_scale_w < 1  # weight decay shrank W_0: the restriction is not plain W_0
        saved = module.weight.detach().clone(), module.bias.detach().clone()
        with torch.no_grad():  # the same model with this layer at the (shrunk) initial weights, set directly
            module.weight.copy_(torch.as_tensor(layer.initial_scale_w * layer.initial_weight))
            module.bias.copy_(torch.as_tensor(layer.initial_scale_b * layer.initial_bias))
        try:
            assert accuracy(trained.model, trained.tasks[0]) == restricted
        finally:
            with torch.no_grad():
                module.weight.copy_(saved[0])
                module.bias.copy_(saved[1])


def test_first_phase_keys_are_task0s_keys_in_continual(continual):
    trained, layers = continual
    for layer in layers:
        by_step = restriction_delta(layer, trained.phase_starts[1])
        by_task = removal_delta(layer, UnitSelection(tasks=(1,)))
        np.testing.assert_allclose(by_step[0], by_task[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(by_step[1], by_task[1], rtol=0, atol=1e-12)


def test_analyse_writes_table1_and_the_counterfactual(continual):
    trained, _ = continual
    analysis = analyse(AnalysisConfig(n_queries=40, removals=False), trained, TASKS)
    m = analysis.metrics
    for name in LAYERS:
        split = table1_split(analysis.votes[LAYERS.index(name)], analysis.query_prediction, analysis.query_label)
        for key in TABLE1_SPLITS:
            np.testing.assert_equal(m[f"table1.{name}.{key}"], split[key])
        assert {f"{name}.attention_per_key_task0", f"{name}.attention_per_key_task1"} <= set(m)
    assert m["table1.n_correct"] + m["table1.n_misclassified"] == 80
    for name in (*LAYERS, "all"):
        assert 0 <= m[f"restrict_phase1.{name}.task0_accuracy"] <= 1
    rows = table1_rows("continual", m)
    assert len(rows) == 18 and {r["split"] for r in rows} == set(TABLE1_SPLITS)


def test_table1_metrics_split_per_task_only_for_several_tasks():
    labels = np.array([0, 1, 2, 3, 4, 5])
    preds = np.array([0, 1, 9, 3, 9, 5])
    votes = np.array([0, 7, 2, 3, 9, 5])
    task = np.array([0, 0, 0, 1, 1, 1])
    one = table1_metrics("hidden", votes, preds, labels, task, [0])
    assert set(one) == {f"table1.hidden.{k}" for k in TABLE1_SPLITS}  # one task: no per-task keys
    both = table1_metrics("hidden", votes, preds, labels, task, [0, 1])
    assert both["table1.hidden.correct"] == 0.75  # 3 of the 4 correct queries
    assert both["table1.hidden.correct.task0"] == 0.5 and both["table1.hidden.correct.task1"] == 1.0
    key = "table1.hidden.{}.task{}".format
    assert both[key("misclassified_target", 0)] == 1.0 and both[key("misclassified_output", 0)] == 0.0
    assert both[key("misclassified_output", 1)] == 1.0 and both[key("misclassified_target", 1)] == 0.0


def test_their_score_vote_sums_abs_k_dot_q_without_the_bias_offset_per_class(continual):
    trained, layers = continual
    layer = layers[1]  # hidden: keys are post-ReLU, so k·q + 1 and k·q order classes differently
    rng = np.random.default_rng(0)
    q = rng.normal(size=(5, int(layer.store.info["in_features"])))
    C = trained.model.output.out_features
    theirs = TheirScoreTotals(q, C)
    keys, labels = [], []
    for block in layer.blocks(dtype="float32"):
        theirs.add(block)
        keys.append(np.array(block.key, dtype=np.float64))
        labels.append(np.array(block.label))
    keys, labels = np.concatenate(keys), np.concatenate(labels)
    dense = np.abs(q @ keys.T)  # (5, units), float64
    expected = np.stack([dense[:, labels == c].sum(1) for c in range(C)], 1)
    np.testing.assert_allclose(theirs.by_class(), expected, rtol=1e-5)
    with_offset = np.stack([np.abs(q @ keys.T + 1)[:, labels == c].sum(1) for c in range(C)], 1)
    assert not np.allclose(theirs.by_class(), with_offset, rtol=1e-3)  # the +1 is not in it


def test_analyse_writes_table1_by_their_score_and_per_task(continual):
    trained, _ = continual
    m = analyse(AnalysisConfig(n_queries=40, removals=False), trained, TASKS).metrics
    for name in LAYERS:
        for key in TABLE1_SPLITS:
            assert np.isfinite(m[f"table1_their_score.{name}.correct"])
            for t in (0, 1):
                assert f"table1.{name}.{key}.task{t}" in m and f"table1_their_score.{name}.{key}.task{t}" in m
    rows = table1_rows("continual", m)
    assert len(rows) == 18 and {r["score"] for r in rows} == {"|k·q + 1|", "|k·q|"}
    old = {k: v for k, v in m.items() if not k.startswith("table1_their_score.")}
    assert len(table1_rows("continual", old)) == 9  # a run saved before the their-score vote still tabulates
