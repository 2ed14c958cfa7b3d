"""The claims wing's one noun, ``Reproduction``: its Python example in docs/reproduce.md runs as written, the plan
reads each run's timings once, the estimates are data a reproduction writes and can keep, and no page types what a
budget costs outside the block written from those estimates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from icl_gd.claims import estimates
from icl_gd.claims.estimates import SeedCost, merge_into_kept, record_costs, write_costs
from icl_gd.claims.plan import Plan, seed_specs, select_claims
from icl_gd.claims.reproduction import Reproduction
from icl_gd.core.timing import append_attempt

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproduce.md"


def _example() -> str:
    text = PAGE.read_text()
    return re.search(r"<!-- reproduction-api -->\n```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.slow
def test_the_python_example_of_the_reproduce_page_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_example(), str(PAGE), "exec"), {})
    printed = capsys.readouterr().out
    assert "1 construction check: 1 hold" in printed, printed
    for name in ("report.md", "report.html", "claims.json", "figures.html", "estimates.json"):
        assert (tmp_path / "runs" / "repro" / name).is_file(), name


def _finished(root: Path, spec, cpu_s: float) -> None:
    run = root / "runs" / spec.run_id()
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"mean": {}}))
    append_attempt(run, {"wall_s": cpu_s, "cpu_s": cpu_s, "outcome": "finished"})


def test_the_plan_reads_each_run_s_timings_once(tmp_path, monkeypatch):
    """Status lines, the estimate, the measured totals and the measured costs all come from one read a run (the
    code this replaced read the same timings.json in four functions)."""
    import icl_gd.claims.plan as plan_module

    claims = select_claims(["vo-single-loss"])
    specs = seed_specs(claims[0].runs[0], quick=False)
    _finished(tmp_path, specs[0], 40.0)
    reads: list[Path] = []
    real = plan_module.read_timings
    monkeypatch.setattr(plan_module, "read_timings", lambda out: reads.append(Path(out)) or real(out))
    plan = Plan.of(claims, False, tmp_path, workers=2)
    plan.lines("full", "local"), plan.measured_text(), plan.wall_s, plan.measured_costs(False, "here")
    assert len(reads) == len(specs) == len(set(reads))


def test_a_reproduction_writes_what_its_runs_measured_and_merging_keeps_what_it_did_not(tmp_path):
    claims = select_claims(["vo-single-loss"])
    plan = claims[0].runs[0]
    specs = seed_specs(plan, quick=False)
    _finished(tmp_path, specs[0], 40.0)
    _finished(tmp_path, specs[1], 30.0)
    _finished(tmp_path, specs[2], 20.0)
    costs = Plan.of(claims, False, tmp_path, 2).measured_costs(False, "measured here")
    assert costs == {plan.name: SeedCost(first_seed_s=40.0, later_seed_s=25.0, quick_seed_s=None,
                                         measured="measured here")}
    kept = tmp_path / "kept.json"
    write_costs(kept, {plan.name: SeedCost(99.0, 88.0, 7.0, "before"), "other default": SeedCost(1.0, 1.0, 1.0, "x")},
                "about")
    measured = tmp_path / "estimates.json"
    write_costs(measured, costs, "this run")
    assert merge_into_kept(measured, kept) == [plan.name]
    merged = {k: SeedCost(**v) for k, v in json.loads(kept.read_text())["plans"].items()}
    # --quick's figure kept: not measured; the note of how the old figures were measured kept, the new one appended
    assert merged[plan.name] == SeedCost(40.0, 25.0, 7.0, "before; first_seed_s, later_seed_s from measured here")
    assert merged["other default"] == SeedCost(1.0, 1.0, 1.0, "x")
    assert json.loads(kept.read_text())["_about"] == "about"


def test_a_restricted_reproduction_keeps_the_costs_an_earlier_one_measured_into_the_same_output(tmp_path):
    out = tmp_path / "estimates.json"
    record_costs(out, {"sine paper": SeedCost(1700.0, 1690.0, None, "first run")}, "about")
    record_costs(out, {"separate-tokens paper": SeedCost(1089.0, 1094.0, None, "--only run"),
                       "sine paper": SeedCost(1650.0, None, None, "again")}, "about")
    plans = {k: SeedCost(**v) for k, v in json.loads(out.read_text())["plans"].items()}
    assert plans == {"sine paper": SeedCost(1650.0, None, None, "again"),
                     "separate-tokens paper": SeedCost(1089.0, 1094.0, None, "--only run")}
    out.write_text("not json")  # an unreadable earlier file is replaced, not a reason to lose this run's figures
    record_costs(out, {"sine paper": SeedCost(1.0, 2.0, None, "x")}, "about")
    assert list(json.loads(out.read_text())["plans"]) == ["sine paper"]


def test_a_plan_with_no_kept_estimate_is_priced_at_the_default_and_every_registered_plan_has_one():
    from icl_gd.claims import ALL_CHECKS
    from icl_gd.claims.claim import RunPlan

    from icl_gd.core.errors import ICLGDNotice

    unknown = RunPlan("single-layer", overrides=("d=3",))
    estimates._say_unmeasured.cache_clear()
    with pytest.warns(ICLGDNotice, match="holds no estimate for plan 'single-layer default d=3'"):
        assert unknown.cost == estimates.UNMEASURED and unknown.estimate(False) == estimates.DEFAULT_S
    kept = json.loads(estimates.ESTIMATES.read_text())["plans"]
    assert {p.name for c in ALL_CHECKS for p in c.runs} <= set(kept)


def test_a_broken_estimates_file_is_a_one_line_error(tmp_path):
    from icl_gd.core.errors import ConfigError

    bad = tmp_path / "estimates.json"
    bad.write_text('{"plans": {"x": {"first_seed_s": 1, "bogus": 2}}}')
    with pytest.raises(ConfigError, match="not an estimates file"):
        merge_into_kept(bad, bad)


def test_no_page_types_what_a_budget_costs_outside_the_generated_block():
    """docs/reproduce.md and the README state what each budget costs in the block ``--update-budget`` writes
    (tests/test_quick_check.py holds it to the estimates); no other sentence of theirs, nor the CLI's help, types a
    cost in minutes or hours that an estimate update would leave behind."""
    from icl_gd.claims.budget import page_block

    for page in (PAGE, ROOT / "README.md"):
        text = page.read_text().replace(page_block(page), "")
        assert not re.search(r"(quick|smoke|full)[^\n]*~?\d+(\.\d+)? ?(CPU )?(min|h\b|hours)", text), page
    assert not re.search(r"(quick|smoke)[^\n]*\d+(\.\d+)? ?min", (ROOT / "cli.py").read_text())


def test_quick_runs_on_another_data_set_say_so_and_are_not_compared_with_the_authors_full_budget_record(monkeypatch):
    """Under --quick the image claims run on scikit-learn's digits: the row says so, and their Fashion-MNIST /
    MNIST record is not set against a digits run (it was "differs")."""
    from icl_gd.claims import ALL_CHECKS
    from icl_gd.claims.authors import Agreement, AuthorsValue
    from icl_gd.claims.summary import comparison
    from icl_gd.claims.verdict import ClaimResult, Spread, Verdict, judge_values

    claim = next(c for c in ALL_CHECKS if any(p.quick_data_sets for p in c.runs) and not c.is_construction)
    verdict, note = judge_values(claim, [0.9, 0.91, 0.92], quick=True)
    assert verdict is Verdict.INCONCLUSIVE and "run on the digits data set, not the full budget's" in note
    quick = ClaimResult(claim, verdict, Spread((0.9, 0.91, 0.92)), note, quick=True)
    full = ClaimResult(claim, verdict, Spread((0.9, 0.91, 0.92)), note, quick=False)
    theirs = AuthorsValue(claim.id, (0.5, 0.5, 0.5), True, {"seeds": [0, 1, 2]})
    monkeypatch.setattr("icl_gd.claims.summary.authors_values", lambda: {claim.id: theirs})
    assert comparison(quick)[1].agreement is Agreement.NOT_RUN
    assert comparison(full)[1].agreement is Agreement.DIFFERS
