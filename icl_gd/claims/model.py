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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from icl_gd.core import stats
from icl_gd.core.errors import ConfigError

VERIFY_STUDY = "verify"  # the pseudo-study: every `icl-gd verify` identity, run in-process (seconds)


class Verdict(str, Enum):
    HOLDS = "holds"
    FAILS = "fails"
    INCONCLUSIVE = "inconclusive"
    NO_VALID_REFERENCE = "no valid reference"  # the reference the claim compares with degenerated (ReferenceCheck)


class Direction(str, Enum):
    BELOW = "<"  # the claim holds when the statistic is below the threshold
    ABOVE = ">"


@dataclass(frozen=True)
class RunPlan:
    """The runs one claim needs: ``seeds`` runs (seed 0, 1, ...) of ``study`` with ``preset`` and ``overrides``.

    Under ``--quick`` the runs use ``quick_preset``, ``overrides + quick_overrides`` and ``quick_seeds`` seeds. ``estimate_s`` and
    ``quick_estimate_s`` are the wall seconds one seed's run took on a 2-core machine (for the printed plan only).
    ``shared_s``: the seconds of a first seed's work that its later seeds read instead of doing it (what the plan's
    seeds share and do not change: the references' tuning, ``icl_gd.core.shared``); a later seed's estimate is the
    first's less that.
    """

    study: str
    preset: str = "default"
    overrides: tuple[str, ...] = ()
    seeds: int = 1
    quick_overrides: tuple[str, ...] = ()
    quick_seeds: int | None = None
    quick_preset: str | None = None  # None: the same preset under --quick
    estimate_s: float = 60.0
    quick_estimate_s: float = 10.0
    shared_s: float = 0.0

    def seed_count(self, quick: bool) -> int:
        return (self.quick_seeds or self.seeds) if quick else self.seeds

    def run_overrides(self, quick: bool) -> tuple[str, ...]:
        return self.overrides + (self.quick_overrides if quick else ())

    def run_preset(self, quick: bool) -> str:
        return (self.quick_preset or self.preset) if quick else self.preset

    @property
    def quick_is_full(self) -> bool:
        return (self.run_preset(True), self.run_overrides(True), self.seed_count(True)) == \
            (self.run_preset(False), self.run_overrides(False), self.seed_count(False))

    def estimate(self, quick: bool, seed: int = 0) -> float:
        """Seed ``seed``'s estimate: the first seed's, or a later one's (less ``shared_s``) at the full budget."""
        if quick:
            return self.quick_estimate_s
        return self.estimate_s - self.shared_s if seed > 0 else self.estimate_s


@dataclass(frozen=True)
class SeedEvidence:
    """What one seed's runs measured: ``metrics[i]`` is ``metrics.json["mean"]`` of the i-th plan's run for this
    seed (one seed per run), ``run_dirs[i]`` its directory (for claims that read a table such as ``ood.csv``)."""

    metrics: tuple[Mapping[str, Any], ...]
    run_dirs: tuple[Path, ...]

    def value(self, key: str, plan: int = 0) -> float:
        """A scalar metric, or ``key[i]`` for item i of a list-valued one (a per-step metric); a missing or
        non-numeric one is a MissingEvidence (the claim becomes inconclusive)."""
        metrics = self.metrics[plan]
        indexed = _INDEXED.fullmatch(key)
        name = indexed.group(1) if indexed else key
        if name not in metrics:
            raise MissingEvidence(f"metric {name!r} is not in the run's metrics.json")
        value = metrics[name]
        if indexed:
            if not isinstance(value, list) or not value:
                raise MissingEvidence(f"metric {name!r} is not a non-empty list ({value!r})")
            value = value[int(indexed.group(2))] if -len(value) <= int(indexed.group(2)) < len(value) else None
        if isinstance(value, str) and value in ("inf", "-inf"):
            return float(value)
        if value is None or isinstance(value, (bool, list, dict)):
            raise MissingEvidence(f"metric {key!r} is not a finite number ({value!r})")
        return float(value)


_INDEXED = re.compile(r"(.+)\[(-?\d+)\]")


class MissingEvidence(LookupError):
    """A claim's statistic could not be computed from the runs it was given."""


class Kind(str, Enum):
    PAPER = "paper"  # an empirical statement the paper makes (quoted)
    OURS = "ours"  # a check the paper does not make (our control or our extension of its statement)
    CONSTRUCTION = "construction"  # an identity of icl-gd's own code: a construction check, not a claim
    BEYOND = "beyond"  # beyond the two papers: a statement of later work (quoted from it, ``paper`` names it) or ours


@dataclass(frozen=True)
class Margin:
    """How far apart the two codes' means may be and still agree (``authors.agreement``), on the claim statistic's
    own scale (the log scale for a ratio), and where that number comes from."""

    value: float
    source: str


@dataclass(frozen=True)
class TrainingCheck:
    """A seed's training failed when a trained model's final test loss (any of ``losses``, metrics of plan 0) is not
    below ``fraction`` × the untrained model's (``untrained``: the zero predictor's loss, the plateau a model starts
    on): it never left the plateau, or it diverged. Such a seed is flagged, counted and left out of the verdict and
    of the comparison with the authors' code."""

    losses: tuple[str, ...]
    untrained: str = "loss_zero"
    fraction: float = 0.9
    source: str = ("ours: a seed whose final test loss is not at least 10% below the untrained model's (the zero "
                   "predictor's, the plateau training starts on) never left that plateau or diverged")

    def failed(self, losses: Sequence[float], untrained: float) -> str:
        """The reason one seed failed ("" when it trained), from its trained models' losses."""
        bound = self.fraction * untrained
        bad = [v for v in losses if not (math.isfinite(v) and v < bound)]
        if not bad:
            return ""
        return (f"final loss {', '.join(f'{v:.4g}' for v in bad)} not below {self.fraction:g} × the untrained "
                f"model's {untrained:.4g}")

    def __call__(self, evidence: SeedEvidence) -> str:
        return self.failed([evidence.value(k) for k in self.losses], evidence.value(self.untrained))


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One statement, as a check over the runs it needs.

    ``location`` is the place in the paper (arXiv 2212.07677v2 for von Oswald et al.), ``quote`` the paper's own
    words (short, verbatim; empty for ``Kind.OURS``), ``statement`` ours in one sentence. ``threshold_source`` says
    where the threshold comes from: a number the paper gives (with its location), the authors' code's value measured
    here, or a stated rule ("ours: ..."). ``follows`` says, where the paper's text and the authors' code differ,
    which one the claim's runs follow.

    ``variant_of`` names the claim whose sentence this one tests again another way (e.g. against a reference tuned
    otherwise): a variant is a sub-row of that claim, not counted on its own. ``margin`` is the equivalence margin
    of the comparison with the authors' code; ``training`` the test of a failed seed; ``reference`` a callable on one
    seed's evidence returning why the claim's reference degenerated ("" when it is valid).
    """

    id: str
    paper: str
    location: str
    kind: Kind
    statement: str
    runs: tuple[RunPlan, ...]
    statistic: Callable[[SeedEvidence], float]
    measures: str  # what the statistic is, e.g. "|L_trained - L_GD| / L_GD"
    threshold: float
    direction: Direction
    threshold_source: str
    quote: str = ""
    follows: str = ""
    # False when the --quick budget (fewer steps or seeds) cannot settle this claim: it is then reported as
    # inconclusive with the measured value shown, never guessed.
    quick_decisive: bool = True
    figures: tuple[str, ...] = ()  # paths inside the first plan's first run directory, shown in the report
    variant_of: str = ""
    margin: Margin | None = None
    training: TrainingCheck | None = None
    reference: Callable[[SeedEvidence], str] | None = None

    def __post_init__(self) -> None:
        if not self.runs:
            raise ConfigError(f"claim {self.id} needs at least one run")
        if not math.isfinite(self.threshold):
            raise ConfigError(f"claim {self.id}: threshold must be finite, got {self.threshold}")
        if not self.threshold_source.strip():
            raise ConfigError(f"claim {self.id}: say where the threshold comes from (threshold_source)")

    @property
    def author(self) -> str:
        """The first author's surname, as the tables name the paper ("von Oswald", "Irie", "Fu", "Ahn")."""
        return self.paper.split(",")[0].split(" et al")[0]

    @property
    def is_construction(self) -> bool:
        return self.kind is Kind.CONSTRUCTION

    @property
    def settled_by_quick(self) -> bool:
        """Whether a --quick verdict stands: declared so, or every run plan's quick budget is its full one."""
        return self.quick_decisive or all(plan.quick_is_full for plan in self.runs)

    def passes(self, value: float) -> bool:
        return value < self.threshold if self.direction is Direction.BELOW else value > self.threshold

    @property
    def log_scale(self) -> bool:
        """Whether seeds are summarised on the log scale (the statistic says so; plain functions do not)."""
        return bool(getattr(self.statistic, "log_scale", False))


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
        return Verdict.INCONCLUSIVE, f"{shown}on the --quick budget; this claim needs the full budget".strip()
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
    return ClaimResult(claim, verdict, spread, note, run_dirs, failed, checked, text)
