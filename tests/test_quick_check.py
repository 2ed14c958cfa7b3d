"""``icl-gd reproduce --quick``: the claims whose seeds are cheap by the kept estimates, re-run at their full budget on
seeds 0-2, judged by the full rule and set beside the kept table; and the pages' budget block, written from the
registry and the estimates by ``--update-budget``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.claims import claim as claim_module
from icl_gd.claims.budget import BUDGET_END, BUDGET_START, Budgets, budget_block, page_block
from icl_gd.claims.estimates import SeedCost
from icl_gd.claims.kept import KeptVerdict, kept_comparison
from icl_gd.claims.plan import Plan, minutes_text, seed_specs, select_claims
from icl_gd.claims.quick import (QUICK_WALL_TARGET_S, SEED_BOUND_S, SEEDS, quick_selection, rerun, selection_lines)
from icl_gd.claims.reproduction import Reproduction
from icl_gd.claims.verdict import ClaimResult, Spread, Verdict

ROOT = Path(__file__).resolve().parents[1]
LOSS = "vo-single-loss"


def test_quick_re_runs_a_claim_when_every_plan_of_it_costs_at_most_the_bound(monkeypatch):
    """The selection is by cost alone: moving one plan's kept estimate across the bound moves its claims."""
    loss, sine = select_claims([LOSS, "vo-sine"])
    costs = {loss.runs[0].name: SEED_BOUND_S + 1, sine.runs[0].name: SEED_BOUND_S}
    monkeypatch.setattr(claim_module, "seed_cost", lambda name: SeedCost(first_seed_s=costs[name]))
    again, others = quick_selection([loss, sine])
    assert [c.id for c in again] == ["vo-sine"] and [c.id for c in others] == [LOSS]
    assert again[0].runs[0].seeds == again[0].seed_limit == SEEDS  # no more seeds while unsettled
    costs[loss.runs[0].name] = SEED_BOUND_S
    assert [c.id for c in quick_selection([loss, sine])[0]] == [LOSS, "vo-sine"]
    verify = next(c for c in select_claims(["vo-prop1-exact"]))
    assert rerun(verify.runs[0], bound_s=0.0)  # the verify identities always run (seconds, in this process)


def test_the_registry_s_quick_selection_and_its_cost():
    """What --quick re-runs today by the kept estimates: the one-layer plans, two and three tied layers, one
    transformer block, the spotlights, the language models' SGD set-up and the continual identity, each plan within
    the bound and every other claim with a plan above it; about ten minutes on two workers."""
    every = select_claims(None)
    again, others = quick_selection(every)
    assert len(again) + len(others) == len(every)
    plans = {p.name for c in again for p in c.runs}
    assert all(rerun(p) for c in again for p in c.runs)
    assert all(any(not rerun(p) for p in c.runs) for c in others)
    for name in ("single-layer default", "single-layer default train_tasks=8192 batch_size=8192",
                 "multi-layer default layers=2 recurrent=true gdpp_adam_steps=1000",
                 "multi-layer default layers=3 recurrent=true",
                 "multi-layer default layers=1 block=transformer mlp=false norm_first_block=true",
                 "spotlights default", "dual-form-lm default setups=book,wiki"):
        assert name in plans, name
    assert "multi-layer default layers=2 recurrent=true n_context=25" not in plans
    ids = {c.id for c in again}
    assert {"vo-single-loss", "vo-recurrent2-gdpp-loss", "vo-layernorm", "beyond-spotlights-move", "irie-lm-exact",
            "irie-continual-recover", "vo-prop1-exact"} <= ids and "vo-sine" not in ids
    plan = Plan.of(again, False, None, workers=2)
    assert not plan.more and 0 < plan.wall_s <= QUICK_WALL_TARGET_S, plan.wall_s / 60


def test_quick_runs_are_the_full_plans_first_seeds_under_their_names():
    """Seeds 0-2 of each re-run plan at its full budget, each scored on its own test draw: the same runs (the same
    directory names) as the full reproduction's first three seeds, so a folder of full runs serves both."""
    full = {c.id: c for c in select_claims(None)}
    again, _ = quick_selection(tuple(full.values()))
    for claim in again:
        for capped, declared in zip(claim.runs, full[claim.id].runs):
            if capped.study == "verify":
                continue
            assert seed_specs(capped, quick=False) == seed_specs(declared, quick=False)[:SEEDS]
    single = next(c for c in again if c.id == LOSS).runs[0]
    assert [s.overrides[-3:] for s in seed_specs(single, quick=False)][1] == ("test_seed=2024", "seed=1", "seeds=1")


def _finished_loss_runs(root: Path, claim, gaps: list[float]) -> None:
    for spec, gap in zip(seed_specs(claim.runs[0], quick=False), gaps):
        run = root / "runs" / spec.run_id()
        run.mkdir(parents=True)
        metrics = {"loss_rel_gap_trained_vs_gd": gap, "loss_trained": 0.21, "loss_gd": 0.21, "loss_zero": 0.42}
        (run / "metrics.json").write_text(json.dumps({"mean": metrics}))
        (run / "config.json").write_text(json.dumps({"config": {"evaluation": {"test_seed": 2023}}}))


def test_quick_judges_its_three_seeds_by_the_full_rule(tmp_path):
    """Three full-budget seeds settle a claim whose interval clears its bar (a smoke reading never settles one), and
    an unsettled one says it is at its maximum for this check, not that more seeds are planned."""
    quick = Reproduction.quick_check(tmp_path, only=LOSS)
    (claim,) = quick.claims
    _finished_loss_runs(tmp_path, claim, [0.001, 0.002, 0.0015])
    (result,) = quick.judge().results
    assert result.verdict is Verdict.HOLDS and not result.quick and len(result.spread.values) == 3
    wide = tmp_path / "wide"
    _finished_loss_runs(wide, claim, [0.001, 0.03, 0.012])
    (unsettled,) = Reproduction.quick_check(wide, only=LOSS).judge().results
    assert unsettled.verdict is Verdict.INCONCLUSIVE and "unsettled at 3 seeds" in unsettled.note
    assert "(the maximum)" in unsettled.note
    assert quick.command.endswith(f"--quick --only {LOSS}") and "--quick (the full budget" in quick.budget


def _result(claim_id: str, values: tuple[float, ...], verdict: Verdict) -> ClaimResult:
    claim = next(c for c in select_claims([claim_id]))
    return ClaimResult(claim, verdict, Spread(values))


def test_the_comparison_sets_each_verdict_beside_the_kept_one_and_its_last_line_counts_them():
    kept = {LOSS: KeptVerdict("holds", 0.00165, (0.0013, 0.002), 30, "2026-12-06, commit abc"),
            "vo-interpolation": KeptVerdict("holds", 0.001, (0.0008, 0.0012), 30, "2026-12-06, commit abc"),
            "vo-prop1-exact": KeptVerdict("holds", 1e-3, (1e-3, 1e-3), 1, "2026-12-06, commit abc"),
            "vo-sine": KeptVerdict("inconclusive", 0.5, (0.1, 0.9), 5, "2026-12-06, commit abc")}
    results = [_result(LOSS, (0.001, 0.002, 0.0015), Verdict.HOLDS),
               _result("vo-interpolation", (0.001, 0.03, 0.012), Verdict.INCONCLUSIVE),
               _result("vo-prop1-exact", (1e-3,), Verdict.HOLDS),
               _result("vo-ood", (0.01, 0.02, 0.03), Verdict.HOLDS)]
    sine = select_claims(["vo-sine"])
    lines = kept_comparison(results, sine, {"vo-sine": "a seed costs 1699 CPU s"}, kept)
    assert lines[0] == "beside the kept full-budget table (docs/claims-table.json, 2026-12-06, commit abc):"
    assert ("  vo-single-loss: here holds, mean 0.0015 [2.58e-04, 0.00274] (3 seeds); kept holds, mean 0.00165 "
            "[0.0013, 0.002] (30 seeds)") in lines
    assert "  vo-sine: not re-run here (a seed costs 1699 CPU s); kept inconclusive, mean 0.5 [0.1, 0.9] (5 seeds)" \
        in lines
    assert lines[-1] == (
        "1 of 2 claims re-run at full budget here read as the kept table does (and 1 of 1 construction checks); the "
        "others: vo-interpolation (here inconclusive, mean 0.0143 [-0.022, 0.0507] (3 seeds); kept holds, mean "
        "0.001 [8.00e-04, 0.0012] (30 seeds)); not in the kept table: vo-ood; 1 not re-run here (their kept verdicts "
        "above)")
    assert kept_comparison(results, sine, {}, kept={}) == [
        "no kept table (docs/claims-table.json of a source checkout) to set these verdicts beside"]


def test_quick_plan_prints_what_it_re_runs_and_the_budgets_refuse_each_other(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--quick", "--plan"])
    assert result.exit_code == 0, result.output
    again, others = quick_selection(select_claims(None))
    assert result.output.splitlines()[0] == selection_lines(again, others)[0]
    assert f"budget --quick (the full budget, seeds 0-2)" in result.output and "seed=2" in result.output
    assert "while a claim stays unsettled" not in result.output  # no further seeds
    smoke = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--smoke", "--plan"])
    assert smoke.exit_code == 0 and "budget --smoke" in smoke.output
    for extra, message in ((["--smoke"], "two budgets"), (["--update-table", str(tmp_path / "c.md")],
                                                           "written from a full-budget run")):
        refused = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--quick", *extra])
        assert refused.exit_code == 2 and message in refused.output, refused.output
    assert not out.exists()


@pytest.mark.slow
def test_quick_end_to_end_on_the_verify_identities_ends_with_the_kept_comparison(tmp_path):
    """Two construction checks of the verify identities (seconds): the comparison is printed last and written."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "--out", str(out), "--quick", "--only",
                                      "vo-prop1-exact,irie-dual-exact,vo-sine", "--no-progress"])
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("0 of 0 claims re-run at full budget here read as the kept table does (and 2 of 2 "
                           "construction checks); the others: none; 1 not re-run here"), last
    assert "  vo-sine: not re-run here (a seed of its plans costs up to" in result.output
    assert (out / "beside-kept.txt").read_text().strip().splitlines()[-1] == last
    assert "icl-gd reproduce --out" in (out / "report.md").read_text()


def test_the_pages_budget_blocks_are_what_the_generator_writes_today():
    """docs/reproduce.md (which README links for the costs) states each budget's cost in the generated block; after
    an estimate moves, this fails until `icl-gd reproduce --update-budget PAGE` rewrites it."""
    block = budget_block()
    assert "budget:start" not in (ROOT / "README.md").read_text()  # one page holds the costs; README links it
    for page in (ROOT / "docs" / "reproduce.md",):
        assert page_block(page) == block, f"{page}: run icl-gd reproduce --update-budget {page.relative_to(ROOT)}"


def test_the_budget_block_says_what_plan_prints():
    budgets = Budgets.estimated()
    full = Plan.of(select_claims(None), False, None, workers=2)
    assert budgets.full.runs == len(full.runs) and budgets.more.runs == len(full.more)
    assert f"| {len(full.runs)} | {minutes_text(budgets.full.cpu_s)} | {minutes_text(full.wall_s)}" in budget_block()
    quick = Plan.of(quick_selection(select_claims(None))[0], False, None, workers=2)
    assert budgets.quick.runs == len(quick.runs) and budgets.quick.wall_s == pytest.approx(quick.wall_s)


def test_update_budget_rewrites_only_the_marked_block(tmp_path):
    page = tmp_path / "PAGE.md"
    page.write_text(f"before\n\n{BUDGET_START}\nold numbers\n{BUDGET_END}\n\nafter\n")
    result = CliRunner().invoke(app, ["reproduce", "--plan", "--update-budget", str(page)])
    assert result.exit_code == 0, result.output
    assert page.read_text() == f"before\n\n{budget_block()}\n\nafter\n"
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no block\n")
    result = CliRunner().invoke(app, ["reproduce", "--update-budget", str(plain)])
    assert result.exit_code == 2 and "no markers" in result.output and plain.read_text() == "no block\n"
    result = CliRunner().invoke(app, ["reproduce", "--update-budget", str(page), "--quick"])
    assert result.exit_code == 2 and "states every budget" in result.output
