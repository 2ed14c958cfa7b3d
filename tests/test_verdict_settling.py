"""The verdict rule settles: holds or fails by the 95% interval alone, more seeds narrow it until it does, a per-run
claim judges its share of passing seeds, every verdict has a flip point, shared test draws are flagged, and each
sentence of a paper is counted once.

Each rule is also run against the rule it replaced ("every seed passes and the interval clears"): the tests below
that name ``_every_seed_rule`` show where that rule could not settle what this one does."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from icl_gd.core.errors import ConfigError

from icl_gd.claims import CLAIMS, Claim, Direction, Kind, Verdict
from icl_gd.claims.claim import RunPlan
from icl_gd.claims.plan import TEST_SEED, seed_dirs, seed_spec
from icl_gd.claims.registry import CONSTRUCTION_CHECKS
from icl_gd.claims.reproduction import Reproduction
from icl_gd.claims.statistics import Metric
from icl_gd.claims.summary import Sentence, by_form, primaries
from icl_gd.claims.plan import draws_text
from icl_gd.claims.verdict import (ClaimResult, Spread, decide, flip_point, judge_values,
                                   seeds_to_settle)

BY_ID = {c.id: c for c in CLAIMS + CONSTRUCTION_CHECKS}


def _claim(direction: Direction = Direction.BELOW, threshold: float = 0.02, **kw) -> Claim:
    return Claim(id="toy", paper="von Oswald et al. 2023", location="nowhere", kind=kw.pop("kind", Kind.PAPER),
                 statement="A toy claim.", runs=(RunPlan("single-layer", seeds=3, max_seeds=30),),
                 statistic=Metric("x"), threshold=threshold, direction=direction, threshold_source="ours: a toy",
                 **kw)


def _every_seed_rule(claim: Claim, values: list[float]) -> Verdict:
    """The rule this one replaced: holds only when every seed passes and the interval clears (fails mirrored)."""
    interval = Spread(tuple(values), log=claim.log_scale).interval
    straddles = interval is not None and claim.passes(interval[0]) != claim.passes(interval[1])
    passing = [claim.passes(v) for v in values]
    if all(passing) and not straddles:
        return Verdict.HOLDS
    if not any(passing) and not straddles:
        return Verdict.FAILS
    return Verdict.INCONCLUSIVE


def _draws(mean: float, sd: float, n: int, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------- the rule
def test_a_claim_whose_seeds_straddle_the_bar_settles_as_seeds_grow():
    claim = _claim()  # holds below 0.02; its seeds scatter across the bar around a mean of 0.015
    values = _draws(0.015, 0.006, 60)
    assert any(not claim.passes(v) for v in values)  # some seeds fail on their own
    verdict, note = decide(claim, values[:3])
    assert verdict is Verdict.INCONCLUSIVE and "straddles" in note
    assert decide(claim, values)[0] is Verdict.HOLDS
    # the rule it replaced never settles it: a seed above the bar keeps it inconclusive however many there are
    assert _every_seed_rule(claim, values) is Verdict.INCONCLUSIVE
    # the projection from the first three seeds asks for more; from seeds that have settled, for no more
    assert 3 < seeds_to_settle(claim, values[:3]) <= 60
    assert seeds_to_settle(claim, values) == len(values)


def test_a_unanimous_fail_at_three_seeds_settles_with_more():
    claim = _claim(threshold=0.10)  # the sine loss gap: 0.41, 0.17, 0.38 against < 0.10
    three = [0.41, 0.17, 0.38]
    verdict, note = judge_values(claim, three, planned=True)
    assert verdict is Verdict.INCONCLUSIVE and "more planned (up to 30)" in note and "about" in note
    ten = three + [0.35, 0.22, 0.30, 0.41, 0.19, 0.28, 0.33]
    assert decide(claim, ten)[0] is Verdict.FAILS
    # at its maximum it says so instead
    capped = replace(claim, runs=(RunPlan("single-layer", seeds=3),))
    assert "unsettled at 3 seeds (the maximum)" in judge_values(capped, three, planned=True)[1]


def test_runs_whose_training_failed_count_toward_the_seed_maximum():
    # 10 runs, 3 of them stuck on the plateau: the doubling rule plans no more, so the note must not promise more
    claim = replace(_claim(), runs=(RunPlan("single-layer", seeds=10),))
    values = [0.06, 0.006, 0.016, 0.005, 0.005, 0.93, 0.90, 0.003, 0.87, 0.026]
    failed = [(5, "stuck"), (6, "stuck"), (8, "stuck")]
    verdict, note = judge_values(claim, values, failed, planned=True)
    assert verdict is Verdict.INCONCLUSIVE
    assert "unsettled at 7 seeds of 10 run (the maximum)" in note and "more planned" not in note
    assert "seeds 5, 6, 8 left out" in note


def test_a_mean_on_the_bar_is_never_projected_to_settle():
    claim = _claim(threshold=0.0)
    assert seeds_to_settle(claim, [-1.0, 1.0, -1.0, 1.0]) is None
    assert "no count of seeds would" in judge_values(claim, [-1.0, 1.0, -1.0, 1.0], planned=True)[1]


def test_an_identity_is_decided_by_its_worst_value_and_one_seed_settles_no_claim():
    identity = _claim(threshold=1.0, kind=Kind.CONSTRUCTION)
    assert decide(identity, [0.3])[0] is Verdict.HOLDS
    assert decide(identity, [0.3, 1.2, 0.1])[0] is Verdict.FAILS
    assert decide(_claim(), [0.001])[0] is Verdict.INCONCLUSIVE


def _exact_interval_of_9_of_10() -> tuple[float, float]:
    """The Clopper-Pearson 95% interval of 9 passes in 10, from the binomial tails: the lower end is the p at which
    P(X >= 9) = 10 p^9 (1 - p) + p^10 is 2.5% (by bisection: it rises with p), the upper the p at which
    P(X <= 9) = 1 - p^10 is 2.5%, i.e. 0.975^(1/10)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if 10 * mid ** 9 * (1 - mid) + mid ** 10 < 0.025 else (low, mid)
    return low, 0.975 ** 0.1


def test_a_per_run_claim_judges_the_share_of_seeds_that_pass():
    # "training finds the solution in most runs": each seed passes or not, the share's exact interval decides
    claim = _claim(threshold=0.02, share=0.5)
    assert decide(claim, [0.01] * 9 + [0.05])[0] is Verdict.HOLDS  # 9 of 10: [0.555, 0.997] above 1/2
    assert decide(claim, [0.01] * 6 + [0.05] * 4)[0] is Verdict.INCONCLUSIVE  # 6 of 10: [0.26, 0.88]
    assert decide(claim, [0.05] * 10)[0] is Verdict.FAILS
    flip = flip_point(claim, [0.01] * 9 + [0.05])
    low, high = _exact_interval_of_9_of_10()  # 0.555, 0.997
    assert flip.scale == "share" and (flip.holds_beyond, flip.fails_beyond) == pytest.approx((low, high), rel=1e-9)
    with pytest.raises(ConfigError):
        _claim(share=1.5)


# ---------------------------------------------------------------------------------------------------- flip points
def test_a_flip_point_lies_on_either_side_of_the_bar():
    below = _claim()  # holds below 0.02
    held = [0.010, 0.011, 0.012, 0.011]
    flip = flip_point(below, held)
    low, high = Spread(tuple(held)).interval
    assert (flip.holds_beyond, flip.fails_beyond) == (high, low) and high < 0.02  # could be as strict as `high`
    assert "holds for a bar above" in flip.text() and "(now 0.02)" in flip.text()
    above = _claim(Direction.ABOVE, 0.99)  # aligns above 0.99; these seeds fail it
    failed = [0.96, 0.97, 0.965, 0.97]
    flip = flip_point(above, failed)
    low, high = Spread(tuple(failed)).interval
    assert (flip.holds_beyond, flip.fails_beyond) == (low, high) and high < 0.99  # fails for any bar above `high`
    assert decide(above, failed)[0] is Verdict.FAILS and decide(replace(above, threshold=high - 1e-9), failed)[0] \
        is not Verdict.FAILS
    assert flip_point(below, [0.01]) is None  # one seed: no interval, no flip point


# ---------------------------------------------------------------------------------------------------- test draws
def _run_with_test_seed(root: Path, name: str, test_seed: int) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"config": {"evaluation": {"test_seed": test_seed}}}))
    return run


def test_seeds_that_share_a_test_draw_are_flagged(tmp_path):
    claim = BY_ID["vo-single-loss"]
    shared = [_run_with_test_seed(tmp_path, f"s{i}", 2023) for i in range(3)]
    own = [_run_with_test_seed(tmp_path, f"o{i}", 2023 + i) for i in range(3)]
    assert draws_text(claim, [shared]).startswith("shared: the 3 seeds were scored on the same test tasks")
    assert draws_text(claim, [own]).startswith("independent: each of the 3 seeds")
    # a claim over several plans is independent only when every plan's seeds are
    assert draws_text(claim, [own, own]).startswith("independent")
    assert draws_text(claim, [own, shared]).startswith("partly shared: 4 of 6 seed runs scored on draws of their "
                                                       "own; plan 1: seeds 1, 2 of 3 reuse")
    # seeds 1-2 on seed 0's draw, the others their own: partly shared, never "shared" (the 3 of 5 own are named)
    mixed = [shared[0], shared[1], shared[2], *(_run_with_test_seed(tmp_path, f"m{i}", 2023 + i) for i in (3, 4))]
    assert draws_text(claim, [mixed]).startswith("partly shared: 3 of 5 seed runs scored on draws of their own; "
                                                 "seeds 1, 2 of 5 reuse an earlier seed's test draw")
    # a plan whose paper fixes the test split says why, whatever the runs
    dual = BY_ID["irie-table1-correct"]
    assert draws_text(dual, [own]).startswith("shared: the paper's fixed test split")


def test_each_regression_seed_draws_its_own_test_tasks_and_seed_zero_keeps_the_default():
    plan = BY_ID["vo-single-loss"].runs[0]
    assert "test_seed" not in " ".join(seed_spec(plan, False, 0).overrides)
    assert f"test_seed={TEST_SEED + 3}" in seed_spec(plan, False, 3).overrides
    assert "test_seed" not in " ".join(seed_spec(plan, False, 3, own_draw=False).overrides)
    dual = BY_ID["irie-table1-correct"].runs[0]
    assert "test_seed" not in " ".join(seed_spec(dual, False, 3).overrides)  # the dual-form studies have none


# ---------------------------------------------------------------------------------------------------- more seeds
def _finished(root: Path, plan: RunPlan, seed: int, value: float, own_draw: bool = True) -> None:
    run = root / "runs" / seed_spec(plan, False, seed, own_draw).run_id()
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"mean": {"x": value}}))
    (run / "config.json").write_text(json.dumps({"config": {"evaluation": {"test_seed": TEST_SEED + seed}}}))


def test_an_unsettled_claim_asks_for_more_seeds_of_its_plan_up_to_its_maximum(tmp_path, monkeypatch):
    claim = _claim()
    plan = claim.runs[0]
    for seed, value in enumerate([0.01, 0.03, 0.015]):  # straddles 0.02
        _finished(tmp_path, plan, seed, value)
    reproduction = Reproduction((claim,), tmp_path)
    more = reproduction.more_seeds()
    assert [p.seed for p in more] == [3, 4, 5]  # doubling: 3 -> 6
    for seed in (3, 4, 5):
        _finished(tmp_path, plan, seed, 0.015)
    assert len(seed_dirs(plan, tmp_path, False)) == 6  # the judgement reads the further seeds
    assert [p.seed for p in reproduction.more_seeds()] == list(range(6, 12))
    # a settled claim asks for nothing
    settled = Reproduction((replace(claim, threshold=0.5),), tmp_path)
    assert settled.more_seeds() == []


def test_a_seed_run_before_seeds_drew_their_own_is_read_where_the_new_one_is_missing(tmp_path):
    plan = _claim().runs[0]
    _finished(tmp_path, plan, 0, 0.01)
    _finished(tmp_path, plan, 1, 0.01, own_draw=False)
    _finished(tmp_path, plan, 2, 0.01)
    dirs = seed_dirs(plan, tmp_path, False)
    assert "test_seed" not in dirs[1].name and "test_seed=2025" in dirs[2].name


# ---------------------------------------------------------------------------------------------------- sentences
def _sentences_of(quote: str) -> list[str]:
    return [s.strip().rstrip(".").lower() for s in re.split(r"(?<=[.!?])\s+", quote) if s.strip()]


def test_no_two_counted_claims_of_a_paper_share_a_quoted_sentence():
    results = [ClaimResult(c, Verdict.HOLDS, None) for c in CLAIMS]
    counted = [r.claim for r in primaries(results) if r.claim.quote]
    for i, a in enumerate(counted):
        for b in counted[i + 1:]:
            if a.paper != b.paper:
                continue
            for x in _sentences_of(a.quote):
                for y in _sentences_of(b.quote):
                    assert x not in y and y not in x, (a.id, b.id)


def test_the_continual_identity_is_a_construction_check_and_the_counterfactual_counts_once():
    results = [ClaimResult(c, Verdict.HOLDS, None) for c in CLAIMS + CONSTRUCTION_CHECKS]
    counted = {r.claim.id for r in primaries(results)}
    assert "irie-continual-restrict" in counted and "irie-continual-recover" not in counted
    assert BY_ID["irie-continual-recover"].is_construction
    assert "irie-continual-forgetting" not in counted  # a part of the restrict sentence


def test_a_sentence_holds_when_every_part_holds_and_fails_when_one_fails():
    head, part = BY_ID["vo-layernorm"], BY_ID["vo-layernorm-2"]
    holds = Sentence(ClaimResult(head, Verdict.HOLDS, None), (ClaimResult(part, Verdict.HOLDS, None),))
    assert holds.verdict is Verdict.HOLDS
    fails = Sentence(ClaimResult(head, Verdict.HOLDS, None), (ClaimResult(part, Verdict.FAILS, None),))
    assert fails.verdict is Verdict.FAILS and "vo-layernorm-2 fails" in fails.note
    open_ = Sentence(ClaimResult(head, Verdict.HOLDS, None), (ClaimResult(part, Verdict.INCONCLUSIVE, None),))
    assert open_.verdict is Verdict.INCONCLUSIVE
    # Fig. 3's caption: a direction ("surpasses") with a 'matches' part: counted as a 'matches' sentence
    caption = BY_ID["vo-recurrent2-beats-gd"]
    parts = tuple(ClaimResult(BY_ID[p], Verdict.HOLDS, None) for p in caption.parts)
    sentence = Sentence(ClaimResult(caption, Verdict.HOLDS, None), parts)
    assert sentence.form.group == "matches or aligns"
    assert by_form([sentence]) == {"matches or aligns": {"claims": 1, "holds": 1, "fails": 0, "inconclusive": 0,
                                                         "no valid reference": 0}}


def test_the_tolerance_table_in_the_docs_is_the_registry_s():
    from icl_gd.claims.registry.rules import TOLERANCES, tolerance_table

    page = (Path(__file__).resolve().parents[1] / "docs" / "verdicts.md").read_text()
    assert tolerance_table() in page
    assert {t.form for t in TOLERANCES.values()} == set(TOLERANCES)  # one rule per form, every form
    # every counted claim reads its threshold by a form of the table, and says which in its source
    for claim in CLAIMS:
        assert claim.form in TOLERANCES, claim.id


def test_a_sentence_whose_failed_runs_used_up_its_maximum_is_unsettled_at_the_maximum():
    from icl_gd.claims.summary import Sentence
    from icl_gd.claims.verdict import ClaimResult, Spread

    claim = replace(_claim(), runs=(RunPlan("single-layer", seeds=10),))
    values = (0.06, 0.006, 0.016, 0.005, 0.005, 0.93, 0.90, 0.003, 0.87, 0.026)
    failed = ((5, "stuck"), (6, "stuck"), (8, "stuck"))
    verdict, note = judge_values(claim, values, failed, planned=True)
    result = ClaimResult(claim, verdict, Spread(values), note, failed_seeds=failed)
    assert len(result.kept.values) == 7 and Sentence(result).unsettled_at_maximum
