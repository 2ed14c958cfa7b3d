"""Which claims ``icl-gd reproduce --quick`` re-runs: does this machine read the kept verdicts?

A claim is re-run when every plan it reads costs at most ``SEED_BOUND_S`` CPU seconds a seed at the full budget, by
the kept estimates (``estimates.json``; its first seed's figure, the dearer one). Such a claim runs at its full
budget on its first ``SEEDS`` seeds, each scored on a test draw of its own as the full plan's seeds 0-2 are (the
same runs, under the same names), and is judged by the full rule; ``kept.kept_comparison`` sets it beside the kept
table. Every other claim is shown with its kept verdict, not re-run. The smoke set-up (each plan's ``quick_*``
fields, ``--smoke``) is another budget: it runs every claim at a toy size and settles only the construction checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from icl_gd.claims.claim import VERIFY_STUDY, Claim, RunPlan
from icl_gd.claims.kept import kept_comparison
from icl_gd.claims.verdict import ClaimResult
from icl_gd.core.results import atomic_write_text

SEED_BOUND_S = 90.0
"""The dearest full-budget seed --quick re-runs, in CPU seconds. 1.5 CPU minutes keeps the one-layer plans and their
fixed-task variants (23-61 s), two and three tied layers (54, 80), one transformer block (56), the spotlights (36)
and the language models' SGD set-up (39); the next plan, two tied layers at N = 25 (93 s), and every dearer one
(168 s up) stay out, so that three seeds of each re-run plan fit about ten minutes on two cores
(``QUICK_WALL_TARGET_S``)."""

SEEDS = 3
"""Seeds of each re-run plan: the fewest any empirical full-budget plan declares (three gives a t interval with two
degrees of freedom), seeds 0-2 of the full plans; a plan that declares fewer keeps its own (the language models' SGD
set-up, one)."""

QUICK_WALL_TARGET_S = 12 * 60.0
"""What --quick may cost on two workers by the kept estimates, "about ten minutes" with the estimates' own spread
(a seed measured at 2.1-2.9 load); a test holds the selection to it, so an estimate that grows past it shows."""


def rerun(plan: RunPlan, bound_s: float = SEED_BOUND_S) -> bool:
    """Whether --quick re-runs ``plan``: the verify identities always, a study's plan when its first full-budget
    seed costs at most ``bound_s`` CPU seconds by the kept estimates."""
    return plan.study == VERIFY_STUDY or plan.estimate(False, 0) <= bound_s


def at_quick_seeds(plan: RunPlan) -> RunPlan:
    """``plan`` at its full budget on its first ``SEEDS`` seeds (its own count where it declares fewer), and no
    more while a claim of it is unsettled: the runs are the full plan's first seeds, named as they are."""
    seeds = min(SEEDS, plan.seeds)
    return replace(plan, seeds=seeds, max_seeds=seeds)


def quick_selection(claims: Sequence[Claim], bound_s: float = SEED_BOUND_S
                    ) -> tuple[tuple[Claim, ...], tuple[Claim, ...]]:
    """(the claims --quick re-runs, their plans at ``at_quick_seeds``; the others, as declared), each in the order
    of ``claims``. Each claim is one row of the kept table and is compared row by row, so a claim re-runs on its own
    plans' cost, whatever its sentence's other conditions cost."""
    again = tuple(replace(c, runs=tuple(at_quick_seeds(p) for p in c.runs)) for c in claims
                  if all(rerun(p, bound_s) for p in c.runs))
    chosen = {c.id for c in again}
    return again, tuple(c for c in claims if c.id not in chosen)


def dearest_seed_s(claim: Claim) -> float:
    """The full-budget first seed of the claim's dearest plan, in CPU seconds (why it is not re-run)."""
    return max(p.estimate(False, 0) for p in claim.runs)


def selection_lines(rerun_claims: Sequence[Claim], not_rerun: Sequence[Claim], bound_s: float = SEED_BOUND_S
                    ) -> list[str]:
    """What --quick re-runs, by which bound, and what it shows from the kept table instead."""
    checks = sum(c.is_construction for c in rerun_claims)
    return [f"--quick: {len(rerun_claims) - checks} claims and {checks} construction checks whose plans' seeds cost "
            f"at most {bound_s:.0f} CPU s at the full budget (the kept estimates) are re-run at that budget on seeds "
            f"0-{SEEDS - 1} and judged by the full rule; the other {len(not_rerun)} are shown with their kept "
            "verdicts, not re-run here"]


def why_not(claim: Claim, bound_s: float = SEED_BOUND_S) -> str:
    """Why --quick does not re-run ``claim``."""
    return f"a seed of its plans costs up to {dearest_seed_s(claim):.0f} CPU s, above {bound_s:.0f}"


def comparison_lines(results: Sequence[ClaimResult], not_rerun: Sequence[Claim]) -> list[str]:
    """--quick's closing lines (``kept.kept_comparison``): each verdict here beside the kept one, then the others."""
    return kept_comparison(results, not_rerun, {c.id: why_not(c) for c in not_rerun})


COMPARISON_FILE = "beside-kept.txt"  # what --quick writes beside its report: ``comparison_lines``


def write_comparison(root: Path, lines: Sequence[str]) -> Path:
    path = Path(root) / COMPARISON_FILE
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


__all__ = ["COMPARISON_FILE", "QUICK_WALL_TARGET_S", "SEEDS", "SEED_BOUND_S", "at_quick_seeds", "comparison_lines",
           "dearest_seed_s", "quick_selection", "rerun", "selection_lines", "why_not", "write_comparison"]
