"""The two-task set-up, training in each setting, and the analysis summaries over runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icl_gd.dual.datasets import ImageDataset
from icl_gd.dual import classifier
from icl_gd.dual.analysis import Analysis, AnalysisConfig, Queries, analyse
from icl_gd.studies.dual_form import headline, verification_table, vote_table
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.settings import ClassifierTrainingConfig, phases, tasks_in, train_setting, training_set
from icl_gd.dual.store_reader import open_store
from icl_gd.dual.verification import DualVerification
from icl_gd.core.errors import ConfigError

TASKS = TaskPairConfig(dataset="digits", train_examples=50).build()
TINY = ClassifierTrainingConfig(hidden=8, epochs=2, steps=None, batch_size=25)


def test_task_pair_shares_one_head_and_one_id_space():
    first, second = TASKS
    assert (first.label_offset, second.label_offset) == (0, 10)
    assert (first.id_offset, second.id_offset) == (0, 50)
    assert first.n_train == second.n_train == 50 and len(first.data.test_y) == 359
    assert second.data.name == "permuted-digits"
    np.testing.assert_array_equal(np.sort(second.data.train_x, 1), np.sort(first.data.train_x, 1))
    assert not np.array_equal(second.data.train_x, first.data.train_x)
    data = training_set(TASKS, torch.device("cpu"))
    np.testing.assert_array_equal(data.example.numpy(), np.arange(100))
    np.testing.assert_array_equal(data.y.numpy()[50:], second.data.train_y + 10)
    np.testing.assert_array_equal(data.task.numpy(), np.repeat([0, 1], 50))


def test_second_task_of_another_size_is_a_config_error(monkeypatch):
    big = ImageDataset("mnist-subset", np.zeros((3, 784)), np.zeros(3, int), np.zeros((2, 784)), np.zeros(2, int),
                       (28, 28), 10)
    real = classifier.load_dataset
    monkeypatch.setattr(classifier, "load_dataset", lambda name, d: big if name == "mnist-subset" else real(name, d))
    with pytest.raises(ConfigError, match="784 pixels but dataset digits has 64"):
        TaskPairConfig(dataset="digits", second_task="mnist-subset").build()


def test_phases_of_each_setting():
    first, second = TASKS
    assert phases("single", TASKS) == [(first,)] and tasks_in("single", TASKS) == (first,)
    assert phases("joint", TASKS) == [(first, second)] and tasks_in("joint", TASKS) == (first, second)
    assert phases("continual", TASKS) == [(first,), (second,)] and tasks_in("continual", TASKS) == (first, second)


def test_continual_training_records_task0_then_task1(tmp_path):
    trained = train_setting(TINY, "continual", TASKS, seed=0, store=tmp_path, device=torch.device("cpu"))
    assert trained.model.output.out_features == 20 and trained.n_epochs == 4
    rows = open_store(tmp_path)["hidden"].table("rows")
    task, epoch, label = rows.column("task"), rows.column("epoch"), rows.column("label")
    assert rows.rows == 2 * 2 * 50  # two phases × two epochs × 50 images
    assert set(epoch[task == 0].tolist()) == {0, 1} and set(epoch[task == 1].tolist()) == {2, 3}
    assert label[task == 0].max() < 10 <= label[task == 1].min()
    acc = trained.accuracies
    assert set(acc) == {"task0_accuracy_after_task0", "task0_accuracy", "task1_accuracy", "test_accuracy"}
    assert acc["test_accuracy"] == pytest.approx((acc["task0_accuracy"] + acc["task1_accuracy"]) / 2)
    epochs = [r for r in trained.curves if r["metric"] == "test_accuracy_task1"]
    assert [r["step"] for r in epochs] == [2, 4, 6, 8]  # two steps per epoch, both tasks scored after each
    assert all(r["seed"] == 0 and r["model"] == "continual" for r in trained.curves)


def test_steps_cap_is_per_phase(tmp_path):
    capped = ClassifierTrainingConfig(hidden=8, epochs=2, steps=3, batch_size=10)
    trained = train_setting(capped, "continual", TASKS, seed=1, store=tmp_path, device=torch.device("cpu"))
    store = open_store(tmp_path)
    assert store["output"].info["n_steps"] == 2 * 3
    assert trained.curves[-1]["step"] == 6


def test_analyse_on_a_joint_run(tmp_path):
    trained = train_setting(TINY, "joint", TASKS, seed=0, store=tmp_path, device=torch.device("cpu"))
    analysis = analyse(AnalysisConfig(n_queries=5, n_figure_queries=1, top_k=2), trained, TASKS)
    m = analysis.metrics
    assert m["verify_max_rel_error"] < 1e-10  # float64 keys on digits
    assert m["output.n_keys"] == 2 * 100
    assert 0 < m["output.attention_share_task1"] < 1
    assert [r["removed"] for r in analysis.removal_rows] == ["task0", "task1", "first_epoch", "last_epoch"]
    assert analysis.query_prediction.shape == (10,)
    assert all(c.shape == (10, 20) for c in analysis.class_attention)
    np.testing.assert_allclose(analysis.class_attention[1].sum(1), 1)
    # figure queries: per task, the first correct and the first misclassified query (their plot_attention.py)
    info = analysis.figure_query_info
    assert [(q.task, q.kind) for q in info] == sorted({(q.task, q.kind) for q in info},
                                                      key=lambda tk: (tk[0], tk[1] != "correct"))
    for q in info:
        same = [i for i in range(10) if (analysis.query_prediction[i] == analysis.query_label[i]) == q.correct
                and i // 5 == q.task]
        assert q.index == same[0] and q.label == analysis.query_label[q.index]
    nf = len(info)
    assert 1 <= nf <= 4 and analysis.figure_queries.shape == (nf, 64)
    assert [t.shape for t in analysis.figure_top_examples] == [(nf, 2)] * 3
    assert all(t.max() < 100 for t in analysis.figure_top_examples)


def test_queries_are_the_first_test_images_of_each_task():
    q = Queries.first(TASKS, 4)
    np.testing.assert_array_equal(q.y, np.concatenate([TASKS[0].data.test_y[:4], TASKS[1].data.test_y[:4] + 10]))
    np.testing.assert_array_equal(q.task, [0] * 4 + [1] * 4)
    np.testing.assert_array_equal(q.x[4:], TASKS[1].data.test_x[:4])


def _analysis(vote: float, error: float) -> Analysis:
    metrics = {f"{layer}.{key}": vote for layer in ("input", "hidden", "output")
               for key in ("vote_agrees_with_prediction", "vote_agrees_with_label", "effective_keys")}
    verification = [DualVerification(layer, True, error, error, 0.0, 0.0, np.zeros(1))
                    for layer in ("input", "hidden", "output")]
    return Analysis(metrics, verification, [], np.zeros(0), np.zeros(0), [np.zeros(0)] * 3, [], np.zeros(0), [], [])


def test_tables_mean_votes_and_max_errors_over_runs():
    analyses = {"joint": [_analysis(0.2, 1e-16), _analysis(0.6, 3e-16)], "single": [_analysis(1.0, 0.0)]}
    votes = vote_table(analyses)
    assert [(r["setting"], r["layer"]) for r in votes][:4] == [
        ("joint", "input"), ("joint", "hidden"), ("joint", "output"), ("single", "input")]
    assert votes[0]["vote_agrees_with_label"] == pytest.approx(0.4) and votes[3]["effective_keys"] == 1.0
    errors = verification_table(analyses)
    assert errors[0]["weight_max_rel_error"] == 3e-16 and errors[0]["output_max_rel_error"] == 0.0
    assert list(errors[0]) == ["setting", "layer", "weight_max_abs_error", "weight_max_rel_error",
                               "output_max_abs_error", "output_max_rel_error"]


def test_headline_takes_the_first_setting_and_the_worst_error():
    metrics = {f"{s}.{k}": v for s, v in (("joint", 0.5), ("single", 0.9))
               for k in ("test_accuracy", "vote_agrees_with_prediction", "vote_agrees_with_label")}
    metrics.update({"joint.verify_max_rel_error": 1e-15, "single.verify_max_rel_error": 4e-15})
    assert headline(metrics, ["joint", "single"]) == {
        "test_accuracy": 0.5, "vote_agrees_with_prediction": 0.5, "vote_agrees_with_label": 0.5,
        "verify_max_rel_error": 4e-15}


def test_shared_head_puts_both_tasks_on_the_same_outputs(tmp_path):
    shared = TaskPairConfig(dataset="digits", train_examples=50, head="shared").build()
    assert (shared[0].label_offset, shared[1].label_offset) == (0, 0)
    assert (shared[0].id_offset, shared[1].id_offset) == (0, 50)
    trained = train_setting(TINY, "joint", shared, seed=0, store=tmp_path, device=torch.device("cpu"))
    assert trained.model.output.out_features == 10
    labels = open_store(tmp_path)["output"].table("rows").column("label")
    assert labels.max() < 10


def test_single_task_one_trains_on_the_second_task(tmp_path):
    trained = train_setting(TINY, "single", TASKS, seed=0, store=tmp_path, device=torch.device("cpu"),
                            single_task=1)
    assert trained.tasks == (TASKS[1],) and set(trained.accuracies) == {"task1_accuracy", "test_accuracy"}
    rows = open_store(tmp_path)["hidden"].table("rows")
    assert set(rows.column("task").tolist()) == {1} and rows.column("example").min() >= 50
    assert trained.model.output.out_features == 20  # stacked head: task 1's labels are 10..19
    with pytest.raises(ConfigError, match="single_task"):
        TaskPairConfig(dataset="digits", single_task=2)


def test_epochs_none_runs_as_many_epochs_as_the_step_cap_needs(tmp_path):
    # 50 images per task, batch 20: 3 mini-batches per epoch; 7 steps need 3 epochs, 4 steps need 2
    config = ClassifierTrainingConfig(hidden=8, epochs=None, steps=7, continual_phase_steps=4, batch_size=20)
    single = train_setting(config, "single", TASKS, seed=0, store=tmp_path / "s", device=torch.device("cpu"))
    assert single.n_epochs == 3 and single.phase_starts == (0,)
    assert open_store(tmp_path / "s")["output"].info["n_steps"] == 7
    continual = train_setting(config, "continual", TASKS, seed=0, store=tmp_path / "c", device=torch.device("cpu"))
    assert continual.n_epochs == 4 and continual.phase_starts == (0, 4)
    rows = open_store(tmp_path / "c")["output"].table("rows")
    step, task, epoch = rows.column("step"), rows.column("task"), rows.column("epoch")
    assert step.max() == 7 and set(step[task == 1].tolist()) == {4, 5, 6, 7}
    assert set(epoch[task == 1].tolist()) == {2, 3}  # task 1's epochs follow task 0's two
    with pytest.raises(ConfigError, match="epochs=none needs a step cap"):
        ClassifierTrainingConfig(epochs=None, steps=None)
