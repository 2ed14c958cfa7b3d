"""The authors' code beside ours (icl_gd.claims.authors): the agreement rule on samples whose interval is
computed here by hand, and the recorded values (authors_values.json) against the registry and their provenance."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from scipy.stats import t

from icl_gd.claims import CLAIMS
from icl_gd.claims.authors import (AUTHORS_VALUES, Agreement, AuthorsValue, agreement, authors_values,
                                  judged_at_other_setups)
from icl_gd.claims.verdict import Verdict
from icl_gd.claims.verdict import Spread
from icl_gd.claims.departures import IRIE, VON_OSWALD

PAPER_OF = {"google-research/self-organising-systems (transformers_learn_icl_by_gd/src)": VON_OSWALD,
            "RobertCsordas/linear_layer_as_attention": IRIE}
RUNTIME = {"google-research/self-organising-systems (transformers_learn_icl_by_gd/src)": "jax ",
           "RobertCsordas/linear_layer_as_attention": "torch "}

ROOT = Path(__file__).resolve().parents[1]
LINEAR = next(c for c in CLAIMS if c.id == "vo-single-loss")  # a metric on the linear scale
LOG = next(c for c in CLAIMS if c.id == "vo-single-controls")  # a ratio: compared on the log scale


def _pooled_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """The rule as the module docstring states it, written out: pooled two-sample t, df = n + m - 2, 95%."""
    n, m = len(a), len(b)
    ma, mb = sum(a) / n, sum(b) / m
    pooled = (sum((v - ma) ** 2 for v in a) + sum((v - mb) ** 2 for v in b)) / (n + m - 2)
    half = t.ppf(0.975, n + m - 2) * math.sqrt(pooled * (1 / n + 1 / m))
    return ma - mb - half, ma - mb + half


def test_agreement_interval_is_the_pooled_t_interval():
    # catches a wrong df (e.g. min(n, m) - 1), an unpooled variance or a 90% quantile: the interval is checked exactly
    ours, theirs = [0.010, 0.013, 0.011, 0.016], [0.012, 0.018, 0.015]
    result = agreement(LINEAR, Spread(tuple(ours)), AuthorsValue(LINEAR.id, tuple(theirs), True))
    assert result.interval == pytest.approx(_pooled_interval(ours, theirs), rel=1e-12)
    assert result.difference == pytest.approx(sum(ours) / 4 - sum(theirs) / 3, rel=1e-12)
    assert result.agreement is (Agreement.AGREES if result.interval[0] <= 0 <= result.interval[1] else Agreement.DIFFERS)


def test_agreement_says_agrees_and_differs_on_either_side_of_the_interval():
    theirs = AuthorsValue(LINEAR.id, (0.0100, 0.0110, 0.0090), True)
    assert agreement(LINEAR, Spread((0.0105, 0.0095, 0.0101)), theirs).agreement is Agreement.AGREES
    # the same spread shifted by five standard deviations on either side
    assert agreement(LINEAR, Spread((0.0155, 0.0145, 0.0151)), theirs).agreement is Agreement.DIFFERS
    assert agreement(LINEAR, Spread((0.0055, 0.0045, 0.0051)), theirs).agreement is Agreement.DIFFERS


def test_a_ratio_claim_is_compared_on_the_log_scale():
    # catches comparing a ratio linearly: geometric samples, ours about 2x theirs
    ours, theirs = (0.08, 0.10, 0.12), (0.04, 0.05, 0.06)
    result = agreement(LOG, Spread(ours, log=True), AuthorsValue(LOG.id, theirs, True))
    logs = [math.log(v) for v in ours], [math.log(v) for v in theirs]
    assert result.difference == pytest.approx(sum(logs[0]) / 3 - sum(logs[1]) / 3, rel=1e-12)
    assert result.interval == pytest.approx(_pooled_interval(*logs), rel=1e-12)
    assert result.agreement is Agreement.DIFFERS


def test_no_interval_no_record_and_other_setups_are_not_verdicts():
    one = AuthorsValue(LINEAR.id, (0.01,), True)
    assert agreement(LINEAR, Spread((0.02,)), one).agreement is Agreement.CANNOT_TELL  # 1 + 1 values: df 0
    one_apart = AuthorsValue(LINEAR.id, (0.03,), True)
    assert agreement(LINEAR, Spread((0.02,)), one_apart).agreement is Agreement.CANNOT_TELL  # beyond the margin
    nan = AuthorsValue(LINEAR.id, (0.01, float("nan")), True)
    assert agreement(LINEAR, Spread((0.01, 0.02)), nan).agreement is Agreement.CANNOT_TELL  # never a silent NaN
    assert agreement(LINEAR, None, AuthorsValue(LINEAR.id, (0.01, 0.02), True)).agreement is Agreement.CANNOT_TELL
    other = AuthorsValue(LINEAR.id, (0.01, 0.011, 0.012), same_setup=False)
    assert agreement(LINEAR, Spread((0.01, 0.011, 0.012)), other).agreement is Agreement.NOT_RUN
    assert agreement(LINEAR, Spread((0.01,)), AuthorsValue(LINEAR.id, (), True)).agreement is Agreement.NOT_RUN
    assert agreement(LINEAR, Spread((0.01,)), None).agreement is Agreement.NOT_RUN


def test_runs_at_other_set_ups_are_judged_by_the_claims_rule_but_never_compared(tmp_path):
    # catches a run at their notebook's length entering the agreement (it would make the two codes differ here),
    # being dropped when the file is read, or judged by another rule than the claim's
    path = tmp_path / "values.json"
    short = {"values": [0.5, 0.6, 0.7], "same_setup": True, "seeds": [0, 1, 2], "steps": 10_000}
    path.write_text(json.dumps({LINEAR.id: {"values": [0.010, 0.011, 0.012], "same_setup": True, "seeds": [0, 1, 2],
                                            "steps": 40_000, "other_setups": [short]}}))
    theirs = authors_values(path)[LINEAR.id]
    (other,) = theirs.other_setups
    assert other.values == (0.5, 0.6, 0.7) and other.same_setup is False  # never at the claim's set-up
    assert other.provenance["steps"] == 10_000 and theirs.provenance["steps"] == 40_000
    assert agreement(LINEAR, Spread((0.0105, 0.0095, 0.0101)), theirs).agreement is Agreement.AGREES
    ((judged, verdict, _),) = judged_at_other_setups(LINEAR, theirs)
    assert judged is other and verdict is Verdict.FAILS  # |gap| 0.5-0.7 against the claim's < 0.02
    assert theirs.as_json()["other_setups"][0]["values"] == [0.5, 0.6, 0.7]
    assert judged_at_other_setups(LINEAR, None) == ()


# ---------------------------------------------------------------------------------------------------- the records
REQUIRED = ("seeds", "steps", "setup", "measured", "driver", "repository", "commit", "versions", "date", "recorded_in")


def test_every_record_names_a_registered_claim_and_carries_its_provenance():
    records = json.loads(AUTHORS_VALUES.read_text())
    registered = {c.id for c in CLAIMS}
    values = authors_values()
    assert values and set(values) == {k for k in records if not k.startswith("_")}
    every = [(claim_id, r) for claim_id, record in values.items() for r in (record, *record.other_setups)]
    for claim_id, record in every:
        assert claim_id in registered, f"{claim_id}: not a registered claim id (renamed or removed?)"
        for key in REQUIRED:
            assert record.provenance.get(key) not in (None, "", []), (claim_id, key)
        assert isinstance(records[claim_id]["same_setup"], bool), claim_id
        assert all(o["same_setup"] is False for o in records[claim_id].get("other_setups", [])), claim_id
        # per-seed values: one per recorded seed, finite; a record compared with ours has at least one
        if record.values:
            assert len(record.values) == len(record.provenance["seeds"]), claim_id
            assert all(math.isfinite(v) for v in record.values), claim_id
        assert record.values or not record.same_setup, f"{claim_id}: same_setup with no value"
        assert re.fullmatch(r"[0-9a-f]{40}", record.provenance["commit"][:40]), (claim_id, "commit")
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", record.provenance["date"]), (claim_id, "date")
        # von Oswald et al.'s code runs on JAX, Irie et al.'s on PyTorch
        assert record.provenance["versions"].startswith(RUNTIME[record.provenance["repository"]]), claim_id
        # the driver and the page that records the run exist in this repository
        driver = record.provenance["driver"].split()[0]
        assert (ROOT / driver).is_file(), (claim_id, driver)
        assert (ROOT / record.provenance["recorded_in"]).is_file(), (claim_id, "recorded_in")


def test_records_are_claims_of_the_paper_the_authors_code_belongs_to():
    # each repository is one paper's: a record of von Oswald et al.'s code under an Irie claim (or a construction
    # check) is a mistake, and the other way round
    by_id = {c.id: c for c in CLAIMS}
    for claim_id, record in authors_values().items():
        assert by_id[claim_id].paper == PAPER_OF[record.provenance["repository"]], claim_id
