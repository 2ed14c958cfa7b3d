"""A claim's per-seed statistics: small frozen dataclasses (not closures), so a report, a test or a reader can see
what each one reads from a seed's runs (``SeedEvidence``: ``metrics.json`` means and run directories). Each says
what it computes (``measures``), in the notation of the metric names it reads (``MetricName.symbol``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from icl_gd.claims.evidence import MissingEvidence, SeedEvidence
from icl_gd.claims.evidence import table_rows as _table

# The roll-out statistics live in their own module; they are claims' statistics like the others.
from icl_gd.claims.rollout import (  # noqa: F401
    ROLLOUT_DRAWS,
    ROLLOUT_TASKS,
    OverDraws,
    RolloutGap,
    RolloutRise,
    median_of,
)
from icl_gd.core.metric_name import symbol_of
from icl_gd.regression.metric_names import model_symbol


def _term(name: str) -> str:
    """A metric's symbol as one term of a formula: bracketed when it is words or a formula itself."""
    symbol = symbol_of(name)
    return f"({symbol})" if " " in symbol and not symbol.startswith("(") else symbol


@dataclass(frozen=True)
class Metric:
    """Metric ``key`` of plan ``plan`` (its absolute value when ``absolute``)."""

    key: str
    plan: int = 0
    absolute: bool = False

    @property
    def measures(self) -> str:
        return f"|{_term(self.key)}|" if self.absolute else symbol_of(self.key)

    def __call__(self, evidence: SeedEvidence) -> float:
        value = evidence.value(self.key, self.plan)
        return abs(value) if self.absolute else value


@dataclass(frozen=True)
class Ratio:
    """``numerator / min(denominators)``: how small a quantity is against the smallest of its controls."""

    log_scale: ClassVar[bool] = True  # positive and skewed: seeds are summarised geometrically
    numerator: str
    denominators: tuple[str, ...]
    plan: int = 0

    @property
    def measures(self) -> str:
        below = (_term(self.denominators[0]) if len(self.denominators) == 1 else
                 f"min({'; '.join(symbol_of(k) for k in self.denominators)})")
        return f"{_term(self.numerator)} / {below}"

    def __call__(self, evidence: SeedEvidence) -> float:
        below = min(evidence.value(k, self.plan) for k in self.denominators)
        if below == 0:
            raise MissingEvidence(f"{'/'.join(self.denominators)} is 0: the ratio is undefined")
        return evidence.value(self.numerator, self.plan) / below


@dataclass(frozen=True)
class Difference:
    """``first - second`` of one run."""

    first: str
    second: str
    plan: int = 0

    @property
    def measures(self) -> str:
        return f"{_term(self.first)} - {_term(self.second)}"

    def __call__(self, evidence: SeedEvidence) -> float:
        return evidence.value(self.first, self.plan) - evidence.value(self.second, self.plan)


@dataclass(frozen=True)
class Least:
    """The smallest of several statistics of one run (e.g. a quantity in every layer: it holds where the worst
    layer's does)."""

    parts: tuple[Callable[[SeedEvidence], float], ...]

    @property
    def measures(self) -> str:
        return "smallest of: " + "; ".join(getattr(part, "measures", repr(part)) for part in self.parts)

    def __call__(self, evidence: SeedEvidence) -> float:
        return min(part(evidence) for part in self.parts)


@dataclass(frozen=True)
class WorstIdentity:
    """The largest relative error / tolerance over every `icl-gd verify` identity whose name starts with
    ``prefix`` (< 1 means every one of them holds within its tolerance)."""

    prefix: str
    tolerance: str = ""  # the identities' tolerance, in words (shown when given)

    @property
    def measures(self) -> str:
        shown = f" ({self.tolerance})" if self.tolerance else ""
        return f"max relative error / tolerance{shown} over the float64 identities {self.prefix}…"

    def __call__(self, evidence: SeedEvidence) -> float:
        checks = {k: v for k, v in evidence.metrics[0].items() if k.startswith(self.prefix)}
        if not checks:
            raise MissingEvidence(f"no identity check named {self.prefix!r}...")
        return max(float(v["max_rel_error"]) / float(v["tolerance"]) for v in checks.values())


def metric(key: str, plan: int = 0, absolute: bool = False) -> Metric:
    return Metric(key, plan, absolute)


def ratio(numerator: str, *denominators: str, plan: int = 0) -> Ratio:
    return Ratio(numerator, denominators, plan)


def difference(first: str, second: str, plan: int = 0) -> Difference:
    return Difference(first, second, plan)


def least(*parts: Callable[[SeedEvidence], float]) -> Least:
    return Least(parts)


def worst_identity(prefix: str, tolerance: str = "") -> WorstIdentity:
    return WorstIdentity(prefix, tolerance)


@dataclass(frozen=True)
class RelGap:
    """``(first - second) / second`` of one run (its absolute value when ``absolute``)."""

    first: str
    second: str
    absolute: bool = False
    plan: int = 0

    @property
    def measures(self) -> str:
        a, b = _term(self.first), _term(self.second)
        return f"|{a} - {b}| / {b}" if self.absolute else f"({a} - {b}) / {b}"

    def __call__(self, evidence: SeedEvidence) -> float:
        reference = evidence.value(self.second, self.plan)
        if reference == 0:
            raise MissingEvidence(f"{self.second} is 0: the relative gap is undefined")
        gap = (evidence.value(self.first, self.plan) - reference) / reference
        return abs(gap) if self.absolute else gap


@dataclass(frozen=True)
class OodGap:
    """Largest |L_trained - L_ref| / L_ref over the points of ``sweeps`` in the run's ``ood.csv``."""

    reference: str = "gd"
    sweeps: tuple[str, ...] = ("input_scale", "weight_scale")
    plan: int = 0

    @property
    def measures(self) -> str:
        ref, sweeps = model_symbol(self.reference), " and ".join(s.replace("_", " ") for s in self.sweeps)
        return f"largest |L_trained - L_{ref}| / L_{ref} over the {sweeps} sweep{'s' if len(self.sweeps) > 1 else ''}"

    def __call__(self, evidence: SeedEvidence) -> float:
        return max(abs(t - r) / r for t, r in ood_points(evidence, self.reference, self.sweeps, self.plan))


def ood_points(evidence: SeedEvidence, reference: str, sweeps: tuple[str, ...], plan: int = 0
               ) -> list[tuple[float, float]]:
    """(L_trained, L_ref) at every point of ``sweeps`` in the run's ``ood.csv`` (MissingEvidence when none)."""
    losses: dict[tuple[str, str], dict[str, float]] = {}
    for row in _table(evidence, "ood.csv", plan):
        if row["sweep"] in sweeps:
            losses.setdefault((row["sweep"], row["value"]), {})[row["model"]] = float(row["loss"])
    points = [(p["trained"], p[reference]) for p in losses.values() if {"trained", reference} <= set(p)]
    if not points:
        raise MissingEvidence(f"ood.csv has no trained/{reference} rows for {', '.join(sweeps)}")
    return points


@dataclass(frozen=True)
class WorstDeviation:
    """The largest |value_p - expected_p| / expected_p of metric ``key`` over plans p = 0, 1, ... (one expected
    value per plan, e.g. numbers the paper lists for several set-ups)."""

    key: str
    expected: tuple[float, ...]

    @property
    def measures(self) -> str:
        expected = ", ".join(f"{e:g}" for e in self.expected)
        return f"largest |{_term(self.key)} - expected| / expected over the plans (expected {expected} in turn)"

    def __call__(self, evidence: SeedEvidence) -> float:
        if len(evidence.metrics) < len(self.expected):
            raise MissingEvidence(f"{len(self.expected)} plans expected, {len(evidence.metrics)} given")
        return max(abs(evidence.value(self.key, p) - e) / abs(e) for p, e in enumerate(self.expected))


def rel_gap(first: str, second: str, absolute: bool = False, plan: int = 0) -> RelGap:
    return RelGap(first, second, absolute, plan)


@dataclass(frozen=True)
class GdppReference:
    """Whether a seed's GD++ reference (``reference``: its test loss, e.g. ``loss_gdpp`` tuned by L-BFGS) is one:
    degenerate when it fell back to plain GD (its loss equal to GD's, ``gd``, within round-off: γ = 0), or when it is
    more than ``tolerance`` above the loss another tuning of GD++ (``best``) reaches on the same test tasks, so it is
    not the best GD++ found. Returns the reason ("" when valid); a metric the run lacks is skipped, except the
    reference's own."""

    reference: str = "loss_gdpp"
    gd: str = "loss_gd"
    best: str = ""
    tolerance: float = 0.02
    name: str = "GD++ (L-BFGS)"
    best_name: str = "GD++ tuned the authors' way"
    # > 0: the bar in loss units (a figure's resolution), used instead of the relative ``tolerance``
    resolution: float = 0.0

    def __call__(self, evidence: SeedEvidence) -> str:
        loss = evidence.value(self.reference)
        gd = _optional(evidence, self.gd)
        if gd is not None and math.isclose(loss, gd, rel_tol=1e-6):
            return f"{self.name} fell back to GD (γ = 0): its loss equals GD's, {loss:.5g}"
        best = _optional(evidence, self.best) if self.best else None
        if best is not None and (loss - best > self.resolution if self.resolution else
                                 loss > (1 + self.tolerance) * best):
            bar = (f"more than the figure's resolution {self.resolution:.3g}" if self.resolution else
                   f"more than {self.tolerance:.0%}")
            return (f"{self.name}'s loss {loss:.4g} is {loss / best - 1:.0%} above the {best:.4g} that "
                    f"{self.best_name} reaches on the same test tasks ({bar}), so it is not the best GD++ found")
        return ""


def _optional(evidence: SeedEvidence, key: str) -> float | None:
    try:
        return evidence.value(key)
    except MissingEvidence:
        return None
