"""How a verdict is reached from the runs a claim needs.

One rule for every claim (``decide``): the claim's statistic over independent replicates (training seeds, each
with its own test draw) is summarised by its mean and the 95% interval of that mean; the claim **holds** when the
interval lies wholly on the passing side of its threshold, **fails** when wholly on the failing side, and is
**inconclusive** otherwise: not yet settled. More replicates only narrow the interval, so an inconclusive claim
settles with enough seeds unless its mean sits on the threshold (``seeds_to_settle`` projects how many). A claim
about how often training finds something (``Claim.share``) judges the share of seeds that pass instead, by its
exact (Clopper-Pearson) 95% interval; a construction check (an identity) holds when every value passes.

Every verdict carries its flip point (``Flip``): the thresholds at which it would change, the ends of the
interval. Two declared tests come first (``judge_values``): a seed whose training failed (``TrainingCheck``) is
flagged, counted apart and left out, and a claim whose reference degenerated (``ReferenceCheck``, e.g. a GD++ that
fell back to GD) is ``no valid reference``, never ``fails``. A ratio (``Ratio``) is positive and skewed, so its mean
and interval are taken on the log scale (geometric mean, interval exp(mean log ± t·sd log / √n)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dataclasses import replace

from icl_gd.claims.claim import Claim, Direction
from icl_gd.claims.evidence import MissingEvidence, SeedEvidence
from icl_gd.claims.figure import FigureReading
from icl_gd.claims.formatting import format_value
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
class FigureResult:
    """A sentence read as its figure shows it and at the measurement's precision (``Claim.figure``): the verdict of
    its figure statistic against 1 (resolution units), the kept seeds' values of that statistic (``spread``) and of
    the signed difference (``signed``), each with its interval. ``judged`` is the claim as judged on its figure
    (``figure_claim_of``)."""

    reading: FigureReading
    judged: Claim
    verdict: Verdict
    spread: Spread | None
    signed: Spread | None
    note: str = ""

    @property
    def flip(self) -> Flip | None:
        return flip_point(self.judged, self.spread.values) if self.spread else None

    @property
    def differs(self) -> bool:
        """Whether the signed difference's interval excludes 0 (an equality of losses only): the measurement tells
        the two apart."""
        interval = self.signed.interval if self.signed else None
        return bool(self.reading.equality and interval is not None and (interval[0] > 0 or interval[1] < 0))

    @property
    def finer_than_figure(self) -> bool:
        """An equality sentence the figure shows holding while the measurement tells the two apart: a finding."""
        return self.differs and self.verdict is Verdict.HOLDS and not self.reading.shows_difference

    @property
    def side(self) -> str:
        """Which side of the sentence the model lies on (by its signed mean), "" without a value."""
        return self.reading.side(self.signed.mean) if self.signed and self.signed.values else ""


def figure_claim_of(claim: Claim) -> Claim:
    """``claim`` judged on its figure: its figure statistic against 1 (below: the figure shows no difference)."""
    reading = claim.figure
    if reading is None:
        raise ValueError(f"claim {claim.id} has no figure reading")
    return replace(claim, statistic=reading.statistic, threshold=1.0, share=None, figure=None,
                   direction=Direction.ABOVE if reading.shows_difference else Direction.BELOW)


def read_on_figure(claim: Claim, values: Sequence[float], signed: Sequence[float],
                   failed_seeds: Sequence[tuple[int, str]] = (), reference_problem: str = "", quick: bool = False
                   ) -> FigureResult:
    """The figure reading of ``claim`` from every seed's figure statistic and signed difference (failed seeds left
    out of both, as from the claim's own verdict)."""
    judged = figure_claim_of(claim)
    verdict, note = judge_values(judged, values, failed_seeds, reference_problem, quick, planned=True)
    left_out = {i for i, _ in failed_seeds}
    kept = tuple(v for i, v in enumerate(values) if i not in left_out)
    kept_signed = tuple(v for i, v in enumerate(signed) if i not in left_out)
    return FigureResult(claim.figure, judged, verdict, Spread(kept) if kept else None,
                        Spread(kept_signed) if kept_signed else None, note)


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
    quick: bool = False  # judged from --smoke runs (their set-up is not the full budget's where the plans differ)
    draws: str = ""  # whether the seeds are independent replicates of the test draw, in words ("": not known)
    figure: FigureResult | None = None  # the sentence as its figure shows it (None: it has no figure reading)

    @property
    def headline_verdict(self) -> Verdict:
        """What the headline counts: the figure reading where the sentence has one, else the claim's rule."""
        return self.figure.verdict if self.figure is not None else self.verdict

    @property
    def flip(self) -> Flip | None:
        """The verdict's flip point, from the kept seeds (None without an interval)."""
        kept = self.kept
        return flip_point(self.claim, kept.values) if kept is not None else None

    @property
    def projected_seeds(self) -> int | None:
        """The seeds that would settle it if the kept seeds' mean and spread held (``seeds_to_settle``)."""
        kept = self.kept
        return seeds_to_settle(self.claim, kept.values) if kept is not None else None

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


@dataclass(frozen=True)
class Flip:
    """Where a verdict would change: the claim holds for any threshold beyond ``holds_beyond`` (on its passing
    side) and fails for any threshold beyond ``fails_beyond`` (on its failing side); between the two it is
    inconclusive. They are the ends of the 95% interval (of the mean, or of the share for a per-run claim; the worst
    value of a construction check, where both coincide). ``scale``: "share" when the bar is a share of seeds."""

    holds_beyond: float
    fails_beyond: float
    direction: Direction
    threshold: float
    scale: str = ""

    def text(self) -> str:
        below = self.direction is Direction.BELOW
        bar = "a share bar" if self.scale == "share" else "a bar"
        holds = f"holds for {bar} {'above' if below else 'below'} {format_value(self.holds_beyond)}"
        fails = f"fails for {bar} {'below' if below else 'above'} {format_value(self.fails_beyond)}"
        return f"{holds}, {fails} (now {format_value(self.threshold)})"

    def as_json(self) -> dict:
        return {"holds_beyond": self.holds_beyond, "fails_beyond": self.fails_beyond,
                "threshold": self.threshold, "scale": self.scale or "statistic", "text": self.text()}


def flip_point(claim: Claim, values: Sequence[float]) -> Flip | None:
    """The verdict's flip point for the kept per-seed ``values`` (None without an interval: one seed, a value not
    finite or NaN)."""
    if not values or any(math.isnan(v) for v in values):
        return None
    if claim.is_construction:
        worst = max(values) if claim.direction is Direction.BELOW else min(values)
        return Flip(worst, worst, claim.direction, claim.threshold)
    if claim.share is not None:
        low, high = stats.share_interval(sum(claim.passes(v) for v in values), len(values))
        return Flip(low, high, Direction.ABOVE, claim.share, "share")
    interval = Spread(tuple(values), log=claim.log_scale).interval
    if interval is None:
        return None
    low, high = interval
    return (Flip(high, low, claim.direction, claim.threshold) if claim.direction is Direction.BELOW
            else Flip(low, high, claim.direction, claim.threshold))


def seeds_to_settle(claim: Claim, values: Sequence[float], limit: int = 10_000) -> int | None:
    """How many seeds the claim's interval would need to clear its threshold if the mean and spread of ``values``
    held: the least n with t(0.975, n-1)·sd/√n below |mean - threshold| (on the log scale for a ratio). None when
    it cannot be projected (under two values, a value not finite, the mean on the threshold, or beyond ``limit``)."""
    if len(values) < 2 or claim.share is not None or claim.is_construction:
        return None
    spread = Spread(tuple(values), log=claim.log_scale)
    if not all(math.isfinite(v) for v in values) or (spread.on_log_scale and claim.threshold <= 0):
        return None
    centre = math.log(spread.mean) if spread.on_log_scale else spread.mean
    bar = math.log(claim.threshold) if spread.on_log_scale else claim.threshold
    distance, std = abs(centre - bar), spread.std
    if std == 0:
        return len(values) if distance > 0 else None
    if distance == 0:
        return None
    for n in range(2, limit + 1):
        if stats.t_half_width(std, n) < distance:
            return max(n, len(values))
    return None


def decide(claim: Claim, values: Sequence[float], quick: bool = False) -> tuple[Verdict, str]:
    """The verdict for per-seed ``values`` of the claim's statistic (see the module docstring)."""
    if not values:
        return Verdict.INCONCLUSIVE, "no value measured"
    if any(math.isnan(v) for v in values):
        return Verdict.INCONCLUSIVE, "a seed measured NaN"
    flip = flip_point(claim, values)
    if flip is None:
        reason = ("one seed gives no interval" if len(values) == 1 else
                  "a seed's value is not finite, so its mean has no interval")
        verdict, note = Verdict.INCONCLUSIVE, reason
    else:
        bar = flip.threshold
        holds = bar > flip.holds_beyond if flip.direction is Direction.BELOW else bar < flip.holds_beyond
        fails = bar < flip.fails_beyond if flip.direction is Direction.BELOW else bar > flip.fails_beyond
        verdict = Verdict.HOLDS if holds else Verdict.FAILS if fails else Verdict.INCONCLUSIVE
        what = (f"the 95% interval of the share of passing seeds ({sum(claim.passes(v) for v in values)} of "
                f"{len(values)})" if claim.share is not None else "the 95% interval of the mean")
        note = f"{what} straddles the threshold" if verdict is Verdict.INCONCLUSIVE else ""
        if claim.is_construction and verdict is Verdict.INCONCLUSIVE:  # an identity: every value must pass
            verdict, note = Verdict.FAILS, ""
    if quick and not claim.settled_by_quick:
        shown = f"would be {verdict.value} " if verdict is not Verdict.INCONCLUSIVE else ""
        data = sorted({d for plan in claim.runs for d in plan.quick_data_sets})
        swapped = f" (run on the {', '.join(data)} data set, not the full budget's)" if data else ""
        return Verdict.INCONCLUSIVE, f"{shown}on the --smoke budget{swapped}; this claim needs the full budget".strip()
    return verdict, note


def settlement_note(claim: Claim, values: Sequence[float], runs: int | None = None) -> str:
    """For an inconclusive claim at the full budget: unsettled at its maximum of seeds, or more seeds planned (with
    the projected count that would settle it). ``runs``: the seeds run, counting those left out because their
    training failed (the maximum caps runs, not kept values; default: every value kept)."""
    n, limit = len(values), claim.seed_limit
    ran = n if runs is None else runs
    projected = seeds_to_settle(claim, values)
    projectable = len(values) >= 2 and claim.share is None and all(math.isfinite(v) for v in values)
    about = (f"; about {projected} would settle it if its mean and spread held" if projected is not None
             else "; no count of seeds would, if its mean and spread held (the mean sits on the threshold)"
             if projectable else "")
    if ran >= limit:
        of = f" of {ran} run" if ran != n else ""
        return f"unsettled at {n} seeds{of} (the maximum){about}"
    return f"unsettled at {n} seeds, more planned (up to {limit}){about}"


def seed_list(indices: Sequence[int]) -> str:
    return f"seed{'s' if len(indices) != 1 else ''} {', '.join(map(str, indices))}"


def judge_values(claim: Claim, values: Sequence[float], failed_seeds: Sequence[tuple[int, str]] = (),
                 reference_problem: str = "", quick: bool = False, planned: bool = False) -> tuple[Verdict, str]:
    """The verdict after the declared tests: a degenerate reference is ``no valid reference`` (with its reason),
    seeds whose training failed are left out (and said so), the rest decided by ``decide``. ``planned``: the values
    are our full-budget runs, so an inconclusive verdict says whether more seeds are planned
    (``settlement_note``)."""
    if reference_problem:
        return Verdict.NO_VALID_REFERENCE, reference_problem
    left_out = sorted({i for i, _ in failed_seeds})
    kept = [v for i, v in enumerate(values) if i not in left_out]
    if left_out and not kept:
        return Verdict.INCONCLUSIVE, f"training failed in every seed ({seed_list(left_out)})"
    verdict, note = decide(claim, kept, quick)
    if planned and not quick and verdict is Verdict.INCONCLUSIVE and kept and not any(map(math.isnan, kept)):
        settled = settlement_note(claim, kept, runs=len(values))
        note = f"{note}; {settled}" if note else settled
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


def evaluate_claim(claim: Claim, evidence: Sequence[SeedEvidence], quick: bool = False, draws: str = ""
                   ) -> ClaimResult:
    """Compute the claim's statistic for every seed's evidence, run its declared tests and decide; ``draws``: whether
    the seeds' test draws are their own, in words, as the plan read it from the runs (``plan.draws_text``)."""
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
    verdict, note = judge_values(claim, values, failed, problem, quick, planned=True)
    spread = Spread(tuple(values), log=claim.log_scale) if values else None
    details = getattr(claim.statistic, "details", None)
    text = details(evidence, claim.passes) if details else ""
    return ClaimResult(claim, verdict, spread, note, run_dirs, failed, checked, text, quick, draws,
                       figure_of(claim, evidence, failed, problem, quick))


def figure_of(claim: Claim, evidence: Sequence[SeedEvidence], failed_seeds: Sequence[tuple[int, str]] = (),
              reference_problem: str = "", quick: bool = False) -> FigureResult | None:
    """The claim's figure reading measured from every seed's evidence (None: it has none)."""
    if claim.figure is None:
        return None
    try:
        values = [float(claim.figure.statistic(e)) for e in evidence]
        signed = [float(claim.figure.signed(e)) for e in evidence]
    except MissingEvidence as exc:
        return FigureResult(claim.figure, figure_claim_of(claim), Verdict.INCONCLUSIVE, None, None,
                            f"cannot measure on the figure: {exc}")
    return read_on_figure(claim, values, signed, failed_seeds, reference_problem, quick)
