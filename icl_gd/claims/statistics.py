"""A claim's per-seed statistics: small frozen dataclasses (not closures), so a report, a test or a reader can see
what each one reads from a seed's runs (``SeedEvidence``: ``metrics.json`` means and run directories). Each says
what it computes (``measures``), in the notation of the metric names it reads (``MetricName.symbol``)."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from icl_gd.claims.formatting import format_value
from icl_gd.claims.evidence import MissingEvidence, SeedEvidence
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


def _table(evidence: SeedEvidence, name: str, plan: int = 0) -> list[dict[str, str]]:
    """The rows of ``name`` (e.g. ``ood.csv``) in the plan's run directory; a missing file is a MissingEvidence."""
    path = Path(evidence.run_dirs[plan]) / name
    if not path.is_file():
        raise MissingEvidence(f"{path} is missing")
    with path.open() as handle:
        return list(csv.DictReader(handle))


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
        losses: dict[tuple[str, str], dict[str, float]] = {}
        for row in _table(evidence, "ood.csv", self.plan):
            if row["sweep"] in self.sweeps:
                losses.setdefault((row["sweep"], row["value"]), {})[row["model"]] = float(row["loss"])
        gaps = [abs(p["trained"] - p[self.reference]) / p[self.reference] for p in losses.values()
                if {"trained", self.reference} <= set(p)]
        if not gaps:
            raise MissingEvidence(f"ood.csv has no trained/{self.reference} rows for {', '.join(self.sweeps)}")
        return max(gaps)


_COLUMNS = {"loss": "mean loss over the test tasks", "median_loss": "median loss over the test tasks"}


def _depth_curves(evidence: SeedEvidence, damping: float, plan: int, column: str = "loss",
                  table: str = "depth.csv") -> dict[int, dict[str, list[float]]]:
    """draw -> model -> test loss (``column``: ``loss`` the mean over tasks, ``median_loss`` the median) after
    n = 1, 2, ... applications at ``damping``, from ``table`` (``depth.csv``: one draw, 0; ``rollout_draws.csv``:
    a ``draw`` column)."""
    curves: dict[int, dict[str, dict[int, float]]] = {}
    for row in _table(evidence, table, plan):
        if column not in row:
            raise MissingEvidence(f"{table} has no column {column!r}")
        if math.isclose(float(row["damping"]), damping):
            by_model = curves.setdefault(int(row.get("draw") or 0), {})
            by_model.setdefault(row["model"], {})[int(row["applications"])] = float(row[column])
    if not curves:
        raise MissingEvidence(f"{table} has no rows at damping {damping}")
    return {draw: {model: [by_n[n] for n in sorted(by_n)] for model, by_n in models.items()}
            for draw, models in sorted(curves.items())}


@dataclass(frozen=True)
class RolloutGap:
    """Largest |L_trained(n) - L_ref(n)| / L_ref(n) over n = 1..max applications at ``damping`` (``depth.csv``: the
    trained layer applied n times with its update scaled by λ, the reference's step λη taken n times)."""

    damping: float
    reference: str = "gd"
    plan: int = 0
    column: str = "loss"

    @property
    def measures(self) -> str:
        ref = model_symbol(self.reference)
        return (f"largest |L_trained(n) - L_{ref}(n)| / L_{ref}(n) over n applications at λ = {self.damping:g} "
                f"({_COLUMNS[self.column]})")

    def of(self, curves: dict[str, list[float]]) -> float:
        """The statistic of one test draw's curves (model -> loss after n = 1, 2, ...)."""
        if not {"trained", self.reference} <= set(curves):
            raise MissingEvidence(f"no trained/{self.reference} curves at damping {self.damping}")
        gaps = [abs(t - r) / r if math.isfinite(t) and math.isfinite(r) else math.inf
                for t, r in zip(curves["trained"], curves[self.reference])]
        return max(gaps)

    def __call__(self, evidence: SeedEvidence) -> float:
        return self.of(_depth_curves(evidence, self.damping, self.plan, self.column)[0])


@dataclass(frozen=True)
class RolloutRise:
    """The largest step-to-step relative change (L(n+1) - L(n)) / L(n) of ``models``' loss over n at ``damping``
    (``depth.csv``; ``column``: ``loss``, the mean over tasks, or ``median_loss``): below 0 when every application
    lowers every model's loss."""

    damping: float
    models: tuple[str, ...] = ("trained", "gd")
    plan: int = 0
    column: str = "loss"

    @property
    def measures(self) -> str:
        models = " and ".join(model_symbol(m) for m in self.models)
        return (f"largest (L(n+1) - L(n)) / L(n) over n and {models} at λ = {self.damping:g} "
                f"({_COLUMNS[self.column]})")

    def of(self, curves: dict[str, list[float]]) -> float:
        """The statistic of one test draw's curves (model -> loss after n = 1, 2, ...)."""
        missing = [m for m in self.models if m not in curves or len(curves[m]) < 2]
        if missing:
            raise MissingEvidence(f"no curve of {', '.join(missing)} at damping {self.damping}")
        rises = [(b - a) / a if math.isfinite(a) and math.isfinite(b) else math.inf
                 for m in self.models for a, b in zip(curves[m], curves[m][1:])]
        return max(rises)

    def __call__(self, evidence: SeedEvidence) -> float:
        return self.of(_depth_curves(evidence, self.damping, self.plan, self.column)[0])


ROLLOUT_DRAWS, ROLLOUT_TASKS = "rollout_draws.csv", "rollout_tasks.csv"


def median_of(values: Sequence[float]) -> float:
    """The median (of an even count, the mean of the two middle values); ``inf`` sorts last, so infinite values
    move it only when they are at least half of them."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(frozen=True)
class OverDraws:
    """A roll-out statistic (``RolloutGap``, ``RolloutRise``) measured on each independent test draw of the run's
    ``rollout_draws.csv`` (draw 0: the test set; the others fresh draws of as many tasks), a seed's value the
    median over its draws. Ours: a mean loss over tasks after many damped steps is decided by whether the draw holds
    a task beyond GD's stability bound (about one in 10 000), so one draw is luck; the median is the value most
    draws reach, so the claim holds for a seed when most of its draws hold. ``details`` shows every draw."""

    statistic: RolloutGap | RolloutRise

    rule: ClassVar[str] = ("ours: a seed's value is the median over its independent test draws of the paper's "
                           "size (draw 0 the run's test set): the statistic on one draw of 10 000 tasks is decided by "
                           "whether that draw holds a task beyond GD's stability bound 2N/(λη)")

    @property
    def measures(self) -> str:
        return f"{self.statistic.measures} on each independent test draw, a seed's value its median ({self.rule})"

    def per_draw(self, evidence: SeedEvidence) -> list[float]:
        s = self.statistic
        curves = _depth_curves(evidence, s.damping, s.plan, s.column, ROLLOUT_DRAWS)
        return [s.of(by_model) for by_model in curves.values()]

    def __call__(self, evidence: SeedEvidence) -> float:
        return median_of(self.per_draw(evidence))

    def details(self, evidence: Sequence[SeedEvidence], passes: Callable[[float], bool]) -> str:
        """Every seed's per-draw values and how many of its draws hold; the share of all draws that hold; each draw's
        tasks beyond the stability bound at the statistic's damping (seed 0's run: the draws are the same for every
        seed), or its worst task when none is."""

        seeds, held, total = [], 0, 0
        for i, e in enumerate(evidence):
            values = self.per_draw(e)
            ok = sum(passes(v) for v in values)
            held, total = held + ok, total + len(values)
            seeds.append(f"seed {i}: {', '.join(format_value(v) for v in values)} ({ok} of {len(values)} hold)")
        text = f"per draw: {'; '.join(seeds)}; {held} of {total} draws hold"
        if evidence:
            text += "; " + _unstable_tasks(evidence[0], self.statistic.damping, self.statistic.plan)
        return text


def _unstable_tasks(evidence: SeedEvidence, damping: float, plan: int) -> str:
    """Each draw's tasks beyond GD's stability bound at ``damping`` (``rollout_tasks.csv``), in words."""
    try:
        rows = [r for r in _table(evidence, ROLLOUT_TASKS, plan) if math.isclose(float(r["damping"]), damping)]
    except MissingEvidence:
        return f"{ROLLOUT_TASKS} is missing"
    if not rows:
        return f"{ROLLOUT_TASKS} has no rows at damping {damping}"
    by_draw: dict[int, list[dict[str, str]]] = {}
    for r in rows:
        by_draw.setdefault(int(r["draw"]), []).append(r)
    bound = float(rows[0]["bound"])
    parts = []
    for draw, tasks in sorted(by_draw.items()):
        named = ", ".join(f"task {t['task']} λ_max {float(t['lambda_max']):.3f}" for t in tasks)
        count = int(tasks[0]["beyond_count"])
        parts.append(f"draw {draw}: none (worst {named})" if count == 0 else
                     f"draw {draw}: {count} ({named}{', ...' if count > len(tasks) else ''})")
    return f"tasks with λ_max(XᵀX) beyond the bound 2N/(λη) = {bound:.3f}: " + "; ".join(parts)


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

    def __call__(self, evidence: SeedEvidence) -> str:
        loss = evidence.value(self.reference)
        gd = _optional(evidence, self.gd)
        if gd is not None and math.isclose(loss, gd, rel_tol=1e-6):
            return f"{self.name} fell back to GD (γ = 0): its loss equals GD's, {loss:.5g}"
        best = _optional(evidence, self.best) if self.best else None
        if best is not None and loss > (1 + self.tolerance) * best:
            return (f"{self.name}'s loss {loss:.4g} is {loss / best - 1:.0%} above the {best:.4g} that "
                    f"{self.best_name} reaches on the same test tasks, so it is not the best GD++ found")
        return ""


def _optional(evidence: SeedEvidence, key: str) -> float | None:
    try:
        return evidence.value(key)
    except MissingEvidence:
        return None
