"""The claims registry: every claim's check on synthetic metrics.json files (holds, fails, inconclusive), the
verdict rule, and the report files."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from icl_gd.platform.claims import CLAIMS, Claim, Direction, SeedEvidence, Verdict, decide, evaluate_claim
from icl_gd.platform.claims.model import Difference, Metric, Ratio, RunPlan, WorstIdentity
from icl_gd.platform.claims.registry import ood_max_gap
from icl_gd.platform.claims.report import ReportHeader, render_html, render_markdown, write_report
from icl_gd.core.errors import ConfigError


def _margin(claim: Claim) -> float:
    return max(abs(claim.threshold) * 0.5, 0.01)


def _put(mean: dict, key: str, value: float) -> None:
    """``mean[key] = value``, or for ``name[i]`` a per-step list whose item i is ``value`` (the others decoys)."""
    match = re.fullmatch(r"(.+)\[(-?\d+)\]", key)
    if match is None:
        mean[key] = value
        return
    items = [1e6, 1e6, 1e6]
    items[int(match.group(2))] = value
    mean[match.group(1)] = items


def _write_run(run_dir: Path, claim: Claim, value: float) -> Path:
    """A run directory whose metrics.json (and ood.csv) make ``claim.statistic`` equal ``value``."""
    run_dir.mkdir(parents=True)
    stat = claim.statistic
    mean: dict = {"unrelated": 123.0}
    if isinstance(stat, Metric):
        _put(mean, stat.key, value)
    elif isinstance(stat, Ratio):
        _put(mean, stat.numerator, value)
        for i, key in enumerate(stat.denominators):
            _put(mean, key, 1.0 + i)
    elif isinstance(stat, Difference):
        _put(mean, stat.first, value + 0.25)
        _put(mean, stat.second, 0.25)
    elif isinstance(stat, WorstIdentity):
        mean = {f"{stat.prefix} synthetic identity": {"max_rel_error": value * 1e-12, "tolerance": 1e-12},
                f"{stat.prefix} a second one": {"max_rel_error": 0.0, "tolerance": 1e-12},
                "other: unrelated identity": {"max_rel_error": 1.0, "tolerance": 1e-12}}
    elif stat is ood_max_gap:
        mean = {}
        rows = [{"seed": 0, "sweep": sweep, "value": alpha, "model": model, "loss": loss}
                for sweep in ("input_scale", "weight_scale") for alpha in (0.5, 1.0, 2.0)
                for model, loss in (("gd", 0.2 * alpha), ("trained", 0.2 * alpha * (1 + value * (alpha == 2.0))))]
        rows += [{"seed": 0, "sweep": "distractors", "value": 8, "model": "trained", "loss": 99.0},
                 {"seed": 0, "sweep": "distractors", "value": 8, "model": "gd", "loss": 1.0}]
        with (run_dir / "ood.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:  # a new kind of statistic needs a builder here
        raise AssertionError(f"{claim.id}: no synthetic builder for {stat!r}")
    (run_dir / "metrics.json").write_text(json.dumps({"mean": mean, "std": {}, "seeds": {}}))
    return run_dir


def _evidence(tmp_path: Path, claim: Claim, values: list[float]) -> list[SeedEvidence]:
    evidence = []
    for i, value in enumerate(values):
        dirs = tuple(_write_run(tmp_path / f"plan{p}_seed{i}", claim, value) for p in range(len(claim.runs)))
        metrics = tuple(json.loads((d / "metrics.json").read_text())["mean"] for d in dirs)
        evidence.append(SeedEvidence(metrics, dirs))
    return evidence


def _side(claim: Claim, passing: bool) -> float:
    sign = -1 if (claim.direction is Direction.BELOW) == passing else 1
    return claim.threshold + sign * _margin(claim)


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_each_claim_holds_fails_and_is_inconclusive_on_synthetic_runs(tmp_path, claim):
    result = evaluate_claim(claim, _evidence(tmp_path / "holds", claim, [_side(claim, True)] * 3))
    assert result.verdict is Verdict.HOLDS, result.note
    assert result.spread.mean == pytest.approx(_side(claim, True), rel=1e-9, abs=1e-15)

    result = evaluate_claim(claim, _evidence(tmp_path / "fails", claim, [_side(claim, False)] * 3))
    assert result.verdict is Verdict.FAILS, result.note

    mixed = [_side(claim, True), _side(claim, False), _side(claim, True)]
    result = evaluate_claim(claim, _evidence(tmp_path / "mixed", claim, mixed))
    assert result.verdict is Verdict.INCONCLUSIVE and "disagree" in result.note


def test_every_claim_is_well_formed():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    for claim in CLAIMS:
        assert claim.statement.endswith(".") and claim.source and claim.measures
        for plan in claim.runs:
            assert plan.seeds >= 1 and plan.estimate_s > 0 and plan.quick_estimate_s > 0


def test_a_missing_metric_is_inconclusive_not_an_error(tmp_path):
    claim = next(c for c in CLAIMS if c.id == "vo-single-loss")
    evidence = [SeedEvidence(({"loss_trained": 0.2},), (tmp_path,))]
    result = evaluate_claim(claim, evidence)
    assert result.verdict is Verdict.INCONCLUSIVE and "loss_rel_gap_trained_vs_gd" in result.note


def test_a_null_metric_is_inconclusive(tmp_path):
    claim = next(c for c in CLAIMS if c.id == "vo-single-loss")
    result = evaluate_claim(claim, [SeedEvidence(({"loss_rel_gap_trained_vs_gd": None},), (tmp_path,))])
    assert result.verdict is Verdict.INCONCLUSIVE


def _toy(direction=Direction.BELOW, quick_decisive=True) -> Claim:
    return Claim("toy", "paper", "§1", "Toy.", (RunPlan("single-layer", quick_overrides=("steps=10",)),), Metric("x"), "x", 1.0, direction,
                 quick_decisive=quick_decisive)


def test_verdict_rule_interval_straddling_the_threshold_is_inconclusive():
    # every seed passes, but with this spread the 95% t-interval of the mean reaches past 1.0
    verdict, note = decide(_toy(), [0.1, 0.9, 0.95])
    assert verdict is Verdict.INCONCLUSIVE and "straddles" in note
    # the same mean with a small spread holds
    assert decide(_toy(), [0.64, 0.65, 0.66])[0] is Verdict.HOLDS
    assert decide(_toy(Direction.ABOVE), [0.64, 0.65, 0.66])[0] is Verdict.FAILS


def test_ratio_claims_are_summarised_on_the_log_scale():
    """A ratio > 2 on every seed but spread over a decade: its linear t-interval reaches below zero, the
    geometric one stays above 2, so the claim holds."""
    ratio_claim = Claim("r", "paper", "§1", "Ratio.", (RunPlan("single-layer"),), Ratio("a", ("b",)), "a/b", 2.0,
                        Direction.ABOVE)
    values = [20.0, 200.0, 250.0]
    assert ratio_claim.log_scale and not _toy().log_scale
    assert decide(ratio_claim, values)[0] is Verdict.HOLDS
    assert decide(_toy(Direction.ABOVE), values)[0] is Verdict.INCONCLUSIVE  # linear: straddles (lower end < 0)
    from icl_gd.platform.claims.model import Spread
    spread = Spread(tuple(values), log=True)
    assert spread.mean == pytest.approx((20.0 * 200.0 * 250.0) ** (1 / 3))
    lo, hi = spread.interval
    assert 2.0 < lo < spread.mean < hi
    assert Spread((0.0, 1.0), log=True).mean == pytest.approx(0.5)  # a non-positive value: linear scale


def test_one_seed_is_decided_by_its_value_and_nan_is_inconclusive():
    assert decide(_toy(), [0.5])[0] is Verdict.HOLDS
    assert decide(_toy(), [1.5])[0] is Verdict.FAILS
    assert decide(_toy(), [float("nan")])[0] is Verdict.INCONCLUSIVE


def test_quick_budget_never_settles_a_claim_that_needs_the_full_budget():
    verdict, note = decide(_toy(quick_decisive=False), [0.5, 0.5], quick=True)
    assert verdict is Verdict.INCONCLUSIVE and "would be holds" in note
    assert decide(_toy(quick_decisive=True), [0.5, 0.5], quick=True)[0] is Verdict.HOLDS
    # a plan whose quick budget is its full budget settles the claim under --quick too
    same = Claim("same", "paper", "§1", "Same.", (RunPlan("dual-form-lm"),), Metric("x"), "x", 1.0, Direction.BELOW,
                 quick_decisive=False)
    assert decide(same, [0.5], quick=True)[0] is Verdict.HOLDS


def test_claim_without_runs_or_with_infinite_threshold_is_rejected():
    with pytest.raises(ConfigError):
        Claim("bad", "p", "s", "S.", (), Metric("x"), "x", 1.0, Direction.BELOW)
    with pytest.raises(ConfigError):
        Claim("bad", "p", "s", "S.", (RunPlan("x"),), Metric("x"), "x", float("inf"), Direction.BELOW)


def test_report_files_show_summary_table_and_embedded_figures(tmp_path):
    import struct
    import zlib

    claim = next(c for c in CLAIMS if c.id == "vo-single-loss")
    evidence = _evidence(tmp_path / "runs", claim, [0.001, 0.002, 0.003])
    figure = evidence[0].run_dirs[0] / claim.figures[0]
    figure.parent.mkdir(parents=True)
    raw = b"\x00\xff\x00\x00"  # one red pixel
    png = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
           + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))
    figure.write_bytes(png)
    failing = next(c for c in CLAIMS if c.id == "vo-prop1-exact")
    results = [evaluate_claim(claim, evidence),
               evaluate_claim(failing, _evidence(tmp_path / "runs2", failing, [2.0]))]
    header = ReportHeader("icl-gd reproduce --out X", "abc1234", "2026-11-30", quick=False, wall_s=60.0)
    write_report(tmp_path, results, header)
    md = (tmp_path / "report.md").read_text()
    assert "2 claims: 1 hold, 1 fail, 0 inconclusive" in md
    assert "| vo-single-loss" not in md and "[vo-single-loss](runs/plan0_seed0)" in md
    assert "0.002 ± 0.001 (3 seeds, 95% CI [" in md and "< 0.02" in md
    page = (tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 1 and 'id="claims"' in page
    assert 'class="fails"' in page and 'class="holds"' in page
    data = json.loads((tmp_path / "claims.json").read_text())
    assert [c["verdict"] for c in data["claims"]] == ["holds", "fails"]
    assert data["claims"][0]["values"] == [0.001, 0.002, 0.003] and data["commit"] == "abc1234"
    assert render_markdown(results, header, tmp_path) == md and render_html(results, header, tmp_path) == page


def _chunk(kind: bytes, data: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_ood_gap_reads_only_the_scale_sweeps(tmp_path):
    claim = next(c for c in CLAIMS if c.id == "vo-ood")
    run = _write_run(tmp_path / "r", claim, 0.3)
    # the distractor rows (gap 98) are not part of this claim
    assert ood_max_gap(SeedEvidence(({},), (run,))) == pytest.approx(0.3)


def test_indexed_metric_reads_one_item_of_a_per_step_list(tmp_path):
    evidence = SeedEvidence(({"cond": [3.0, 2.0, 1.5], "flat": 2.0},), (tmp_path,))
    assert evidence.value("cond[-1]") == 1.5 and evidence.value("cond[0]") == 3.0
    for bad in ("cond[3]", "flat[0]", "missing[0]"):
        with pytest.raises(LookupError):
            evidence.value(bad)
