"""The training-lengths page: rendered from ``icl_gd.claims.lengths``, one row per plan of the claims' registry, its
"ours" column the steps each plan resolves to, and no "shorter" row without its reason."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icl_gd.claims.departures import DEPARTURES
from icl_gd.claims.lengths import LENGTHS, TABLE_END, TABLE_START, lengths_table_markdown, plan_steps, steps_text
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.cli import app
from icl_gd.studies import REGISTRY

PAGE = Path(__file__).resolve().parents[1] / "docs" / "training-lengths.md"


@cache
def _rows() -> dict[str, list[str]]:
    """The page's rows by plan name: the cells plan | claims | figure | paper's length | ours | status."""
    text = PAGE.read_text()
    block = text[text.index(TABLE_START):text.index(TABLE_END)]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines()
            if line.startswith("| `")]
    return {row[0].strip("`"): row for row in rows}


def test_the_page_shows_the_rendered_table():
    text = PAGE.read_text()
    block = text[text.index(TABLE_START):text.index(TABLE_END) + len(TABLE_END)]
    assert block == lengths_table_markdown(REGISTRY), "run: python -m icl_gd.claims.lengths docs/training-lengths.md"


def test_every_plan_of_the_registry_has_one_entry():
    plans = {plan for claim in ALL_CHECKS for plan in claim.runs}
    listed = [entry.plan for entry in LENGTHS]
    assert len(listed) == len(set(listed)), "a plan is listed twice"
    assert {p.name for p in plans - set(listed)} == set(), "add the new plan to LENGTHS in icl_gd/claims/lengths.py"
    assert {p.name for p in set(listed) - plans} == set(), "a listed plan no claim reads"


def _resolved_by_the_cli(plan) -> int:
    """The steps ``icl-gd config STUDY --preset P --set K=V`` prints for a regression plan."""
    args = ["config", plan.study, "--preset", plan.preset, *[a for o in plan.overrides for a in ("--set", o)]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return int(re.search(r"^resolved training: steps=(\d+)", result.output, re.M).group(1))


@pytest.mark.parametrize("entry", LENGTHS, ids=lambda e: e.plan.name)
def test_ours_is_the_plans_resolved_steps(entry):
    ours = _rows()[entry.plan.name][4]
    if entry.plan.study in REGISTRY.names() and REGISTRY.get(entry.plan.study).resolved_training is not None:
        assert ours == steps_text({"": (_resolved_by_the_cli(entry.plan),)})
    else:  # the dual-form studies count their steps their own way (settings, phases, epochs of their text)
        assert ours == (steps_text(plan_steps(entry.plan, REGISTRY)) or "none")


@pytest.mark.parametrize("entry", LENGTHS, ids=lambda e: e.plan.name)
def test_a_shorter_row_names_its_reason_and_a_listed_departure_exists(entry):
    status = _rows()[entry.plan.name][5]
    assert status.split(":")[0] in ("same", "longer", "shorter", "not compared"), status
    if status.startswith("shorter"):
        assert status.startswith("shorter: ") and status[len("shorter: "):].strip(), status
        # a plan shorter than its figure says why: a listed departure, or (beyond the papers, no paper preset) words
        assert entry.departures or entry.beyond_why, f"{entry.plan.name} trains less than its figure: {status}"
    for study, key in entry.departures:
        assert study == entry.plan.study and any(d.study == study and d.key == key for d in DEPARTURES), (study, key)
    for figure in entry.paper:
        assert figure.source.strip(), f"{entry.plan.name}: say where {figure.paper}'s length is written"
