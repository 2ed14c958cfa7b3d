"""docs/authors_check/record_irie.py: the Irie claims' records computed from synthetic output of
irie_ff_attention.py (their MatchTracker counts and logged accuracies, made up here) by hand, with their provenance,
and the committed irie_records.json readable as the authors' values of registered claims."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from icl_gd.claims import CLAIMS
from icl_gd.claims.authors import authors_values

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "authors_check"))

import record_irie  # noqa: E402

PROV = {"repository": "RobertCsordas/linear_layer_as_attention", "commit": "c0a20bf", "versions": "torch 2.13.0",
        "date": "2026-12-04", "driver": "docs/authors_check/irie_ff_attention.py",
        "wall_s": {"train": 200.4, "analysis": 100.2, "total": 300.6}, "threads": 1}


def _layer(pred: list[list[float]], target: list[list[float]]) -> dict:
    return {"vote_matches_pred": pred, "vote_matches_target": target}


# One layer's counts: rows vote matches (no, yes), columns prediction (wrong, right). With 20 misclassified and 80
# correct queries: vote = output for 70 of 80 correct (0.875), 12 of 20 misclassified (0.6), vote = target for 5 of
# 20 misclassified (0.25); the correct column of T equals M's (target = output there).
A = _layer([[8, 10], [12, 70]], [[15, 10], [5, 70]])
# vote = output 60 / 80 (0.75), misclassified 10 / 20 (0.5), target 9 / 20 (0.45): margin 0.05
B = _layer([[10, 20], [10, 60]], [[11, 20], [9, 60]])
# vote = output 78 / 80 (0.975), misclassified 16 / 20 (0.8), target 2 / 20 (0.1): margin 0.7
C = _layer([[4, 2], [16, 78]], [[18, 2], [2, 78]])


def _single(seed: int, layers=(A, B, C), steps: int = 5000, fashion: bool = False) -> dict:
    sets = {"test_fmnist": dict(zip(record_irie.LAYERS, layers))} if fashion else {
        "test_mnist": dict(zip(record_irie.LAYERS, layers)),
        "train_PermutedMNIST": dict(zip(record_irie.LAYERS, (C, C, C)))}
    return {"setup": "single-fashion" if fashion else "single", "seed": seed, "steps": steps, "test_queries": 500,
            "vote_predictive_power": sets, "accuracy": {"5000": {"test_mnist": 0.8}}, "provenance": PROV}


def _joint(seed: int) -> dict:
    sets = {"test_mnist": dict(zip(record_irie.LAYERS, (A, A, A))),
            "test_fmnist": dict(zip(record_irie.LAYERS, (B, C, C)))}
    return {"setup": "joint", "seed": seed, "steps": 5000, "vote_predictive_power": sets,
            "accuracy": {"5000": {"test_mnist": 0.9, "test_fmnist": 0.8}}, "provenance": PROV}


def _continual(seed: int, after_first: float, after_second: float) -> dict:
    acc = {str(s): {"test_mnist": 0.9, "test_fmnist": 0.1} for s in (1000, 2000, 4000, 5000)}
    acc["3000"] = {"test_mnist": after_first, "test_fmnist": 0.1}
    acc["6000"] = {"test_mnist": after_second, "test_fmnist": 0.8}
    return {"setup": "continual", "seed": seed, "steps": 6000, "vote_predictive_power": {}, "accuracy": acc,
            "provenance": PROV}


def test_single_model_table1_by_hand():
    # runs out of seed order: the values follow the seeds
    recs = record_irie.records([_single(2, layers=(C, C, C)), _single(1)])
    correct, wrong = recs["irie-table1-correct"], recs["irie-table1-misclassified"]
    assert correct["seeds"] == wrong["seeds"] == [1, 2]
    # seed 1: min over layers of 0.875, 0.75, 0.975; seed 2: 0.975 in every layer
    assert correct["values"] == pytest.approx([0.75, 0.975])
    # seed 1: min of 0.6 - 0.25, 0.5 - 0.45, 0.8 - 0.1; seed 2: 0.7
    assert wrong["values"] == pytest.approx([0.05, 0.7])
    # all queries whose vote is the output, mean over layers: (82 + 70 + 94) / 300
    assert recs["irie-vote-mean"]["values"][0] == pytest.approx((82 + 70 + 94) / 300)
    assert recs["irie-vote-mean"]["same_setup"] is False and correct["same_setup"] is True
    assert "joint" not in " ".join(recs)


def test_vote_mean_is_the_fashion_models_when_it_was_run():
    recs = record_irie.records([_single(1), _single(1, layers=(C, C, C), fashion=True),
                                _single(2, layers=(A, A, A), fashion=True)])
    assert recs["irie-vote-mean"]["same_setup"] is True
    assert recs["irie-vote-mean"]["values"] == pytest.approx([94 / 100, 82 / 100])
    assert recs["irie-table1-correct-fashion"]["values"] == pytest.approx([0.975, 0.875])
    assert recs["irie-table1-misclassified-fashion"]["values"] == pytest.approx([0.7, 0.35])
    assert recs["irie-table1-correct"]["values"] == pytest.approx([0.75])


def test_joint_pools_the_two_test_sets():
    recs = record_irie.records([_joint(1), _joint(3)])
    value = recs["irie-joint-table1-correct"]["values"]
    # layer 0: A + B -> vote = output for (70 + 60) of 160 correct; layers 1, 2: A + C -> 148 / 160
    assert value == pytest.approx([130 / 160, 130 / 160])
    assert recs["irie-joint-table1-correct"]["seeds"] == [1, 3]


def test_continual_forgetting_is_after_phase_one_minus_after_phase_two():
    recs = record_irie.records([_continual(1, 0.95, 0.60), _continual(2, 0.94, 0.90)])
    assert recs["irie-continual-forgetting"]["values"] == pytest.approx([0.35, 0.04])


def test_provenance_and_wall_times_are_recorded():
    rec = record_irie.records([_single(1), _single(2), _single(3)])["irie-table1-correct"]
    for key in ("commit", "versions", "seeds", "steps", "data", "date", "driver", "setup", "repository"):
        assert rec[key], key
    assert rec["wall_s_per_seed"] == [301, 301, 301] and rec["train_wall_s_per_seed"] == [200, 200, 200]
    assert "|k·q|" in rec["statistic_differs"]


def test_a_shortened_run_is_refused():
    with pytest.raises(SystemExit, match="not their sweep's"):
        record_irie.records([_single(1, steps=30)])


def test_written_records_load_as_authors_values(tmp_path):
    path = tmp_path / "records.json"
    record_irie.write(record_irie.records([_single(1), _single(2), _joint(1), _continual(1, 0.9, 0.5)]), path)
    loaded = authors_values(path)
    assert loaded["irie-table1-correct"].values == pytest.approx((0.75, 0.75))
    assert loaded["irie-continual-forgetting"].values == pytest.approx((0.4,))
    assert loaded["irie-table1-correct"].provenance["seeds"] == [1, 2]


def test_committed_records_are_registered_claims_with_three_seeds():
    path = ROOT / "docs" / "authors_check" / "irie_records.json"
    records = json.loads(path.read_text())
    ids = {c.id for c in CLAIMS}
    for claim_id, rec in records.items():
        assert claim_id in ids, claim_id
        assert len(rec["values"]) == len(rec["seeds"]) == len(rec["wall_s_per_seed"]) >= 3, claim_id
        assert all(0.0 <= abs(v) <= 1.0 for v in rec["values"]), claim_id
