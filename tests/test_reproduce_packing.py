"""The reproduce scheduler hands the sweep its runs longest plan first, so no long run starts while the other worker
idles at the end, each plan's first seed a plan ahead of its later seeds (which read what it computed for them); and
only the runs whose figures are shown draw them."""

from __future__ import annotations

from pathlib import Path

import pytest

from icl_gd.claims import plan as rp
from icl_gd.claims.reproduction import Execution, Reproduction
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.studies import REGISTRY


def test_runs_are_handed_to_the_sweep_longest_plan_first_each_first_seed_a_plan_ahead(tmp_path, monkeypatch):
    claims = [c for c in ALL_CHECKS if c.id in ("vo-single-loss", "vo-deep-separate", "vo-fixed-tasks-128-fails",
                                                "vo-recurrent10-gdpp-aligned")]
    handed = []

    def fake_sweep(specs, root, **options):
        handed.extend(specs)
        return []

    monkeypatch.setattr("icl_gd.platform.sweep.run_sweep", fake_sweep)
    Reproduction(tuple(claims), tmp_path, execution=Execution(progress=False)).run(REGISTRY, lambda: [],
                                                                                     lambda _: None)
    planned = rp.plan_runs(claims, False)
    estimate = {p.spec: p.estimate_s for p in planned}
    assert sorted(handed, key=str) == sorted(estimate, key=str)  # every run once
    plans: dict[tuple, list] = {}
    for p in sorted(planned, key=lambda p: -p.estimate_s):
        plans.setdefault(rp.plan_key(p.spec), []).append(p.spec)
    seeds = list(plans.values())  # each plan's seeds in seed order, plans longest first
    assert len(seeds) == 4 and all(len(s) > 1 for s in seeds)
    assert len({estimate[s[0]] for s in seeds}) == 4  # distinct lengths: "longest first" is one order
    at = {spec: i for i, spec in enumerate(handed)}
    assert handed[0] == seeds[0][0]  # the longest plan starts first
    for plan, following in zip(seeds, seeds[1:] + [None]):
        assert [at[s] for s in plan] == sorted(at[s] for s in plan)  # a plan's seeds in seed order
        if following is not None:
            # the next plan's first seed between this plan's first and its later seeds: a head start of one run
            assert at[plan[0]] < at[following[0]] < at[plan[1]]
            # and no further back than that: before the next plan's own later seeds
            assert all(at[s] < at[following[1]] for s in plan[1:])
    assert estimate[handed[0]] > estimate[handed[-1]]  # the five-layer runs before the single layer's


def _handed_figures(tmp_path, monkeypatch, claims, **options):
    """What ``reproduce`` hands the sweep as its figures choice, with the specs it hands."""
    handed = {}

    def fake_sweep(specs, root, **sweep_options):
        handed.update(specs=list(specs), figures=sweep_options["figures"])
        return []

    monkeypatch.setattr("icl_gd.platform.sweep.run_sweep", fake_sweep)
    Reproduction(tuple(claims), tmp_path, execution=Execution(progress=False, **options)).run(
        REGISTRY, lambda: [], lambda _: None)
    return handed["specs"], handed["figures"]


def test_only_each_plans_first_seed_draws_figures_by_default(tmp_path, monkeypatch):
    """The report and the gallery show the figures of each claim's first run directory (a plan's first seed); the
    other seeds' would be drawn for nothing. Sharing a run between claims must not double it."""
    from icl_gd.platform.sweep.plan import draws_figures

    claims = [c for c in ALL_CHECKS if c.id in ("vo-single-loss", "vo-single-alignment", "vo-deep-separate")]
    specs, figures = _handed_figures(tmp_path, monkeypatch, claims)
    drawn = [s for s in specs if draws_figures(figures, s)]
    plans = {rp.plan_key(s) for s in specs}
    assert len(specs) > len(plans) > 1  # several seeds a plan, so some runs must go without
    assert len(drawn) == len(plans) and all("seed=0" in s.overrides for s in drawn)
    for claim in claims:
        first = Path(rp.plan_dirs(claim, tmp_path, False)[0][0]).name  # where the report looks for its figures
        assert first in figures


@pytest.mark.parametrize("choice, expected", [("all", True), ("none", False)])
def test_figures_all_or_none_reach_the_sweep(tmp_path, monkeypatch, choice, expected):
    claims = [c for c in ALL_CHECKS if c.id == "vo-single-loss"]
    assert _handed_figures(tmp_path, monkeypatch, claims, figures=choice)[1] is expected


def test_an_unknown_figures_choice_is_a_one_line_error(tmp_path):
    from typer.testing import CliRunner

    from icl_gd.cli import app

    result = CliRunner().invoke(app, ["reproduce", "--out", str(tmp_path / "r"), "--only", "vo-single-loss",
                                      "--figures", "some"])
    assert result.exit_code == 2 and "--figures must be one of first, all, none, got 'some'" in result.output
    assert "Traceback" not in result.output and result.output.strip().count("\n") == 0, result.output
    assert not (tmp_path / "r").exists()  # refused before anything ran
