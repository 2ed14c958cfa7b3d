"""Which runs the selected claims need, what each costs, and what the finished ones measured.

Runs are ordinary sweep runs under ``ROOT/runs/`` (one seed each), so a second call reuses every finished run and a
run shared by several claims is planned once. Each run's ``timings.json`` and ``config.json`` are read once, into a
``RunRecord``; every estimate, status line and measured total of the plan is computed from those records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from icl_gd.claims.claim import VERIFY_STUDY, Claim, RunPlan
from icl_gd.claims.estimates import SeedCost
from icl_gd.claims.registry import ALL_CHECKS
from icl_gd.core.errors import ConfigError
from icl_gd.core.results import read_json
from icl_gd.core.timing import read_timings
from icl_gd.platform.sweep import RunSpec

VERIFY_DIR = "verify"
FIGURE_CHOICES = ("first", "all", "none")


def select_claims(only: Sequence[str] | None = None) -> tuple[Claim, ...]:
    """The claims and construction checks named in ``only`` (all when empty), in registry order (claims first); an
    unknown id is a ConfigError."""
    if not only:
        return ALL_CHECKS
    known = {c.id: c for c in ALL_CHECKS}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise ConfigError(f"--only: unknown claim {unknown[0]!r}; known claims: {', '.join(known)}")
    return tuple(c for c in ALL_CHECKS if c.id in set(only))


TEST_SEED = 2023  # the studies' default test_seed: seed S of a plan with draws of its own is scored on TEST_SEED + S


def seed_spec(plan: RunPlan, quick: bool, seed: int, own_draw: bool = True) -> RunSpec:
    """The sweep ``RunSpec`` of one seed of ``plan`` (seed=S, seeds=1). Seed S > 0 of a plan whose seeds draw
    their own test tasks (``RunPlan.draws_per_seed``) is scored on ``test_seed`` = 2023 + S, so each seed is an
    independent replicate of the test draw too; seed 0 keeps the studies' default. ``own_draw=False``: the spec
    before seeds drew their own (every seed on test_seed 2023), whose finished runs a judgement may still read."""
    draw = (f"test_seed={TEST_SEED + seed}",) if own_draw and plan.draws_per_seed and seed > 0 else ()
    return RunSpec(plan.study, plan.run_preset(quick), (*plan.run_overrides(quick), *draw, f"seed={seed}", "seeds=1"))


def seed_specs(plan: RunPlan, quick: bool, count: int | None = None) -> list[RunSpec]:
    """One sweep ``RunSpec`` per seed of ``plan`` (``count`` seeds, default the plan's), in a canonical order so
    shared runs coincide."""
    return [seed_spec(plan, quick, s) for s in range(plan.seed_count(quick) if count is None else count)]


@dataclass(frozen=True)
class PlannedRun:
    """One seed's run of one plan, with the CPU seconds it is expected to take."""

    spec: RunSpec
    estimate_s: float
    plan: str = ""  # the plan's name (its kept estimates' key)
    seed: int = 0


def plan_runs(claims: Sequence[Claim], quick: bool) -> list[PlannedRun]:
    """Every distinct study run the claims need (the verify pseudo-study excluded), each once."""
    planned: dict[RunSpec, PlannedRun] = {}
    for claim in claims:
        for plan in claim.runs:
            if plan.study == VERIFY_STUDY:
                continue
            for seed, spec in enumerate(seed_specs(plan, quick)):
                planned.setdefault(spec, PlannedRun(spec, plan.estimate(quick, seed), plan.name, seed))
    return list(planned.values())


def further_seeds(claims: Sequence[Claim], counts: Mapping[str, int] | None = None) -> list[PlannedRun]:
    """The full-budget seeds beyond each plan's declared ones, up to its maximum (``RunPlan.max_seeds``), each
    once; ``counts``: plan name -> seeds it has already (default: the declared ones)."""
    planned: dict[RunSpec, PlannedRun] = {}
    for plan in (plan for claim in claims for plan in claim.runs if plan.study != VERIFY_STUDY):
        start = (counts or {}).get(plan.name, plan.seeds)
        for seed in range(start, plan.seed_limit):
            spec = seed_spec(plan, False, seed)
            planned.setdefault(spec, PlannedRun(spec, plan.estimate(False, seed), plan.name, seed))
    return list(planned.values())


def needs_verify(claims: Sequence[Claim]) -> bool:
    return any(plan.study == VERIFY_STUDY for c in claims for plan in c.runs)


def finished(run_dir: Path) -> bool:
    return (run_dir / "metrics.json").is_file()


def seed_dirs(plan: RunPlan, root: Path, quick: bool) -> list[Path]:
    """The run directories a judgement reads for ``plan``: its declared seeds, then every further seed up to its
    maximum whose run finished (seeds added while a claim was unsettled), in seed order up to the first missing one.
    Where a seed's run with a test draw of its own has not finished but its run from before seeds drew their own
    has, that one is read (its config says which draw it used: ``draws_text``)."""
    def seed_dir(seed: int) -> Path:
        own = root / "runs" / seed_spec(plan, quick, seed).run_id()
        before = root / "runs" / seed_spec(plan, quick, seed, own_draw=False).run_id()
        return before if not finished(own) and finished(before) else own

    dirs = [seed_dir(s) for s in range(plan.seed_count(quick))]
    for seed in range(len(dirs), plan.seed_limit if not quick else len(dirs)):
        extra = seed_dir(seed)
        if not finished(extra):
            break
        dirs.append(extra)
    return dirs


def plan_dirs(claim: Claim, root: Path, quick: bool) -> list[list[Path]]:
    """Each of the claim's plans' seed run directories under ``root/runs`` (``seed_dirs``)."""
    return [[root / "runs" / VERIFY_DIR] if plan.study == VERIFY_STUDY else seed_dirs(plan, root, quick)
            for plan in claim.runs]


def draws_text(claim: Claim, per_plan: Sequence[Sequence[Path]]) -> str:
    """Whether the seeds' runs were scored on test draws of their own, read from each plan's runs' ``config.json``
    (``evaluation.test_seed``), one list of seed directories per plan; "" where the study draws no test tasks from a
    seed. A seed shares a draw when an earlier seed of its plan was scored on the same ``test_seed``."""
    if claim.shared_draw:
        return f"shared: {claim.shared_draw}"
    plans = []
    for dirs in per_plan:
        try:
            seeds = [read_json(Path(d) / "config.json")["config"]["evaluation"]["test_seed"] for d in dirs]
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        if len(seeds) >= 2:
            plans.append(seeds)
    if not plans:
        return ""
    reused = [[k for k, s in enumerate(seeds) if seeds.index(s) != k] for seeds in plans]
    n, first = len(plans[0]), plans[0][0]
    if not any(reused):
        return f"independent: each of the {n} seeds scored on its own test draw (test_seed {first}, ...)"
    if len(plans) == 1 and len(set(plans[0])) == 1:
        return (f"shared: the {n} seeds were scored on the same test tasks (test_seed {first}); the interval is over "
                "training seeds only")
    where = [f"{'plan ' + str(i) + ': ' if len(plans) > 1 else ''}seed{'s' if len(r) > 1 else ''} "
             f"{', '.join(map(str, r))} of {len(plans[i])} reuse an earlier seed's test draw"
             for i, r in enumerate(reused) if r]
    own = sum(len(set(seeds)) for seeds in plans)
    total = sum(len(seeds) for seeds in plans)
    return (f"partly shared: {own} of {total} seed runs scored on draws of their own; {'; '.join(where)}; the "
            "interval counts them as replicates")


def plan_key(spec: RunSpec) -> tuple:
    """What a run shares with the other seeds of its plan: study, preset and every override but the seed and the
    seed's own test draw."""
    return spec.study, spec.preset, tuple(o for o in spec.overrides if not o.startswith(("seed=", "test_seed=")))


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


@dataclass(frozen=True)
class RunRecord:
    """What one planned run's directory says, read once: finished (``metrics.json``), its attempts' summed CPU
    and wall seconds and training seconds less the evaluations within it (None when it recorded none; an
    unfinished run's attempts count for its training time only), and the commit its ``config.json`` names."""

    finished: bool
    cpu_s: float | None = None
    wall_s: float | None = None
    training_s: float | None = None
    commit: str = "not recorded"

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord:
        finished = (run_dir / "metrics.json").is_file()
        attempts = read_timings(run_dir)
        phases = [a.get("phases_wall_s", {}) for a in attempts]
        training = (sum(ph["training"] - ph.get("training > evaluation", 0.0) for ph in phases)
                    if phases and all(isinstance(ph.get("training"), (int, float)) for ph in phases) else None)
        if not finished:
            return cls(False, training_s=training)
        try:
            commit = read_json(run_dir / "config.json").get("versions", {}).get("commit")
        except (OSError, ValueError, AttributeError):
            commit = None
        return cls(True, sum(a["cpu_s"] for a in attempts) if attempts else None,
                   sum(a["wall_s"] for a in attempts) if attempts else None, training,
                   str(commit) if commit else "not recorded")


def packed_s(durations: Sequence[float], workers: int) -> float:
    """Wall seconds of ``durations`` on ``workers`` parallel workers, longest first, each to the least-loaded."""
    loads = [0.0] * max(1, workers)
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


def minutes_text(seconds: float) -> str:
    """Minutes, one decimal under ten."""
    minutes = seconds / 60
    return f"{minutes:.1f}" if minutes < 10 else f"{minutes:.0f}"


@dataclass(frozen=True)
class Plan:
    """The runs a reproduction needs (``runs``), each with its ``RunRecord`` (``records``), on ``workers``."""

    runs: tuple[PlannedRun, ...]
    records: Mapping[RunSpec, RunRecord]
    workers: int
    verify: bool = False
    more: tuple[PlannedRun, ...] = ()  # the seeds run only while a claim of their plan is unsettled
    fixed_seeds: bool = False  # --fixed-seeds: the declared seeds only, ``more`` never runs

    @classmethod
    def of(cls, claims: Sequence[Claim], quick: bool, root: Path | None, workers: int) -> Plan:
        """The claims' runs with what ``root/runs`` holds of each (``root`` None: nothing, the kept estimates
        alone, as the pages state what a budget costs)."""
        runs = tuple(plan_runs(claims, quick))
        return cls(runs, {p.spec: RunRecord.read(root / "runs" / p.spec.run_id()) if root is not None else
                          RunRecord(False) for p in runs}, workers,
                   needs_verify(claims), () if quick else tuple(further_seeds(claims)))

    def finished(self, run: PlannedRun) -> bool:
        return self.records[run.spec].finished

    @property
    def todo(self) -> list[PlannedRun]:
        return [p for p in self.runs if not self.finished(p)]

    def measured_siblings(self, run: PlannedRun) -> tuple[float, list[int]] | None:
        """For a run to do whose plan has finished seeds with timings: (their mean CPU seconds, scaled by the two
        runs' estimates, as a first and a later seed cost apart; those seeds). CPU, not wall, so the load they ran
        under does not count."""
        siblings = [(p, self.records[p.spec].cpu_s) for p in self.runs
                    if plan_key(p.spec) == plan_key(run.spec) and self.records[p.spec].cpu_s is not None]
        if not siblings or self.finished(run):
            return None
        scaled = [cpu * run.estimate_s / p.estimate_s for p, cpu in siblings]
        return sum(scaled) / len(scaled), [p.seed for p, _ in siblings]

    def expected_s(self, run: PlannedRun) -> float:
        measured = self.measured_siblings(run)
        return measured[0] if measured else run.estimate_s

    @property
    def wall_s(self) -> float:
        """The runs to do, packed on the workers (longest first, each to the least-loaded)."""
        return packed_s([self.expected_s(p) for p in self.todo], self.workers)

    def status(self, run: PlannedRun) -> str:
        """A plan line's status: the estimate of a run to do, or what a finished run measured against it."""
        record = self.records[run.spec]
        if not record.finished:
            measured = self.measured_siblings(run)
            if measured:
                seeds = measured[1]
                return (f"~{measured[0] / 60:.1f} min, as seed{'s' if len(seeds) > 1 else ''} "
                        f"{', '.join(map(str, seeds))} measured")
            return f"~{run.estimate_s / 60:.1f} min"
        if record.wall_s is None:
            return "done"
        return f"done in {record.wall_s / 60:.1f} min, estimated {run.estimate_s / 60:.1f}"

    def lines(self, budget: str, backend: str) -> list[str]:
        """The printed plan: a header, one line a run, the estimate and how finished runs compare with theirs."""
        lines = [f"icl-gd reproduce: {len(self.runs)} study runs ({len(self.runs) - len(self.todo)} already "
                 f"finished){' + the verify identities' if self.verify else ''}; budget {budget}, backend "
                 f"{backend}, {self.workers} workers"]
        for p in self.runs:
            shown = [o for o in p.spec.overrides if o.replace(" ", "") != "seeds=1"]
            lines.append(f"  {p.spec.study:16s} {p.spec.preset:8s} {' '.join(shown)}  ({self.status(p)})")
        minutes = f"about {self.wall_s / 60:.0f} min" if self.wall_s >= 60 else "under a minute"
        lines.append(f"estimated time: {minutes} on {self.workers} workers (finished seeds' CPU time, else the kept "
                     "estimates, icl_gd/claims/estimates.json)")
        if self.more and self.fixed_seeds:
            lines.append("--fixed-seeds: each plan runs its declared seeds only (no more seeds while a claim stays "
                         "unsettled: such a claim is reported inconclusive)")
        elif self.more:
            more_s = sum(p.estimate_s for p in self.more)
            lines.append(f"while a claim stays unsettled, its plans run more seeds: up to {len(self.more)} more runs "
                         f"of {len({p.plan for p in self.more})} plans, at most {minutes_text(more_s)} CPU min "
                         f"(about {minutes_text(packed_s([p.estimate_s for p in self.more], self.workers))} min on "
                         f"{self.workers} workers); --fixed-seeds runs the declared seeds only")
        pairs = [(r.wall_s, p.estimate_s) for p in self.runs if (r := self.records[p.spec]).wall_s is not None]
        if pairs:
            measured, estimated = sum(m for m, _ in pairs), sum(e for _, e in pairs)
            lines.append(f"finished runs with timings ({len(pairs)}): measured {measured / 60:.1f} min of wall time "
                         f"against {estimated / 60:.1f} min estimated ({measured / estimated:.2f}x; their "
                         "timings.json say at what load)")
        return lines

    def measured_text(self) -> str:
        """What the finished runs measured and where they came from: "N of M runs timed: C CPU min, W min of wall
        time summed over runs" (runs in parallel overlap, so the sum exceeds the elapsed time), then "their source:
        commit X (k runs), ...", so a report judged from runs of several code versions says so. "" when no run has
        finished."""
        done = [self.records[p.spec] for p in self.runs if self.finished(p)]
        if not done:
            return ""
        timed = [r for r in done if r.wall_s is not None]
        parts = []
        if timed:
            parts.append(f"{len(timed)} of {len(self.runs)} runs timed: {minutes_text(sum(r.cpu_s or 0 for r in timed))} "
                         f"CPU min, {minutes_text(sum(r.wall_s for r in timed))} min of wall time summed over runs")
        commits = Counter(r.commit for r in done)
        parts.append("their source: " + ", ".join(
            f"{'commit ' if i == 0 and c != 'not recorded' else ''}{c} ({n} run{'s' if n != 1 else ''})"
            for i, (c, n) in enumerate(commits.most_common())))
        return "; ".join(parts)

    def measured_costs(self, quick: bool, how: str) -> dict[str, SeedCost]:
        """Each plan's seed cost as its finished runs measured it (CPU seconds): under --smoke, the seeds' mean;
        at the full budget, seed 0's and the later seeds' mean (None where none finished: the kept figure stays)."""
        by_plan: dict[str, dict[int, float]] = {}
        for p in self.runs:
            if (cpu := self.records[p.spec].cpu_s) is not None:
                by_plan.setdefault(p.plan, {})[p.seed] = cpu
        costs = {}
        for name, seeds in by_plan.items():
            mean = lambda values: round(sum(values) / len(values), 1)  # noqa: E731
            later = [s for k, s in seeds.items() if k > 0]
            costs[name] = (SeedCost(quick_seed_s=mean(list(seeds.values())), measured=how) if quick else
                           SeedCost(first_seed_s=round(seeds[0], 1) if 0 in seeds else None,
                                    later_seed_s=mean(later) if later else None, measured=how))
        return costs
