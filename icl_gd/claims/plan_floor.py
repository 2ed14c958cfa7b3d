"""The products floor of a reproduction plan (``icl-gd reproduce --plan``): per plan, its estimate beside the floor.

A plan here is every seed of one run set (study, preset and overrides but the seed). Its floor a seed is the
matrix-product FLOPs of the seed's training (``icl_gd.platform.floor``, from what the study declares) over one
core's peak in the training's precision; a study that declares no training, or whose declaration cannot be built
here (a dataset it needs is missing: said below the table), prints ``no model`` and adds nothing to the floor's
totals. The
totals set the estimate beside the floor in CPU minutes (one core a run) and in wall minutes on the workers (runs
spread longest first, each to the least-loaded worker, as ``reproduce`` starts them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icl_gd.core.errors import ConfigError, DatasetNotFoundError
from icl_gd.core.study import StudyRegistry, resolve_study_config
from icl_gd.claims.plan import Plan, PlannedRun, minutes_text, packed_s, plan_key
from icl_gd.platform.floor import Peak, WorkFlops, seed_flops, seed_floor_s, training_flops


@dataclass(frozen=True)
class PlanFloor:
    """One plan: its ``runs`` (one a seed), the estimate a seed (the mean of its seeds': a later seed can cost less
    than the first, ``RunPlan.shared_s``), and a seed's trainings with their FLOPs (None: its
    study has no FLOP model, or ``unbuilt`` says why it could not be counted here); ``trained_s``: the mean training
    wall time its finished seeds recorded (None: none did)."""

    runs: tuple[PlannedRun, ...]
    estimate_s: float
    trainings: tuple[WorkFlops, ...] | None
    trained_s: float | None
    unbuilt: str | None = None

    @property
    def precisions(self) -> set[str]:
        return set() if self.trainings is None else {t.precision for t in self.trainings}

    @property
    def flops(self) -> int | None:
        return None if self.trainings is None else seed_flops(self.trainings)

    @property
    def name(self) -> str:
        spec = self.runs[0].spec
        overrides = [o for o in spec.overrides if not o.startswith("seed=") and o.replace(" ", "") != "seeds=1"]
        return " ".join([spec.study, spec.preset, *overrides])

    def floor_s(self, peak: Peak) -> float | None:
        return None if self.trainings is None else seed_floor_s(self.trainings, peak)


def plan_floors(plan: Plan, registry: StudyRegistry) -> list[PlanFloor]:
    """Every plan of ``plan``'s runs (in order of first appearance) with its floor FLOPs, counted once a plan, and
    the training wall time its finished seeds recorded (their ``RunRecord``)."""
    groups: dict[tuple, list[PlannedRun]] = {}
    for p in plan.runs:
        groups.setdefault(plan_key(p.spec), []).append(p)
    floors = []
    for (study_name, preset, overrides), runs in groups.items():
        study = registry.get(study_name)
        try:
            trainings, unbuilt = training_flops(study, resolve_study_config(study, preset, overrides)), None
        except (ConfigError, DatasetNotFoundError) as error:  # e.g. a dataset it needs is missing: so would its run
            trainings, unbuilt = None, str(error)
        mean_s = sum(p.estimate_s for p in runs) / len(runs)  # a later seed reads what the first computed
        trained = [t for p in runs if (t := plan.records[p.spec].training_s) is not None]
        floors.append(PlanFloor(tuple(runs), mean_s, trainings, sum(trained) / len(trained) if trained else None,
                                unbuilt))
    return floors


def _min(seconds: float | None) -> str:
    """Minutes, or seconds under one (a floor can be a fraction of a minute)."""
    if seconds is None:
        return "-"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.{1 if seconds < 10 else 0}f} s"


def floor_lines(floors: Sequence[PlanFloor], peak: Peak, workers: int, threads: int = 1) -> list[str]:
    """The printed table: a header, one line a plan, then the totals (runs on ``threads`` threads each)."""
    lines = [f"products floor: each seed's matrix-product FLOPs at {peak.gflops:.1f} GFLOP/s a core, float64 "
             f"products at {peak.of('float64'):.1f} ({peak.source}); estimate: the plan's a seed (its seeds' mean); "
             f"trained: the training its seeds measured (wall, evaluations left out)",
             f"  {'seeds':>5} {'GFLOP/seed':>11} {'estimate':>10} {'floor':>10} {'est/floor':>9} "
             f"{'trained':>10} {'trained/floor':>13}  plan"]
    for f in floors:
        floor = f.floor_s(peak)
        gflop = "no model" if f.flops is None else f"{f.flops / 1e9:.4g}"
        ratio = "-" if floor is None else f"{f.estimate_s / floor:.1f}x"
        trained = "-" if floor is None or f.trained_s is None else f"{f.trained_s / floor:.1f}x"
        lines.append(f"  {len(f.runs):>5} {gflop:>11} {_min(f.estimate_s):>10} "
                     f"{'no model' if floor is None else _min(floor):>10} {ratio:>9} {_min(f.trained_s):>10} "
                     f"{trained:>13}  {f.name}{' (float64 products)' if f.precisions == {'float64'} else ''}")
    runs = [(p.estimate_s, f.floor_s(peak)) for f in floors for p in f.runs]
    modelled = [(e, fl) for e, fl in runs if fl is not None]
    estimate, floor = [e for e, _ in runs], [fl for _, fl in modelled]
    missing = sum(1 for f in floors if f.flops is None)
    lines.append(f"totals over {len(runs)} runs: estimate {minutes_text(sum(estimate))} CPU min, "
                 f"{minutes_text(packed_s(estimate, workers))} min wall on {workers} workers; products floor "
                 f"{minutes_text(sum(floor))} CPU min, {minutes_text(packed_s([s / threads for s in floor], workers))} min wall "
                 f"on {workers} workers"
                 + (f" ({missing} plan{'s' if missing != 1 else ''} with no model count{'s' if missing == 1 else ''} "
                    f"nothing)" if missing else ""))
    if modelled:
        modelled_estimate = sum(e for e, _ in modelled)
        lines.append(f"  the plans with a model: estimate {minutes_text(modelled_estimate)} CPU min against a floor of "
                     f"{minutes_text(sum(floor))} ({modelled_estimate / max(sum(floor), 1e-9):.1f}x)")
    return lines + [f"  {f.name}: no model counted here: {f.unbuilt}" for f in floors if f.unbuilt is not None]
