"""What each budget of ``icl-gd reproduce`` costs, as the pages state it: the block between ``BUDGET_START`` and
``BUDGET_END`` of README.md and docs/reproduce.md, computed from the registry and the kept estimates
(``estimates.json``) as ``--plan`` computes it, written by ``icl-gd reproduce --update-budget PAGE`` and held to
them by a test, so that no page types a number that an estimate update has moved."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.plan import Plan, minutes_text, packed_s, select_claims
from icl_gd.claims.quick import SEED_BOUND_S, SEEDS, quick_selection
from icl_gd.core.results import replace_marked_block

BUDGET_START = ("<!-- budget:start (written by icl-gd reproduce --update-budget PAGE from the claims and "
                "icl_gd/claims/estimates.json; do not edit by hand) -->")
BUDGET_END = "<!-- budget:end -->"
PAGE_WORKERS = 2  # the project's 2-core machine, one run a core


@dataclass(frozen=True)
class Cost:
    """Study runs, their CPU seconds, and their wall seconds packed on the workers (``plan.packed_s``)."""

    runs: int
    cpu_s: float
    wall_s: float

    @classmethod
    def of(cls, seconds: list[float], workers: int) -> Cost:
        return cls(len(seconds), sum(seconds), packed_s(seconds, workers))

    def cells(self) -> str:
        hours = f" ({self.wall_s / 3600:.1f} h)" if self.wall_s >= 3600 else ""
        return f"{self.runs} | {minutes_text(self.cpu_s)} | {minutes_text(self.wall_s)}{hours}"


@dataclass(frozen=True)
class Budgets:
    """What each budget costs on ``workers``, by the kept estimates (no run finished): ``quick`` (the cheap claims
    at their full budget, ``quick_claims`` claims and ``quick_checks`` construction checks), ``full`` (the declared
    seeds), ``more`` (the further seeds run while claims stay unsettled, at most) and ``smoke``."""

    quick: Cost
    quick_claims: int
    quick_checks: int
    full: Cost
    more: Cost
    smoke: Cost
    claims: int
    checks: int

    @classmethod
    def estimated(cls, workers: int = PAGE_WORKERS) -> Budgets:
        every = select_claims(None)
        rerun, _ = quick_selection(every)
        full = Plan.of(every, False, None, workers)
        quick = Plan.of(rerun, False, None, workers)
        smoke = Plan.of(every, True, None, workers)
        cost = lambda plan: Cost.of([plan.expected_s(p) for p in plan.runs], workers)  # noqa: E731
        checks = sum(c.is_construction for c in every)
        quick_checks = sum(c.is_construction for c in rerun)
        return cls(cost(quick), len(rerun) - quick_checks, quick_checks, cost(full),
                   Cost.of([p.estimate_s for p in full.more], workers), cost(smoke), len(every) - checks, checks)


def budget_block(budgets: Budgets | None = None) -> str:
    """The pages' block: a table of what each budget runs and costs, between the markers."""
    b = budgets or Budgets.estimated()
    return "\n".join([
        BUDGET_START,
        f"What each budget costs on {PAGE_WORKERS} workers (one run a core), by the kept estimates "
        "(`icl_gd/claims/estimates.json`: CPU seconds a seed, measured; `--plan` prints the same for any "
        "`--workers`); runs are study runs, the verify identities run in seconds besides:",
        "",
        f"| budget | what runs | runs | CPU min | wall min on {PAGE_WORKERS} workers |",
        "|---|---|---:|---:|---:|",
        f"| `--quick` | the {b.quick_claims} claims and {b.quick_checks} construction checks whose plans' seeds cost "
        f"at most {SEED_BOUND_S:.0f} CPU s, at their full budget on seeds 0-{SEEDS - 1}, beside the kept table "
        f"| {b.quick.cells()} |",
        f"| full | all {b.claims} claims and {b.checks} construction checks at the papers' budgets, the declared seeds "
        f"| {b.full.cells()} |",
        f"| full, more seeds | while a claim stays unsettled, its plans' further seeds, at most | {b.more.cells()} |",
        f"| `--smoke` | every claim at a toy size (settles only the construction checks) | {b.smoke.cells()} |",
        BUDGET_END,
    ])


def write_budget(page: Path, block: str | None = None) -> str:
    """Replace ``page``'s budget block (a page without the markers is a one-line ConfigError); returns it."""
    block = block or budget_block()
    replace_marked_block(Path(page), BUDGET_START.split(" (")[0], BUDGET_END, block, "--update-budget")
    return block


def page_block(page: Path) -> str:
    """The budget block as ``page`` holds it (markers included; "" when it has none)."""
    text = Path(page).read_text()
    i = text.find(BUDGET_START.split(" (")[0])
    j = text.find(BUDGET_END, i) if i >= 0 else -1
    return text[i:j + len(BUDGET_END)] if j >= 0 else ""


__all__ = ["BUDGET_END", "BUDGET_START", "Budgets", "Cost", "budget_block", "page_block", "write_budget"]
