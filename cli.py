"""The ``icl-gd`` command line: run studies, list them, verify every construction identity."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperCommand

from icl_gd.core.allocator import keep_freed_memory
from icl_gd.core.errors import ConfigError, ICLGDError, RunDirectoryError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="icl-gd: attention as gradient descent, run, measured and plotted.",
)

USAGE_ERRORS = (ConfigError, RunDirectoryError)

# ------------------------------------------------------------------ options shared by run, sweep and reproduce
# One definition each (flag, default and help); where a name means something else in a sweep (one run per seed,
# threads per run) the two meanings are defined side by side and each help says what the other command does.
STEPS = typer.Option(None, "--steps", help="Training steps: every `steps` key of the study (dual-form-lm: both "
                                           "set-ups'); in a sweep, for every run (part of each run's id).")
RUN_SEEDS = typer.Option(None, "--seeds", help="Seeds 0..S-1 trained in this one run, averaged in metrics.json (the "
                                               "study's `seeds` key); `sweep --seeds` makes one run per seed instead.")
SWEEP_SEEDS = typer.Option(1, "--seeds", help="Seeds 0..S-1 per grid point, one run (runs/<run_id>/) each, summarised "
                                              "in summary.csv; `run --seeds` trains them in one run.")
PRESET = typer.Option("default", "--preset", help="Named set-up: default, or the study's own (`icl-gd studies`).")
SETS = typer.Option([], "--set", help="Config override KEY=VALUE (repeatable), on top of --preset; in a sweep, for "
                                      "every run.")
DEVICE = typer.Option("cpu", "--device", help="cpu or cuda.")


def preset_help() -> str:
    """The --preset help: every preset name and the studies that have it, from the registry's cards."""
    from icl_gd.studies import REGISTRY

    having: dict[str, list[str]] = {}
    for name in REGISTRY.names():
        for preset in REGISTRY.card(name)[1]:
            having.setdefault(preset, []).append(name)
    others = "; ".join(f"{preset} ({', '.join(names)})" for preset, names in having.items() if preset != "default")
    return f"Named set-up: default (ours, every study); {others}. paper is the published one."


class PresetsListed(TyperCommand):
    """A command whose --preset help lists every study's presets (``preset_help``), read when the help is shown:
    the registry reads every study's source, too slow for each start of the CLI."""

    def format_help(self, ctx, formatter):  # type: ignore[no-untyped-def]
        for param in self.params:
            if param.name == "preset":
                param.help = preset_help()
        super().format_help(ctx, formatter)


def _checked_threads(threads: Optional[int]) -> Optional[int]:
    """``--threads`` as it is parsed: 1..this machine's logical cores (``check_threads``), else one line, exit 2."""
    if threads is None:
        return None
    from icl_gd.core.resources import check_threads

    try:
        return check_threads(threads)
    except ConfigError as exc:
        _fail(exc)


RUN_THREADS = typer.Option(None, "--threads", callback=_checked_threads, help="CPU threads for torch, at most the "
                           "machine's cores (default: 1 for the regression studies, all cores otherwise).")
SWEEP_THREADS = typer.Option(None, "--threads", callback=_checked_threads, help="CPU threads of each run, at most "
                             "the machine's cores (default 1); --workers defaults to the cores over this.")
PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show progress (a sweep's: its bar and log).")
FIGURES = typer.Option(True, "--figures/--no-figures", help="Draw each run's figures (PNG + PDF); without them the "
                       "numbers and tables are the same and a small run takes a fraction of the time.")
BACKEND = typer.Option("local", "--backend", help="local (a process pool here) or ray (a Ray cluster).")
WORKERS = typer.Option(None, "--workers", help="Parallel runs (default: the CPU cores over --threads).")
ADDRESS = typer.Option(None, "--address", help="Ray cluster: auto, HOST:PORT or ray://HOST:10001 (default: a Ray "
                                               "instance on this machine, listening on 127.0.0.1 only).")


def _version(value: bool) -> None:
    if value:
        from icl_gd import __version__

        typer.echo(f"icl-gd {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """icl-gd: attention as gradient descent, run, measured and plotted."""
    _show_notices()
    keep_freed_memory()  # its runs reuse their freed tensors (icl_gd.core.allocator): same numbers, fewer faults


def _show_notices() -> None:
    """Print the library's notices (``ICLGDNotice``) as one line each, other warnings as Python shows them."""
    import warnings

    from icl_gd.core.errors import ICLGDNotice

    shown = warnings.showwarning
    if getattr(shown, "icl_gd_notices", False):  # already installed (several app() calls in one process)
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ICLGDNotice):
            typer.echo(f"icl-gd: notice: {message}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    show.icl_gd_notices = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def _fail(exc: BaseException) -> None:
    typer.echo(f"icl-gd: error: {exc}", err=True)
    raise typer.Exit(2 if isinstance(exc, USAGE_ERRORS) else 1)


@app.command(cls=PresetsListed)
def run(
    study: str = typer.Argument(..., help="Study name (see `icl-gd studies`)."),
    out: Path = typer.Option(..., "--out", help="Output directory."),
    steps: Optional[int] = STEPS,
    seeds: Optional[int] = RUN_SEEDS,
    preset: str = PRESET,
    set_: list[str] = SETS,
    device: str = DEVICE,
    force: bool = typer.Option(False, "--force", help="Overwrite a finished run in --out."),
    progress: bool = PROGRESS,
    threads: Optional[int] = RUN_THREADS,
    figures: bool = FIGURES,
) -> None:
    """Run a study and write config.json, metrics.json, curves.csv and figures under --out."""
    from icl_gd.platform.runner import execute_run, is_out_of_memory, out_of_memory_message
    from icl_gd.studies import REGISTRY

    try:
        mean = execute_run(REGISTRY, study, out, preset, set_, steps=steps, seeds=seeds, device=device, threads=threads,
                           progress=progress, force=force, figures=figures)
    except ICLGDError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        typer.echo("icl-gd: interrupted; rerun the same command to resume from the last checkpoint", err=True)
        raise typer.Exit(130)
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        typer.echo(f"icl-gd: error: {out_of_memory_message(exc, device)}", err=True)
        raise typer.Exit(1)
    from icl_gd.core.study import headline_metrics

    summary = ", ".join(f"{k}={v:.4g}" for k, v in headline_metrics(REGISTRY.get(study), mean).items())
    typer.echo(f"{study}: wrote {out}  ({summary})")


@app.command(cls=PresetsListed)
def sweep(
    study: str = typer.Argument(..., help="Study name (see `icl-gd studies`)."),
    out: Path = typer.Option(..., "--out", help="Sweep directory: runs/<run_id>/ each, sweep.csv, summary.csv."),
    grid: list[str] = typer.Option([], "--grid", help="KEY=V1,V2,... (repeatable; the Cartesian product is run)."),
    steps: Optional[int] = STEPS,
    seeds: int = SWEEP_SEEDS,
    preset: str = PRESET,
    set_: list[str] = SETS,
    backend: str = BACKEND,
    address: Optional[str] = ADDRESS,
    workers: Optional[int] = WORKERS,
    device: str = DEVICE,
    threads: Optional[int] = SWEEP_THREADS,
    progress: bool = PROGRESS,
    figures: bool = FIGURES,
) -> None:
    """Run a grid of configs times seeds, each an ordinary run directory; exit 1 if any run failed."""
    from icl_gd.core.config import apply_overrides, flag_overrides
    from icl_gd.platform.sweep import parse_grid, plan_sweep, run_sweep, write_sweep_results
    from icl_gd.core.study import resolve_study_config
    from icl_gd.studies import REGISTRY, get_study

    try:
        keys = parse_grid(grid)
        spec = get_study(study)
        # --steps first, as `run` applies it (every `steps` key of the study), then --set: each checked on its own,
        # then each grid value, so an error names the option that was typed.
        common = flag_overrides(spec.config(preset), "steps", steps) if steps is not None else []
        common = [*common, *set_]
        specs = plan_sweep(study, keys, seeds, preset, common)  # refuses an absurd sweep before any config is built
        config = resolve_study_config(spec, preset, common)
        for key, values in keys.items():
            for value in values:
                apply_overrides(config, [f"{key}={value}"], option="--grid")
        for run_spec in specs:  # every config is checked before any run starts
            resolve_study_config(spec, run_spec.preset, run_spec.overrides)
        records = run_sweep(specs, out, registry=REGISTRY, backend=backend, workers=workers, address=address,
                            device=device, progress=progress, threads=threads, figures=figures)
        write_sweep_results(out, records, list(keys))
    except ICLGDError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        typer.echo("icl-gd: sweep interrupted; rerun the same command to finish it (finished runs are skipped, "
                   "the others resume from their checkpoints)", err=True)
        raise typer.Exit(130)
    failed = [r for r in records if r.status == "failed"]
    counts = {s: sum(r.status == s for r in records) for s in ("done", "skipped", "failed")}
    typer.echo(f"{study}: {len(records)} runs ({counts['done']} done, {counts['skipped']} skipped, "
               f"{counts['failed']} failed); wrote {out / 'sweep.csv'} and {out / 'summary.csv'}")
    if failed:
        raise typer.Exit(1)


@app.command("config", cls=PresetsListed)
def show_config(
    study: str = typer.Argument(..., help="Study name (see `icl-gd studies`)."),
    preset: str = PRESET,
    set_: list[str] = typer.Option([], "--set", help="Config override KEY=VALUE (repeatable), shown resolved."),
) -> None:
    """Print every config key of a study: its value (the preset's, or as --set makes it) and what it means."""
    from icl_gd.core.config import describe
    from icl_gd.core.results import to_jsonable
    from icl_gd.core.study import resolve_study_config
    from icl_gd.studies import get_study

    try:
        spec = get_study(study)
        config = resolve_study_config(spec, preset, set_)
    except ICLGDError as exc:
        _fail(exc)
    typer.echo(f"{study}, preset {preset} (presets: {', '.join(spec.preset_names())})")
    rows = [(key, _show(value), doc) for key, value, doc in describe(config)]
    width = max(len(k) for k, _, _ in rows)
    value_width = min(max(len(v) for _, v, _ in rows), 18)
    for key, value, doc in rows:
        typer.echo(f"{key:{width}s}  {value:{value_width}s}  {doc}".rstrip())
    if spec.resolved_training is not None:
        resolved = to_jsonable(spec.resolved_training(config))
        typer.echo("resolved training: " + ", ".join(f"{k}={_show(v)}" for k, v in resolved.items()))


def _show(value) -> str:
    """A value as --set takes it: none, true/false, comma-separated tuples."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ",".join(_show(v) for v in value)
    return str(value)


@app.command()
def studies() -> None:
    """List the studies."""
    from icl_gd.studies import REGISTRY

    for name in REGISTRY.names():
        summary, presets = REGISTRY.card(name)
        extra = f"  [presets: {', '.join(presets)}]" if len(presets) > 1 else ""
        typer.echo(f"{name:18s} {summary}{extra}")


@app.command()
def verify(
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Say which check is running (on a "
                                  "terminal)."),
) -> None:
    """Check every construction identity in float64; exit 1 if any error exceeds its tolerance."""
    import time

    from icl_gd.constructions.verify import all_checks

    started = time.perf_counter()
    failed, worst = 0, 0.0
    live = progress and sys.stderr.isatty()
    try:
        checks = list(all_checks())
        for i, check in enumerate(checks, 1):
            counter = f"[{i:{len(str(len(checks)))}d}/{len(checks)}]"
            if live:
                typer.echo(f"\r\033[K{counter} running {check.name} ...", err=True, nl=False)
            result = check.run()
            if live:
                typer.echo("\r\033[K", err=True, nl=False)
            status = "ok  " if result.passed else "FAIL"
            failed += not result.passed
            worst = max(worst, result.max_rel_error / result.tolerance)
            typer.echo(
                f"{status} {counter} {check.name:55s} max abs {result.max_abs_error:.2e}  "
                f"max rel {result.max_rel_error:.2e}  (tol {result.tolerance:.0e})"
            )
            if result.detail:
                typer.echo(f"     {result.detail}")
    except ICLGDError as exc:
        _fail(exc)
    seconds = time.perf_counter() - started
    typer.echo(f"verify: {len(checks) - failed} of {len(checks)} identities hold in float64 (largest error "
               f"{worst:.2g} of its tolerance) in {seconds:.0f} s")
    if failed:
        typer.echo(f"icl-gd: error: {failed} identity check(s) failed", err=True)
        raise typer.Exit(1)


@app.command()
def reproduce(
    out: Optional[Path] = typer.Option(None, "--out", help="Directory of the runs and the report (reused on a "
                                                            "second call)."),
    quick: bool = typer.Option(False, "--quick", help="Does this machine read the kept verdicts? The claims whose "
                               "seeds are cheap, at their full budget on seeds 0-2, judged and set beside the kept "
                               "table; the others shown with their kept verdicts (`--quick --plan`: what it re-runs "
                               "and costs)."),
    smoke: bool = typer.Option(False, "--smoke", help="Every claim at a toy size, in minutes: runs the whole "
                               "pipeline and settles only the construction checks (the claims read inconclusive)."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated claim ids (see --list)."),
    backend: str = BACKEND,
    workers: Optional[int] = WORKERS,
    address: Optional[str] = ADDRESS,
    device: str = DEVICE,
    threads: Optional[int] = SWEEP_THREADS,
    progress: bool = PROGRESS,
    figures: str = typer.Option("first", "--figures", help="Which runs draw their figures: first (each plan's "
                                "first seed: the figures the report and figures.md show), all, or none."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the planned runs and the estimate, run nothing."),
    fixed_seeds: bool = typer.Option(False, "--fixed-seeds", help="Run each plan's declared seeds only; by default "
                                     "a plan runs more seeds (doubling, up to its maximum) while a claim of it is "
                                     "unsettled."),
    judge_finished: bool = typer.Option(False, "--judge-finished", help="Run nothing: judge the claims from the "
                                        "runs already finished under --out (a claim missing a run is inconclusive, "
                                        "naming it); with --update-table, the table of a run folder filled in "
                                        "shares."),
    peak: Optional[str] = typer.Option(None, "--peak", help="With --plan: one core's float32 matrix-product peak "
                                       "in GFLOP/s for the products floor (float64 products at half of it), or "
                                       "'measure' (both precisions, about 4 s, kept for this machine's later "
                                       "plans); default: the kept measurement, else 72."),
    list_claims: bool = typer.Option(False, "--list", help="List the claims and exit."),
    update_readme: Optional[Path] = typer.Option(None, "--update-table",
                                                 help="Also write the claims table between the claims-table markers "
                                                      "of this page (docs/claims.md), and its per-seed values to "
                                                      "claims-table.json beside it."),
    update_readme_alias: Optional[Path] = typer.Option(None, "--update-readme", hidden=True,
                                                       help="--update-table's earlier name."),
    update_headline: Optional[Path] = typer.Option(None, "--update-headline", help="Also write each paper's "
                                                   "headline (its sentences by verdict and by form, the authors' "
                                                   "code beside them) between the headline markers of this page "
                                                   "(README.md)."),
    update_gallery: Optional[Path] = typer.Option(None, "--update-gallery", help="Also write the papers' figures "
                                                  "beside ours, with their claims' verdicts, as this whole page "
                                                  "(docs/figures.md)."),
    rejudge: Optional[Path] = typer.Option(None, "--rejudge", help="Run nothing: decide the verdicts again from "
                                           "this claims.json of an earlier reproduce (e.g. docs/claims-table.json), "
                                           "against today's records of the authors' code; with --out and / or "
                                           "--update-table."),
    update_estimates: bool = typer.Option(False, "--update-estimates", help="After the runs, merge what they "
                                          "measured (OUT/estimates.json) into the kept estimates that --plan prints "
                                          "(estimates.json in icl_gd/claims/)."),
    update_budget: Optional[Path] = typer.Option(None, "--update-budget", help="Run nothing: write what each "
                                                 "budget costs by the kept estimates (--quick, full, --smoke) "
                                                 "between the budget markers of this page (README.md, "
                                                 "docs/reproduce.md)."),
) -> None:
    """Check the papers' claims: plan and run what they need, write report.md, report.html and claims.json."""
    from icl_gd.claims import console as rc
    from icl_gd.constructions.verify import all_checks
    from icl_gd.studies import REGISTRY

    try:
        if update_readme_alias is not None:  # hidden: its name beside --update-table's cut the help's column
            if update_readme is not None:
                raise ConfigError("--update-readme is --update-table's earlier name: give one of them")
            update_readme = update_readme_alias
        if quick and smoke:
            raise ConfigError("--quick and --smoke are two budgets: give one")
        if update_budget is not None:
            if quick or smoke or only or rejudge is not None:
                raise ConfigError("--update-budget states every budget of every claim: drop --quick, --smoke, --only "
                                  "and --rejudge")
            rc.update_budget(update_budget, typer.echo)
            raise typer.Exit(0)
        if rejudge is not None:
            if judge_finished:
                raise ConfigError("--judge-finished judges the runs under --out, --rejudge the claims.json it names: "
                                  "give one of them")
            if quick or smoke or only or plan_only or list_claims or update_estimates:
                raise ConfigError("--rejudge takes the claims, seeds and budget of the claims.json it reads: drop "
                                  "--quick, --smoke, --only, --plan and --list (and --update-estimates)")
            rc.rejudge(rejudge, out, update_readme, typer.echo, update_headline, update_gallery)
            raise typer.Exit(0)
        if list_claims:
            rc.list_claims(typer.echo)
            raise typer.Exit(0)
        if quick and (update_readme or update_headline or update_gallery):
            raise ConfigError("--quick re-runs the cheap claims on three seeds: the claims pages (--update-table, "
                              "--update-headline, --update-gallery) are written from a full-budget run")
        execution = rc.Execution(backend, workers, address, device, threads, progress, figures, not fixed_seeds)
        reproduction = (rc.Reproduction.quick_check(out, only, execution) if quick else
                        rc.Reproduction.of(out, only, smoke, execution))
        if judge_finished:
            if plan_only or update_estimates:
                raise ConfigError("--judge-finished runs nothing: drop --plan and --update-estimates")
            rc.judge_finished(reproduction, update_readme, typer.echo, update_headline, update_gallery)
            raise typer.Exit(0)
        if plan_only:
            rc.print_plan(reproduction, REGISTRY, peak, typer.echo)
            raise typer.Exit(0)
        if peak is not None:
            raise ConfigError("--peak sets the products floor that --plan prints: add --plan")
        code = rc.reproduce(reproduction, REGISTRY, all_checks, update_readme, update_estimates, typer.echo,
                            update_headline, update_gallery)
    except ICLGDError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        typer.echo("icl-gd: interrupted; rerun the same command to reuse the finished runs", err=True)
        raise typer.Exit(130)
    raise typer.Exit(code)


# Any in-context learner against GD and second-order methods (docs/compare.md).
from icl_gd.regression.compare.cli import compare  # noqa: E402  (typer only: the comparison loads when it runs)

app.command("compare")(compare)


def main() -> None:  # pragma: no cover - console-script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
