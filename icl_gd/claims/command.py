"""The body of ``icl-gd reproduce`` (the typer command in cli.py only parses options and maps errors)."""

from __future__ import annotations

import datetime
import os
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from icl_gd.core.errors import ConfigError
from icl_gd.core.study import StudyRegistry
from icl_gd.core.timing import measured_cpu_s, measured_wall_s, read_timings
from icl_gd.core.provenance import source_commit
from icl_gd.core.results import marked_block_span, read_json, write_json
from icl_gd.claims.report import (README_END, README_START, ReportHeader, claims_json, claims_summary,
                                           readme_block, readme_claims_json, update_readme, write_report)
from icl_gd.claims.reproduce import (Checks, PlannedRun, needs_verify, plan_key, plan_runs, reproduce,
                                              require_figure_choice, select_claims)


def current_commit() -> str:
    """The source tree's commit (``core.provenance.source_commit``), uncached: the tree may change between calls of
    one process (tests, notebooks)."""
    source_commit.cache_clear()
    return source_commit()


def _run_dir(planned: PlannedRun, root: Path) -> Path:
    return root / "runs" / planned.spec.run_id()


def _is_finished(planned: PlannedRun, root: Path) -> bool:
    return (_run_dir(planned, root) / "metrics.json").is_file()


def _seed_of(spec) -> str:
    return spec.values().get("seed", "?")


def measured_estimates(planned: list[PlannedRun], root: Path) -> dict[object, tuple[float, list[str]]]:
    """For each run to do whose plan has finished seeds with timings: (their mean CPU seconds, those seeds). A run
    on one thread takes about its CPU time in wall time on an otherwise idle core, so a finished seed measures the
    others better than the plan's estimate; CPU, not wall, so the load it ran under does not count. A first seed
    and a later one are estimated apart (a later one reads what the first computed, ``RunPlan.shared_s``):
    a finished sibling's CPU time counts scaled by the two runs' estimates."""
    finished: dict[tuple, list[tuple[str, float, float]]] = {}
    for p in planned:
        cpu = measured_cpu_s(_run_dir(p, root)) if _is_finished(p, root) else None
        if cpu is not None:
            finished.setdefault(plan_key(p.spec), []).append((_seed_of(p.spec), cpu, p.estimate_s))
    out = {}
    for p in planned:
        siblings = finished.get(plan_key(p.spec))
        if siblings and not _is_finished(p, root):
            scaled = [cpu * p.estimate_s / estimate for _, cpu, estimate in siblings]
            out[p.spec] = (sum(scaled) / len(scaled), [s for s, _, _ in siblings])
    return out


def estimate_wall_s(planned: list[PlannedRun], root: Path, workers: int) -> tuple[float, int]:
    """(estimated seconds, runs to do): runs already finished under ``root/runs`` cost nothing; the rest (each
    at its finished seeds' measured CPU time where there are some, else at the plan's estimate) are spread over
    ``workers`` (longest first, each to the least-loaded worker)."""
    measured = measured_estimates(planned, root)
    todo = sorted((measured[p.spec][0] if p.spec in measured else p.estimate_s for p in planned
                   if not _is_finished(p, root)), reverse=True)
    loads = [0.0] * max(1, workers)
    for estimate in todo:
        loads[loads.index(min(loads))] += estimate
    return max(loads), len(todo)


def _finished_wall_s(planned: PlannedRun, root: Path) -> tuple[bool, float | None]:
    """(finished?, its measured wall seconds from timings.json, None when it recorded none)."""
    done = _is_finished(planned, root)
    return done, measured_wall_s(_run_dir(planned, root)) if done else None


def run_status(planned: PlannedRun, root: Path,
               siblings: dict[object, tuple[float, list[str]]] | None = None) -> str:
    """A plan line's status: the estimate of a run to do (from its plan's finished seeds, ``measured_estimates``,
    where there are some), or what a finished run measured against it."""
    done, measured = _finished_wall_s(planned, root)
    if not done:
        if siblings and planned.spec in siblings:
            cpu, seeds = siblings[planned.spec]
            return f"~{cpu / 60:.1f} min, as seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)} measured"
        return f"~{planned.estimate_s / 60:.1f} min"
    if measured is None:
        return "done"
    return f"done in {measured / 60:.1f} min, estimated {planned.estimate_s / 60:.1f}"


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:.1f}" if minutes < 10 else f"{minutes:.0f}"


def _run_commit(run_dir: Path) -> str:
    """The commit a finished run's config.json records ("not recorded" for runs older than that field)."""
    try:
        commit = read_json(run_dir / "config.json").get("versions", {}).get("commit")
    except (OSError, ValueError, AttributeError):
        commit = None
    return str(commit) if commit else "not recorded"


def runs_measured_text(planned: list[PlannedRun], root: Path) -> str:
    """What the finished runs measured and where they came from: "N of M runs timed: C CPU min, W min of wall time
    summed over runs" (their timings.json; runs in parallel overlap, so the sum exceeds the elapsed time), then
    "their source: commit X (k runs), ..." from their config.json, so a report judged from runs of several code
    versions says so. "" when no run has finished."""
    done = [p for p in planned if _is_finished(p, root)]
    if not done:
        return ""
    timed = [a for p in done if (a := read_timings(_run_dir(p, root)))]  # one read per run
    walls = [sum(x["wall_s"] for x in attempts) for attempts in timed]
    cpus = [sum(x["cpu_s"] for x in attempts) for attempts in timed]
    parts = []
    if walls:
        parts.append(f"{len(walls)} of {len(planned)} runs timed: "
                     + (f"{_minutes(sum(cpus))} CPU min, " if cpus else "")
                     + f"{_minutes(sum(walls))} min of wall time summed over runs")
    commits = Counter(_run_commit(_run_dir(p, root)) for p in done)
    parts.append("their source: " + ", ".join(
        f"{'commit ' if i == 0 and c != 'not recorded' else ''}{c} ({n} run{'s' if n != 1 else ''})"
        for i, (c, n) in enumerate(commits.most_common())))
    return "; ".join(parts)


def measured_against_estimates(planned: list[PlannedRun], root: Path) -> str | None:
    """One line setting the finished runs' measured wall time beside their estimates (None when none has
    timings), so an estimate that is off shows before the next long reproduce."""
    pairs = []
    for p in planned:
        measured = _finished_wall_s(p, root)[1]
        if measured is not None:
            pairs.append((measured, p.estimate_s))
    if not pairs:
        return None
    measured, estimated = sum(m for m, _ in pairs), sum(e for _, e in pairs)
    return (f"finished runs with timings ({len(pairs)}): measured {measured / 60:.1f} min of wall time against "
            f"{estimated / 60:.1f} min estimated ({measured / estimated:.2f}x; their timings.json say at what load)")


def run_reproduce(*, registry: StudyRegistry, checks: Checks, out: Path | None, quick: bool, only: str | None,
                  backend: str, workers: int | None, address: str | None, device: str, progress: bool,
                  plan_only: bool, list_claims: bool,
                  echo: Callable[[str], None], update_readme_path: Path | None = None,
                  threads: int | None = None, rejudge: Path | None = None, peak: str | None = None,
                  figures: str = "first") -> int:
    """Plan, run, judge and report; returns the exit code (0: report written, 1: some run failed). With
    ``plan_only`` the plan also sets each run set's estimate beside its products floor at ``peak`` (``--peak``:
    GFLOP/s, ``measure``, or None for this machine's cached measurement, else the default). ``figures``: which
    runs draw theirs (``reproduce.figure_runs``)."""
    if rejudge is not None:
        if quick or only or plan_only or list_claims:
            raise ConfigError("--rejudge takes the claims, seeds and budget of the claims.json it reads: drop "
                              "--quick, --only, --plan and --list")
        return rejudge_claims(Path(rejudge), out=out, update_readme_path=update_readme_path, echo=echo)
    if list_claims:
        echo("claims (the paper's or ours), then construction checks; locations: von Oswald et al. in arXiv "
             "2212.07677v2 (31 May 2023)")
        for claim in select_claims(None):
            kind = {"paper": "the paper's", "ours": "ours", "construction": "construction check",
                    "beyond": "beyond the papers"}[claim.kind.value]
            echo(f"{claim.id:30s} {kind:18s} {claim.author}, {claim.location}")
            echo(f"{'':30s} {claim.statement}")
        return 0
    if out is None:
        raise ConfigError("--out DIR is required (where the runs and the report go)")
    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend {backend!r} is not a backend (use local or ray)")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be a positive integer, got {workers}")
    require_figure_choice(figures)  # before anything is planned or printed
    if peak is not None and not plan_only:
        raise ConfigError("--peak sets the products floor that --plan prints: add --plan")
    if plan_only:  # a bad --peak is refused before anything is printed
        from icl_gd.platform.floor import parse_peak

        chosen_peak = parse_peak(peak)
    ids = [i.strip() for i in only.split(",") if i.strip()] if only else None
    if only is not None and not ids:
        raise ConfigError(f"--only {only!r} names no claim")
    claims = select_claims(ids)
    out = Path(out)
    planned = plan_runs(claims, quick)
    n_workers = workers or max(1, (os.cpu_count() or 1) // (threads or 1))
    estimate, todo = estimate_wall_s(planned, out, n_workers)
    echo(f"icl-gd reproduce: {len(claims)} claims, {len(planned)} study runs ({len(planned) - todo} already "
         f"finished){' + the verify identities' if needs_verify(claims) else ''}; "
         f"budget {'--quick' if quick else 'full'}, backend {backend}, {n_workers} workers")
    siblings = measured_estimates(planned, out)
    for p in planned:
        echo(f"  {p.spec.study:16s} {p.spec.preset:8s} {' '.join(p.spec.overrides)}  "
             f"({run_status(p, out, siblings)})")
    minutes = f"about {estimate / 60:.0f} min" if estimate >= 60 else "under a minute"
    echo(f"estimated time: {minutes} (finished seeds' CPU time, else runs timed on a 2-core machine)")
    calibration = measured_against_estimates(planned, out)
    if calibration:
        echo(calibration)
    if plan_only:
        from icl_gd.claims.plan_floor import floor_lines, plan_floors

        for line in floor_lines(plan_floors(planned, registry, out), chosen_peak, n_workers, threads or 1):
            echo(line)
        return 0
    if update_readme_path is not None:
        check_readme(Path(update_readme_path))
    out.mkdir(parents=True, exist_ok=True)
    if not os.access(out, os.W_OK):
        raise ConfigError(f"--out {out} is not writable")
    result = reproduce(out, claims, registry=registry, checks=checks, quick=quick, backend=backend, workers=workers,
                       address=address, device=device, progress=progress, echo=echo, threads=threads, figures=figures)
    command = " ".join(["icl-gd reproduce --out", shlex.quote(str(out)), *(["--quick"] if quick else []),
                        *(["--figures", figures] if figures != "first" else []),
                        *(["--only", shlex.quote(only)] if only else []), *(["--backend", backend] if backend != "local"
                                                                               else [])])
    header = ReportHeader(command=command, commit=current_commit(),
                          date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                          quick=quick, wall_s=result.wall_s, failed_runs=result.failed_runs,
                          runs_measured=runs_measured_text(planned, out))
    write_report(out, result.results, header)
    if update_readme_path is not None:
        _update_readme(Path(update_readme_path), result.results, header, out, echo)
    echo(f"{claims_summary(result.results)}; wrote {out / 'report.md'}, {out / 'report.html'}, {out / 'claims.json'}")
    return 1 if result.failed_runs else 0


def check_readme(readme: Path) -> None:
    """Before anything runs or is written: the README exists and has both claims-table markers (ConfigError)."""
    marked_block_span(readme, README_START, README_END, "--update-table")


def _page_name(page: Path) -> str:
    """The page as a user names it: relative to the working directory where it lies below it."""
    try:
        return Path(page).resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return Path(page).as_posix()


def _update_readme(readme: Path, results, header: ReportHeader, root: Path, echo: Callable[[str], None]) -> None:
    """The README's claims table, and beside it (``README_CLAIMS_JSON``) the claims.json it was rendered from."""
    update_readme(readme, readme_block(results, header, _page_name(readme)))
    data = readme_claims_json(readme)
    data.parent.mkdir(parents=True, exist_ok=True)
    write_json(data, claims_json(results, header, root))
    echo(f"updated the claims table in {readme} and its per-seed values in {data}")


def rejudge_claims(source: Path, *, out: Path | None, update_readme_path: Path | None,
                   echo: Callable[[str], None]) -> int:
    """``--rejudge``: decide every verdict again from ``source`` (an earlier reproduction's claims.json) against
    today's registry and records of the authors' code, and write the report to ``out`` and / or the README table;
    nothing runs."""
    from icl_gd.claims.rejudge import load_claims_json

    if out is None and update_readme_path is None:
        raise ConfigError("--rejudge needs somewhere to write: --out DIR and / or --update-table PAGE")
    if update_readme_path is not None:
        check_readme(Path(update_readme_path))
    loaded = load_claims_json(source)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = ReportHeader(command=loaded.command, commit=loaded.commit, date=loaded.date, quick=loaded.quick,
                          wall_s=loaded.wall_s, runs_measured=loaded.runs_measured,
                          rejudged=f"`icl-gd reproduce --rejudge {shlex.quote(str(source))}` at commit "
                                   f"`{current_commit()}` on {now}")
    for claim_id, before, after in loaded.changed:
        echo(f"icl-gd: {claim_id}: recorded {before}, {after} by today's rule (the claim changed since that run)")
    echo(f"icl-gd: the claims' declared tests (failed seeds, degenerate references) read from the runs under "
         f"{loaded.runs_root}" if loaded.runs_root else
         "icl-gd: the runs are not beside this claims.json: the declared tests are taken as it recorded them")
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        write_report(out, loaded.results, header)
        echo(f"wrote {out / 'report.md'}, {out / 'report.html'}, {out / 'claims.json'}")
    if update_readme_path is not None:
        _update_readme(Path(update_readme_path), loaded.results, header, Path(update_readme_path).parent, echo)
    echo(f"{claims_summary(loaded.results)} (re-judged from {source}, measured by `{loaded.command}` at commit "
         f"{loaded.commit} on {loaded.date})")
    return 0


__all__ = ["run_reproduce"]
