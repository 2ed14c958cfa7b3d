"""A reproduction of the papers' claims: the selected claims at one budget, their runs under one folder, and four
verbs: ``plan()`` (which runs, their estimates), ``run()`` (hand the runs to the sweep), ``judge()`` (verdicts from
the finished runs; ``Judgement.rejudged`` decides them again from a kept claims.json) and ``Judgement.report()``
(report.md / .html, claims.json, the figures gallery, the claims page's table).

Three budgets: the full one (``Reproduction.of``); the quick check (``Reproduction.quick_check``, ``--quick``: the
cheap claims at their full budget on three seeds, set beside the kept table, ``icl_gd.claims.quick``); and the smoke
set-up (``Reproduction.of(..., quick=True)``, ``--smoke``: every claim at a toy size, each plan's ``quick_*``
fields, which settles only the construction checks).

    >>> r = Reproduction.quick_check(Path("out"), only=["vo-prop1-exact"])      # doctest: +SKIP
    >>> r.plan(workers=2).lines(r.budget, "local")                              # doctest: +SKIP
    >>> r.judge(r.run(REGISTRY, all_checks)).report(out=r.root)                # doctest: +SKIP

The ``verify`` pseudo-study (every float64 identity of ``icl-gd verify``) runs in this process in seconds and is
written like a run (``ROOT/runs/verify/metrics.json``).
"""

from __future__ import annotations

import datetime
import os
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from icl_gd.claims.claim import Claim
from icl_gd.claims.estimates import FILE_NAME as ESTIMATES_FILE
from icl_gd.claims.estimates import record_costs
from icl_gd.claims.evidence import seed_evidence
from icl_gd.claims.claim import VERIFY_STUDY
from icl_gd.claims.plan import (VERIFY_DIR, Plan, PlannedRun, draws_text, figure_runs, needs_verify, packed_s, plan_dirs,
                                require_figure_choice, run_order, seed_dirs, seed_spec, select_claims)
from icl_gd.claims.quick import quick_selection
from icl_gd.claims.report import Judgement, ReportHeader
from icl_gd.claims.verdict import ClaimResult, Verdict, evaluate_claim
from icl_gd.core.errors import ConfigError, ICLGDError, RunDirectoryError
from icl_gd.core.provenance import source_commit
from icl_gd.core.results import read_json, write_json
from icl_gd.core.study import StudyRegistry
from icl_gd.platform.sweep import RunSpec

Checks = Callable[[], Iterable[Any]]  # the construction identities (``constructions.verify.all_checks``)
BACKENDS = ("local", "ray")


def current_commit() -> str:
    """The source tree's commit, uncached: the tree may change between calls of one process (tests, notebooks)."""
    source_commit.cache_clear()
    return source_commit()


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Execution:
    """How the runs are executed: the sweep's backend (``local`` or ``ray``, at ``address``), parallel
    ``workers`` (default: the cores over ``threads``), each run's ``threads`` (default 1), its device, progress,
    and which runs draw figures (``first``, ``all``, ``none``: ``plan.figure_runs``)."""

    backend: str = "local"
    workers: int | None = None
    address: str | None = None
    device: str = "cpu"
    threads: int | None = None
    progress: bool = True
    figures: str = "first"
    more_seeds: bool = True  # run more seeds of a plan while a claim of it is unsettled (full budget only)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend {self.backend!r} is not a backend (use {' or '.join(BACKENDS)})")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers must be a positive integer, got {self.workers}")
        require_figure_choice(self.figures)

    @property
    def worker_count(self) -> int:
        return self.workers or max(1, (os.cpu_count() or 1) // (self.threads or 1))


@dataclass(frozen=True)
class FinishedRuns:
    """What ``Reproduction.run`` did: the runs that failed (run directory name -> error), its wall seconds, and the
    plan as the runs left it (each run directory read once after the sweep)."""

    failures: dict[str, str]
    wall_s: float
    plan: Plan


@dataclass(frozen=True)
class Reproduction:
    """The selected ``claims`` at their full budget, or at the smoke set-up (``quick``: each plan's ``quick_*``
    fields, ``--smoke``), their runs and report under ``root``. ``against_kept``: the quick check
    (``quick_check``): ``claims`` are the cheap ones at their full budget on three seeds, ``not_rerun`` the others,
    shown with their kept verdicts."""

    claims: tuple[Claim, ...]
    root: Path
    quick: bool = False
    execution: Execution = Execution()
    against_kept: bool = False
    not_rerun: tuple[Claim, ...] = ()

    @classmethod
    def of(cls, root: Path | None, only: Sequence[str] | str | None = None, quick: bool = False,
           execution: Execution = Execution()) -> Reproduction:
        """The claims named in ``only`` (ids, or one comma-separated string; all when None), under ``root``."""
        if root is None:
            raise ConfigError("--out DIR is required (where the runs and the report go)")
        if isinstance(only, str):
            ids = [i.strip() for i in only.split(",") if i.strip()]
            if not ids:
                raise ConfigError(f"--only {only!r} names no claim")
            only = ids
        return cls(select_claims(only), usable_out(Path(root)), quick, execution)

    @classmethod
    def quick_check(cls, root: Path | None, only: Sequence[str] | str | None = None,
                    execution: Execution = Execution()) -> Reproduction:
        """The claims of ``only`` (as ``of`` reads it; all when None) whose plans' seeds are cheap, at their full
        budget on their first three seeds (``quick.quick_selection``); the others are ``not_rerun``."""
        every = cls.of(root, only, False, execution)
        rerun, others = quick_selection(every.claims)
        return replace(every, claims=rerun, against_kept=True, not_rerun=others)

    @property
    def budget(self) -> str:
        return "--smoke" if self.quick else "--quick (the full budget, seeds 0-2)" if self.against_kept else "full"

    def plan(self, workers: int | None = None) -> Plan:
        """The runs these claims need, each with what its directory already holds (read once)."""
        plan = Plan.of(self.claims, self.quick, self.root, workers or self.execution.worker_count)
        return replace(plan, fixed_seeds=not self.execution.more_seeds)

    def run(self, registry: StudyRegistry, checks: Checks, echo: Callable[[str], None] = print,
            plan: Plan | None = None) -> FinishedRuns:
        """Run what the claims need (finished runs are reused) through the sweep, and the verify identities; write
        what the finished runs measured to ``ROOT/estimates.json``. ``plan``: this reproduction's plan if already
        made (e.g. printed), else made here."""
        from icl_gd.platform.sweep import run_sweep

        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only or forbidden parent, a part longer than the file system allows
            raise RunDirectoryError(f"--out {self.root} is not usable: {exc.strerror or exc}") from None
        if not os.access(self.root, os.W_OK):
            raise ConfigError(f"--out {self.root} is not writable")
        started, e = time.perf_counter(), self.execution
        if needs_verify(self.claims):
            run_verify(self.root, checks)
        plan = plan or self.plan()
        failures: dict[str, str] = {}

        def sweep(runs: Sequence[PlannedRun]) -> bool:
            records = run_sweep([p.spec for p in run_order(runs)], self.root, registry=registry,
                                backend=e.backend, workers=e.workers, address=e.address, device=e.device,
                                progress=e.progress, threads=e.threads,
                                figures=figure_runs(self.claims, self.quick, e.figures))
            for record in records:
                if record.status == "failed":
                    failures[Path(record.run_dir).name] = record.error or "unknown error"
                    echo(f"icl-gd: run {Path(record.run_dir).name} failed: {record.error}")
            return not any(r.status == "failed" for r in records)

        if plan.runs:
            sweep(plan.runs)
        while not self.quick and e.more_seeds and not failures:
            more = self.more_seeds()
            if not more:
                break
            echo(f"icl-gd: claims still unsettled: {len(more)} more seeds of "
                 f"{', '.join(sorted({p.plan for p in more}))} (about "
                 f"{packed_s([p.estimate_s for p in more], e.worker_count) / 60:.0f} min)")
            if not sweep(more):
                break
        how = f"`{self.command}` at commit {current_commit()} on {utc_now()}, {e.worker_count} workers"
        after = self.plan()
        record_costs(self.root / ESTIMATES_FILE, after.measured_costs(self.quick, how),
                    "CPU seconds a seed, as this reproduction's finished runs measured them (icl_gd.claims.estimates)")
        return FinishedRuns(failures, time.perf_counter() - started, after)

    def more_seeds(self) -> list[PlannedRun]:
        """The next seeds to run: for each plan of a claim that is unsettled (inconclusive on its values) with fewer
        seeds than its maximum, as many more as it has (doubling its seeds, up to its maximum)."""
        runs: dict[RunSpec, PlannedRun] = {}
        for result in judge(self.claims, self.root, self.quick):
            if result.verdict is not Verdict.INCONCLUSIVE or result.kept is None or result.claim.is_construction:
                continue
            for plan in (p for p in result.claim.runs if p.study != VERIFY_STUDY):
                have = len(seed_dirs(plan, self.root, self.quick))
                for seed in range(have, min(plan.seed_limit, 2 * have)):
                    spec = seed_spec(plan, False, seed)
                    runs.setdefault(spec, PlannedRun(spec, plan.estimate(False, seed), plan.name, seed))
        return list(runs.values())

    def judge(self, outcome: FinishedRuns | None = None) -> Judgement:
        """Every claim's verdict from the runs under ``ROOT/runs`` (a run without metrics.json, or failed in
        ``outcome``, makes its claims inconclusive with the reason)."""
        failures = outcome.failures if outcome else {}
        refuse_damaged_runs(self.claims, self.root, self.quick)
        results = judge(self.claims, self.root, self.quick, failures)
        header = ReportHeader(command=self.command, commit=current_commit(), date=utc_now(), quick=self.quick,
                              wall_s=outcome.wall_s if outcome else 0.0,
                              failed_runs=tuple(f"{k}: {v}" for k, v in failures.items()),
                              runs_measured=(outcome.plan if outcome else self.plan()).measured_text())
        return Judgement(results, header)

    @property
    def command(self) -> str:
        """The command that reproduces this reproduction (for the report's provenance)."""
        every = [c.id for c in select_claims(None)]
        chosen = {c.id for c in self.claims + self.not_rerun}
        only = [] if chosen == set(every) else ["--only", shlex.quote(",".join(i for i in every if i in chosen))]
        e = self.execution
        budget = ["--smoke"] if self.quick else ["--quick"] if self.against_kept else []
        return " ".join(["icl-gd reproduce --out", shlex.quote(str(self.root)), *budget,
                         *(["--figures", e.figures] if e.figures != "first" else []), *only,
                         *(["--fixed-seeds"] if not e.more_seeds and not self.quick and not self.against_kept
                           else []),
                         *(["--backend", e.backend] if e.backend != "local" else [])])


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


def judge(claims: Sequence[Claim], root: Path, quick: bool, failures: dict[str, str] | None = None
          ) -> tuple[ClaimResult, ...]:
    """Every claim's verdict from the run directories under ``root/runs`` (``judge_claim``)."""
    return tuple(judge_claim(c, root, quick, failures or {}) for c in claims)


def judge_claim(claim: Claim, root: Path, quick: bool, failures: dict[str, str]) -> ClaimResult:
    """One claim's verdict from its runs under ``root/runs``."""
    per_plan = plan_dirs(claim, root, quick)
    for d in (d for dirs in per_plan for d in dirs):
        missing = (f"run {d.name} failed: {failures[d.name]}" if d.name in failures else
                   "" if (d / "metrics.json").is_file() else f"run {d.name} has no metrics.json")
        if missing:
            return ClaimResult(claim, Verdict.INCONCLUSIVE, None, missing, tuple(d for ds in per_plan for d in ds),
                               quick=quick)
    evidence = seed_evidence(per_plan)
    read = [[e.run_dirs[p] for e in evidence] for p in range(len(per_plan))]
    return evaluate_claim(claim, evidence, quick, draws_text(claim, read))


def judged_later(judgement: Judgement, source: Path) -> Judgement:
    """``judgement`` marked as decided again now, from ``source`` (a kept claims.json)."""
    rejudged = f"`icl-gd reproduce --rejudge {shlex.quote(str(source))}` at commit `{current_commit()}` on {utc_now()}"
    return replace(judgement, header=replace(judgement.header, rejudged=rejudged))


def usable_out(root: Path) -> Path:
    """``root`` if it is a folder or can become one (``run``'s rule, ``prepare_run_dir``): a file there, or a file
    where a folder above it should be, is ``RunDirectoryError``, before anything is planned or run."""
    if root.exists() and not root.is_dir():
        raise RunDirectoryError(f"--out {root} exists and is not a directory")
    for parent in root.parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunDirectoryError(f"--out {root} is not usable: {parent} is not a directory")
            break
    return root


def damaged_runs(claims: Sequence[Claim], root: Path, quick: bool) -> list[str]:
    """Each run the claims read under ``root/runs`` whose metrics.json is there but is not a finished run's, as
    "NAME (why)" (``write_metrics``: a JSON object with a "mean" object): a run that looks finished but cannot be
    read, which would otherwise make its claims' verdicts silently inconclusive or stop the judgement."""
    damaged, seen = [], set()
    for claim in claims:
        for d in (d for dirs in plan_dirs(claim, root, quick) for d in dirs):
            path = d / "metrics.json"
            if d in seen or not path.is_file():
                continue
            seen.add(d)
            try:
                metrics = read_json(path)
            except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON
                damaged.append(f"{d.name} ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:80]})")
                continue
            if not isinstance(metrics, dict) or not isinstance(metrics.get("mean"), dict):
                damaged.append(f"{d.name} (no \"mean\" object)")
    return damaged


def refuse_damaged_runs(claims: Sequence[Claim], root: Path, quick: bool) -> None:
    """RunDirectoryError naming every damaged run (``damaged_runs``), before anything is judged or written."""
    damaged = damaged_runs(claims, root, quick)
    if damaged:
        raise RunDirectoryError(f"{len(damaged)} run(s) under {root / 'runs'} hold a metrics.json that is not a "
                                f"finished run's: {'; '.join(damaged)}; delete it to run that run again, or remove "
                                "the run; nothing was judged or written")


__all__ = ["Execution", "Reproduction", "FinishedRuns", "judge", "judged_later", "refuse_damaged_runs", "run_verify",
           "usable_out"]

