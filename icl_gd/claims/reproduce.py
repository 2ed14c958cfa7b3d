"""``icl-gd reproduce``: plan the runs the selected claims need, run them through the sweep layer, judge each claim.

Runs are ordinary sweep runs under ``OUT/runs/`` (one seed each), so a second call reuses every finished run and a
run shared by several claims is planned once. The ``verify`` pseudo-study (every float64 identity of
``icl-gd verify``) runs in this process in seconds and is written like a run (``OUT/runs/verify/metrics.json``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icl_gd.core.errors import ConfigError, ICLGDError
from icl_gd.core.results import read_json, write_json
from icl_gd.core.study import StudyRegistry
from icl_gd.claims.claim import VERIFY_STUDY, Claim, RunPlan
from icl_gd.claims.evidence import SeedEvidence
from icl_gd.claims.verdict import ClaimResult, Verdict, evaluate_claim
from icl_gd.claims.registry import ALL_CHECKS

VERIFY_DIR = "verify"
Checks = Callable[[], Iterable[Any]]  # the construction identities (``constructions.verify.all_checks``)


def select_claims(only: Sequence[str] | None = None) -> tuple[Claim, ...]:
    """The claims and construction checks named in ``only`` (all when empty), in registry order (claims first); an
    unknown id is a ConfigError."""
    if not only:
        return ALL_CHECKS
    known = {c.id: c for c in ALL_CHECKS}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise ConfigError(f"--only: unknown claim {unknown[0]!r}; known claims: {', '.join(known)}")
    wanted = set(only)
    return tuple(c for c in ALL_CHECKS if c.id in wanted)


def seed_specs(plan: RunPlan, quick: bool) -> list:
    """One sweep ``RunSpec`` per seed of ``plan`` (seed=S, seeds=1), in a canonical order so shared runs coincide."""
    from icl_gd.platform.sweep import RunSpec

    overrides = plan.run_overrides(quick)
    return [RunSpec(plan.study, plan.run_preset(quick), (*overrides, f"seed={s}", "seeds=1"))
            for s in range(plan.seed_count(quick))]


@dataclass(frozen=True)
class PlannedRun:
    spec: object  # icl_gd.sweep.RunSpec
    estimate_s: float


def plan_runs(claims: Sequence[Claim], quick: bool) -> list[PlannedRun]:
    """Every distinct study run the claims need (the verify pseudo-study excluded), each once."""
    planned: dict[object, PlannedRun] = {}
    for claim in claims:
        for plan in claim.runs:
            if plan.study == VERIFY_STUDY:
                continue
            for seed, spec in enumerate(seed_specs(plan, quick)):
                planned.setdefault(spec, PlannedRun(spec, plan.estimate(quick, seed)))
    return list(planned.values())


def needs_verify(claims: Sequence[Claim]) -> bool:
    return any(plan.study == VERIFY_STUDY for c in claims for plan in c.runs)


def run_verify(root: Path, checks: Checks) -> Path:
    """Run every `icl-gd verify` identity (``checks()``) and write ``runs/verify/metrics.json`` (mean: name ->
    errors)."""

    out = root / "runs" / VERIFY_DIR
    if (out / "metrics.json").is_file():
        return out
    errors = {}
    for check in checks():
        try:
            result = check.run()
        except ICLGDError as exc:  # a broken construction fails its claims; it does not stop the report
            errors[check.name] = {"max_abs_error": float("inf"), "max_rel_error": float("inf"), "tolerance": 1.0,
                                  "passed": False, "error": str(exc)}
            continue
        errors[check.name] = {"max_abs_error": result.max_abs_error, "max_rel_error": result.max_rel_error,
                              "tolerance": result.tolerance, "passed": result.passed}
    write_json(out / "metrics.json", {"mean": errors})
    return out


@dataclass(frozen=True)
class Reproduction:
    results: tuple[ClaimResult, ...]
    failed_runs: tuple[str, ...]  # "run_id: error"
    wall_s: float


def plan_dirs(claim: Claim, root: Path, quick: bool) -> list[list[Path]]:
    """Each of the claim's plans' seed run directories under ``root/runs``."""
    return [[root / "runs" / VERIFY_DIR] if plan.study == VERIFY_STUDY
            else [root / "runs" / spec.run_id() for spec in seed_specs(plan, quick)] for plan in claim.runs]


def seed_evidence(per_plan: Sequence[Sequence[Path]]) -> list[SeedEvidence]:
    """One SeedEvidence per seed (the seeds every plan has; a one-run plan, such as verify, serves every seed)."""
    seeds = min(len(dirs) for dirs in per_plan)
    return [SeedEvidence(tuple(read_json(dirs[min(i, len(dirs) - 1)] / "metrics.json")["mean"] for dirs in per_plan),
                         tuple(dirs[min(i, len(dirs) - 1)] for dirs in per_plan))
            for i in range(seeds)]


def judge(claims: Sequence[Claim], root: Path, quick: bool, failures: dict[str, str] | None = None
          ) -> tuple[ClaimResult, ...]:
    """Evaluate every claim from the run directories under ``root/runs`` (a run without metrics.json, or listed in
    ``failures``, makes its claims inconclusive with the reason)."""
    failures = failures or {}
    results = []
    for claim in claims:
        per_plan = plan_dirs(claim, root, quick)
        missing = ""
        for d in (d for dirs in per_plan for d in dirs):
            if d.name in failures:
                missing = missing or f"run {d.name} failed: {failures[d.name]}"
            elif not (d / "metrics.json").is_file():
                missing = missing or f"run {d.name} has no metrics.json"
        if missing:
            run_dirs = tuple(d for dirs in per_plan for d in dirs)
            results.append(ClaimResult(claim, Verdict.INCONCLUSIVE, None, missing, run_dirs))
            continue
        results.append(evaluate_claim(claim, seed_evidence(per_plan), quick))
    return tuple(results)


def plan_key(spec: Any) -> tuple:
    """What a run shares with the other seeds of its plan: study, preset and every override but the seed."""
    return spec.study, spec.preset, tuple(o for o in spec.overrides if not o.startswith("seed="))


def run_order(planned: Sequence[PlannedRun]) -> list[PlannedRun]:
    """The order the sweep starts the runs in: longest plan first, so that short runs fill the workers' gaps at the
    end instead of a long one starting last; each plan's later seeds queue behind the next plan's first seed, so
    that its first seed has a head start and has usually computed what the seeds share (the references' tuning,
    ``icl_gd.core.shared``) when they start, instead of every worker computing it at once."""
    plans: dict[tuple, list[PlannedRun]] = {}
    for p in sorted(planned, key=lambda p: -p.estimate_s):  # stable: a plan's seeds stay in seed order
        plans.setdefault(plan_key(p.spec), []).append(p)
    order, behind = [], []
    for seeds in plans.values():
        order += [seeds[0], *behind]
        behind = seeds[1:]
    return order + behind


FIGURE_CHOICES = ("first", "all", "none")


def require_figure_choice(choice: str) -> None:
    if choice not in FIGURE_CHOICES:
        raise ConfigError(f"--figures must be one of {', '.join(FIGURE_CHOICES)}, got {choice!r}")


def figure_runs(claims: Sequence[Claim], quick: bool, choice: str) -> bool | frozenset[str]:
    """Which runs draw their figures: ``first``, the first seed of each plan (the run whose figures the report and
    the gallery show; the other seeds' figures are shown nowhere, and drawing them costs seconds to a minute a
    run); ``all``, every run (True); ``none``, no run (False)."""
    require_figure_choice(choice)
    if choice != "first":
        return choice == "all"
    return frozenset(seed_specs(plan, quick)[0].run_id() for claim in claims for plan in claim.runs
                     if plan.study != VERIFY_STUDY)


def reproduce(root: Path, claims: Sequence[Claim], *, registry: StudyRegistry, checks: Checks, quick: bool = False, backend: str = "local",
              workers: int | None = None, address: str | None = None, device: str = "cpu", progress: bool = True,
              echo: Callable[[str], None] = print, threads: int | None = None, figures: str = "first") -> Reproduction:
    """Run what ``claims`` need under ``root`` (reusing finished runs, each on ``threads`` CPU threads, default 1,
    drawing figures as ``figures`` says: ``figure_runs``) and judge them."""
    from icl_gd.platform.sweep import run_sweep

    drawn = figure_runs(claims, quick, figures)

    started = time.perf_counter()
    if needs_verify(claims):
        run_verify(root, checks)
    planned = plan_runs(claims, quick)
    failures: dict[str, str] = {}
    if planned:
        records = run_sweep([p.spec for p in run_order(planned)], root, registry=registry, backend=backend,
                            workers=workers, address=address, device=device, progress=progress, threads=threads,
                            figures=drawn)
        for record in records:
            if record.status == "failed":
                failures[Path(record.run_dir).name] = record.error or "unknown error"
                echo(f"icl-gd: run {Path(record.run_dir).name} failed: {record.error}")
    results = judge(claims, root, quick, failures)
    return Reproduction(results, tuple(f"{k}: {v}" for k, v in failures.items()), time.perf_counter() - started)
