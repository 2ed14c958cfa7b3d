"""The damped roll-out's statistics (von Oswald et al. App. A.6, Fig. 10): the trained layer applied n times
against n steps of GD, on each independent test draw of a run (``rollout_draws.csv``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from icl_gd.claims.evidence import MissingEvidence, SeedEvidence
from icl_gd.claims.evidence import table_rows as _table
from icl_gd.claims.formatting import format_value
from icl_gd.core import stats
from icl_gd.core.results import read_json
from icl_gd.regression.rollout.depth import diverges
from icl_gd.regression.metric_names import model_symbol

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
    # > 0: the largest |L_trained(n) - L_ref(n)| in units of a figure's resolution (loss units), not relative
    resolution: float = 0.0
    signed: bool = False  # the signed relative gap (L_trained - L_ref) / L_ref at the n where |gap| is largest

    @property
    def measures(self) -> str:
        ref, at = model_symbol(self.reference), f"over n applications at λ = {self.damping:g}"
        if self.resolution:
            return (f"largest |L_trained(n) - L_{ref}(n)| {at} / {self.resolution:.3g} (the figure's resolution) "
                    f"({_COLUMNS[self.column]})")
        if self.signed:
            return (f"(L_trained(n) - L_{ref}(n)) / L_{ref}(n) at the n where it is largest in size, {at} "
                    f"({_COLUMNS[self.column]})")
        return f"largest |L_trained(n) - L_{ref}(n)| / L_{ref}(n) {at} ({_COLUMNS[self.column]})"

    def of(self, curves: dict[str, list[float]]) -> float:
        """The statistic of one test draw's curves (model -> loss after n = 1, 2, ...)."""
        if not {"trained", self.reference} <= set(curves):
            raise MissingEvidence(f"no trained/{self.reference} curves at damping {self.damping}")
        pairs = list(zip(curves["trained"], curves[self.reference]))
        if self.resolution:
            return max(abs(t - r) / self.resolution if math.isfinite(t) and math.isfinite(r) else math.inf
                       for t, r in pairs)
        gaps = [(t - r) / r if math.isfinite(t) and math.isfinite(r) else math.inf for t, r in pairs]
        if self.signed:
            return max(gaps, key=abs)
        return max(abs(g) for g in gaps)

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
        """How many independent test draws the value rests on (each seed's own draws, or the same draws for every
        seed, from its runs' ``test_seed``) and how many of them diverge; every seed's per-draw values and how many
        of its draws hold; seed 0's tasks beyond the stability bound at the statistic's damping."""
        s = self.statistic
        seeds, held, total, diverged, every_draw = [], 0, 0, 0, []
        for i, e in enumerate(evidence):
            curves = _depth_curves(e, s.damping, s.plan, s.column, ROLLOUT_DRAWS)
            every_draw += list(curves.values())
            values = [s.of(by_model) for by_model in curves.values()]
            ok = sum(passes(v) for v in values)
            held, total = held + ok, total + len(values)
            diverged += sum(_diverges(by_model) for by_model in curves.values())
            seeds.append(f"seed {i}: {', '.join(format_value(v) for v in values)} ({ok} of {len(values)} hold)")
        test_seeds = {_test_seed(e, s.plan) for e in evidence}
        per_seed = total // max(len(evidence), 1)
        independent = (f"rests on {total} independent test draws ({len(evidence)} seeds × {per_seed}, each seed its "
                       "own)" if len(test_seeds) == len(evidence) and None not in test_seeds else
                       f"rests on {per_seed} test draws, the same for every seed (the seeds share test_seed "
                       f"{', '.join(map(str, sorted(t for t in test_seeds if t is not None)))}): not independent "
                       "replicates of the draw")
        text = (f"{independent}; {diverged} of {total} draws diverge {_interval(diverged, total)} (a loss of the "
                f"trained layer or GD after the last application not finite or above the first's); {held} of {total} "
                f"draws hold {_interval(held, total)}; {falling_shares(every_draw)}; per draw: {'; '.join(seeds)}")
        if evidence:
            text += "; seed 0's draws: " + _unstable_tasks(evidence[0], s.damping, s.plan)
        return text


def _interval(count: int, total: int) -> str:
    """"(0.627 [0.544, 0.704])": a share with its exact (Clopper-Pearson) 95% interval ("" of none)."""
    if not total:
        return ""
    low, high = stats.share_interval(count, total)
    return f"({count / total:.3f} [{low:.3f}, {high:.3f}])"


def _share(count: int, total: int) -> str:
    """"94 of 150 (0.627 [0.544, 0.704])": a count of test draws with its share's interval."""
    return f"{count} of {total} {_interval(count, total)}".rstrip()


def falls_at_every_step(curve: Sequence[float]) -> bool:
    """Whether a mean-loss curve (loss after n = 1, 2, ... applications) falls at every step, every value finite."""
    return all(math.isfinite(v) for v in curve) and all(b < a for a, b in zip(curve, curve[1:]))


def falling_shares(draws: Sequence[dict[str, list[float]]], models: Sequence[str] = ("trained", "gd")) -> str:
    """Per method, the share of test draws on which its mean loss falls at every step, and the share on which its
    curve diverges, each with its exact (Clopper-Pearson) 95% interval: the quantities 'steadily decreasing' is
    about, counted over draws."""
    parts = []
    for model in models:
        curves = [d[model] for d in draws if model in d]
        parts.append(f"{model}: falls at every step on {_share(sum(map(falls_at_every_step, curves)), len(curves))}, "
                     f"diverges on {_share(sum(map(diverges, curves)), len(curves))}")
    both = [d for d in draws if all(m in d for m in models)]
    parts.append(f"both fall at every step on "
                 f"{_share(sum(all(falls_at_every_step(d[m]) for m in models) for d in both), len(both))}")
    return "test draws: " + "; ".join(parts)


def rollout_shares(rows: Sequence[dict[str, str]], column: str = "loss") -> dict[float, dict[str, list[list[float]]]]:
    """Per damping λ of a ``rollout_draws.csv`` (rows {seed, draw, damping, applications, model, loss}), each
    method's curves, one per independent test draw: a method's curve that several seeds share on one draw (GD's,
    the same for every trained seed scored on that draw) counts once."""
    curves: dict[float, dict[tuple[str, str, str], dict[int, float]]] = {}
    for row in rows:
        key = (row["model"], row.get("seed", "0"), row["draw"])
        curves.setdefault(float(row["damping"]), {}).setdefault(key, {})[int(row["applications"])] = float(row[column])
    out: dict[float, dict[str, list[list[float]]]] = {}
    for damping, by_key in sorted(curves.items()):
        seen: dict[str, dict[tuple[str, tuple[float, ...]], list[float]]] = {}
        for (model, _, draw), by_n in by_key.items():
            curve = [by_n[n] for n in sorted(by_n)]
            seen.setdefault(model, {})[(draw, tuple(curve))] = curve
        out[damping] = {model: list(unique.values()) for model, unique in seen.items()}
    return out


SHARES_START = "<!-- rollout-shares:start (written from a rollout_draws.csv by rollout_shares_table; do not edit) -->"
SHARES_END = "<!-- rollout-shares:end -->"


def rollout_shares_table(rows: Sequence[dict[str, str]], models: Sequence[str] = ("trained", "gd")) -> str:
    """The damping scan as shares of test draws with exact (Clopper-Pearson) 95% intervals: per λ and method, the
    draws on which its mean loss falls at every application, and those on which its curve diverges."""
    head = ["| λ | " + " | ".join(f"{m}: falls at every step | {m}: diverges" for m in models) + " |",
            "|---|" + "---|---|" * len(models)]
    body = []
    for damping, by_model in rollout_shares(rows).items():
        cells = []
        for model in models:
            curves = by_model.get(model, [])
            cells += [_share(sum(map(falls_at_every_step, curves)), len(curves)),
                      _share(sum(map(diverges, curves)), len(curves))]
        body.append(f"| {damping:g} | " + " | ".join(cells) + " |")
    return "\n".join([SHARES_START, "", *head, *body, "", SHARES_END])


def _diverges(curves: dict[str, list[float]]) -> bool:
    """Whether the trained layer's or GD's curve ``diverges`` (its loss after the last application not finite or
    above the first's)."""
    return any(diverges(c) for m, c in curves.items() if m in ("trained", "gd"))


def _test_seed(evidence: SeedEvidence, plan: int) -> int | None:
    """The test_seed the seed's run was scored on (its config.json), None when it is not recorded."""
    try:
        return int(read_json(Path(evidence.run_dirs[plan]) / "config.json")["config"]["evaluation"]["test_seed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
