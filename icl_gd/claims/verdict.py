"""What a claim is, and how a verdict is reached from the runs it needs.

A claim declares the runs it needs (``RunPlan``: study, preset, overrides, seeds, and a cheaper ``--quick``
variant), a per-seed statistic over those runs' ``metrics.json`` and a threshold. The verdict is decided by one rule
for every claim (``decide``): ``holds`` when every seed is on the passing side and the 95% interval of the mean does
not cross the threshold, ``fails`` when every seed is on the failing side and the interval does not cross it either,
``inconclusive`` otherwise (the seeds disagree, the interval straddles the threshold, or the quick budget cannot
decide this claim). Two declared tests come first (``judge_values``): a seed whose training failed (``TrainingCheck``)
is flagged and left out of the verdict, and a claim whose reference degenerated (``ReferenceCheck``, e.g. a GD++ that
fell back to GD) is ``no valid reference``, never ``fails``. A ratio (``Ratio``) is positive and skewed, so its mean and interval are taken on the log scale
(geometric mean, interval exp(mean log ± t·sd log / √n)); a t-interval of raw ratios can reach below zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from icl_gd.claims.claim import Claim
from icl_gd.claims.evidence import MissingEvidence, SeedEvidence
from icl_gd.core import stats


class Verdict(str, Enum):
    HOLDS = "holds"
    FAILS = "fails"
    INCONCLUSIVE = "inconclusive"
    NO_VALID_REFERENCE = "no valid reference"  # the reference the claim compares with degenerated (ReferenceCheck)



@dataclass(frozen=True)
class Spread:
    """Per-seed values of a statistic, their mean, sample std and 95% t-interval of the mean (None for one seed).

    With ``log`` (and every value positive) the mean is the geometric mean, ``std`` the sample std of the logs
    and the interval exp(mean log ± t·sd log / √n); a non-positive value falls back to the linear scale. The
    figures are ``icl_gd.core.stats.spread``'s; the std of one value is shown as 0."""

    values: tuple[float, ...]
    log: bool = False

    @property
    def on_log_scale(self) -> bool:
        return self.log and all(v > 0 and math.isfinite(v) for v in self.values)

    @property
    def summary(self) -> stats.Spread:
        return stats.spread(self.values, log=self.on_log_scale)

    @property
    def mean(self) -> float:
        return self.summary.mean

    @property
    def std(self) -> float:
        std = self.summary.std
        return 0.0 if std is None else std

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.summary.interval


@dataclass(frozen=True)
class ClaimResult:
    """A claim's verdict; ``spread`` holds every seed's value (None when none could be measured), ``failed_seeds``
    the seeds (index, reason) whose training failed, left out of the verdict; ``checked`` whether the declared
    training and reference tests could be run (False: their metrics were not available); ``details`` what the
    statistic says beyond its per-seed values (a statistic with a ``details`` method, e.g. ``OverDraws``: every
    test draw's value), "" for most."""

    claim: Claim
    verdict: Verdict
    spread: Spread | None  # None when no value could be measured
    note: str = ""
    run_dirs: tuple[Path, ...] = field(default=())
    failed_seeds: tuple[tuple[int, str], ...] = ()
    checked: bool = True
    details: str = ""
    quick: bool = False  # judged from --quick runs (their set-up is not the full budget's where the plans differ)

    @property
    def at_full_setup(self) -> bool:
        """Whether the runs are the claim's full-budget set-up (what the authors' records are compared with)."""
        return not self.quick or all(plan.quick_is_full for plan in self.claim.runs)

    @property
    def kept(self) -> Spread | None:
        """The seeds the verdict was decided from (those whose training did not fail)."""
        if self.spread is None:
            return None
        left_out = {i for i, _ in self.failed_seeds}
        values = tuple(v for i, v in enumerate(self.spread.values) if i not in left_out)
        return Spread(values, log=self.spread.log) if values else None


def decide(claim: Claim, values: Sequence[float], quick: bool = False) -> tuple[Verdict, str]:
    """The verdict for per-seed ``values`` of the claim's statistic (see the module docstring)."""
    if not values:
        return Verdict.INCONCLUSIVE, "no value measured"
    spread = Spread(tuple(values), log=claim.log_scale)
    if any(math.isnan(v) for v in values):
        return Verdict.INCONCLUSIVE, "a seed measured NaN"
    passing = [claim.passes(v) for v in values]
    interval = spread.interval
    straddles = interval is not None and (claim.passes(interval[0]) != claim.passes(interval[1]))
    if all(passing) and not straddles:
        verdict, note = Verdict.HOLDS, ""
    elif not any(passing) and not straddles:
        verdict, note = Verdict.FAILS, ""
    elif straddles and (all(passing) or not any(passing)):
        verdict, note = Verdict.INCONCLUSIVE, "the 95% interval over seeds straddles the threshold"
    else:
        verdict, note = Verdict.INCONCLUSIVE, f"seeds disagree ({sum(passing)} of {len(values)} pass)"
    if quick and not claim.settled_by_quick:
        shown = f"would be {verdict.value} " if verdict is not Verdict.INCONCLUSIVE else ""
        data = sorted({d for plan in claim.runs for d in plan.quick_data_sets})
        swapped = f" (run on the {', '.join(data)} data set, not the full budget's)" if data else ""
        return Verdict.INCONCLUSIVE, f"{shown}on the --quick budget{swapped}; this claim needs the full budget".strip()
    return verdict, note


def seed_list(indices: Sequence[int]) -> str:
    return f"seed{'s' if len(indices) != 1 else ''} {', '.join(map(str, indices))}"


def judge_values(claim: Claim, values: Sequence[float], failed_seeds: Sequence[tuple[int, str]] = (),
                 reference_problem: str = "", quick: bool = False) -> tuple[Verdict, str]:
    """The verdict after the declared tests: a degenerate reference is ``no valid reference`` (with its reason),
    seeds whose training failed are left out (and said so), the rest decided by ``decide``."""
    if reference_problem:
        return Verdict.NO_VALID_REFERENCE, reference_problem
    left_out = sorted({i for i, _ in failed_seeds})
    kept = [v for i, v in enumerate(values) if i not in left_out]
    if left_out and not kept:
        return Verdict.INCONCLUSIVE, f"training failed in every seed ({seed_list(left_out)})"
    verdict, note = decide(claim, kept, quick)
    if left_out:
        flagged = f"{seed_list(left_out)} left out: training failed"
        note = f"{note}; {flagged}" if note else flagged
    return verdict, note


def check_seeds(claim: Claim, evidence: Sequence[SeedEvidence]) -> tuple[tuple[tuple[int, str], ...], str]:
    """(seeds whose training failed with the reason, why the reference degenerated or ""), by the claim's declared
    tests; a metric a test needs that a run lacks is a MissingEvidence."""
    failed = tuple((i, reason) for i, e in enumerate(evidence) if claim.training and (reason := claim.training(e)))
    problems = [f"seed {i}: {p}" for i, e in enumerate(evidence) if claim.reference and (p := claim.reference(e))]
    if problems and len(problems) == len(evidence) and len({p.split(": ", 1)[1] for p in problems}) == 1:
        problems = [f"every seed: {problems[0].split(': ', 1)[1]}"]
    return failed, "; ".join(problems)


def evaluate_claim(claim: Claim, evidence: Sequence[SeedEvidence], quick: bool = False) -> ClaimResult:
    """Compute the claim's statistic for every seed's evidence, run its declared tests and decide."""
    run_dirs = tuple(d for e in evidence for d in e.run_dirs)
    try:
        values = [float(claim.statistic(e)) for e in evidence]
    except MissingEvidence as exc:
        return ClaimResult(claim, Verdict.INCONCLUSIVE, None, f"cannot measure: {exc}", run_dirs)
    checked = True
    try:
        failed, problem = check_seeds(claim, evidence)
    except MissingEvidence:
        failed, problem, checked = (), "", False
    verdict, note = judge_values(claim, values, failed, problem, quick)
    spread = Spread(tuple(values), log=claim.log_scale) if values else None
    details = getattr(claim.statistic, "details", None)
    text = details(evidence, claim.passes) if details else ""
    return ClaimResult(claim, verdict, spread, note, run_dirs, failed, checked, text, quick)
