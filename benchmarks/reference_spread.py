"""Benchmark: how much the tuned references themselves vary from one held-out tuning set to another.

    python benchmarks/reference_spread.py [--repeats 5] [--n-tune 10000,40000] [--n-test 100000]
        [--references gd1,gd_separate,gd_recurrent,gdpp_recurrent,gdpp_separate] [--set KEY=VALUE ...]
        [--tolerance 0.02] [--threads 1] [--out /tmp/reference_spread.json]

The studies score a trained model against references tuned on ``n_tune`` held-out tasks (``Stream.TUNE``): one GD
step with η in closed form, K GD steps with L-BFGS-tuned η (one η for a tied stack, one per step for separate
layers) and GD++ (η, γ) tuned by L-BFGS from that GD (``icl_gd.regression.tuning``). Here each reference is tuned
R times, on tuning sets r = 0..R-1 drawn from (seed + r, step 0, ``Stream.TUNE``) (r = 0 is the study's own tuning
set), and every tuned reference is scored on one common test set, (seed, step 0, ``Stream.TEST``) of ``n_test``
tasks. The common test set removes the test sampling error, so the test losses differ by the tuning alone.

Per reference and n_tune: the tuned parameters, the test losses, their mean, sample std, std / mean (the relative
spread), (max - min) / mean, and the relative spread as a fraction of the 'matches' tolerance (2%: a relative loss
gap, ``icl_gd.claims.registry.rules``). A reference supports a 'matches' verdict only if its own spread is well
under that tolerance; the bar here is a tenth of it. Where a spread is over the bar, the n_tune that would bring it
under is extrapolated as n_tune · (spread / bar)², assuming spread ∝ 1/√n_tune (the slope between the sizes measured
is written beside it). For one GD step the exact population optimum (``icl_gd.regression.population.one_step``) is the
ground truth: each tuned η's exact expected loss E L(η) and the mean test loss are compared with E L(η*).

The task, the seed (``test_seed``), n_tune and the depth K are the multi-layer study's defaults (``--set`` overrides
them as ``icl-gd run multi-layer --set`` does); the sizes default to n_tune and 4·n_tune. Writes the resolved config,
the seed, versions, CPU and wall seconds and the machine load to ``--out`` (atomically) and prints a table. CI does
not run this; ``tests/test_reference_spread.py`` runs ``measure_spread`` at a tiny size.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from icl_gd import __version__  # noqa: E402
from icl_gd.core.errors import ConfigError  # noqa: E402
from icl_gd.core.provenance import source_commit  # noqa: E402
from icl_gd.core.results import write_json  # noqa: E402
from icl_gd.core.study import resolve_study_config  # noqa: E402
from icl_gd.regression.config import RegressionTaskConfig  # noqa: E402
from icl_gd.regression.gd import GDPPParams, gdpp_loss  # noqa: E402
from icl_gd.regression.population.one_step import PopulationOneStepGD, population_one_step_gd_of_task  # noqa: E402
from icl_gd.regression.tasks import Stream  # noqa: E402
from icl_gd.regression.tuning import tune_gd, tune_gdpp  # noqa: E402
from icl_gd.studies import REGISTRY  # noqa: E402

MATCHES_TOLERANCE = 0.02  # the claims' 'matches' form: a relative loss gap under 2%
BAR_FRACTION = 0.1  # a reference's own relative spread should stay under this fraction of the tolerance

# (x (B, N, d), y (B, N, d_y), x_query (B, d), y_query (B, d_y)), float64
Tasks = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Reference:
    """A tuned reference as the studies tune it: ``n_steps`` GD steps (``gdpp``: GD++ steps, started from the GD
    reference ``start``), one (η, γ) for every step when ``shared`` (a tied stack) or one per step."""

    name: str
    n_steps: int
    shared: bool
    gdpp: bool
    description: str
    start: str = ""


def references(n_steps: int) -> dict[str, Reference]:
    """The references for depth K = ``n_steps``, by name: the single-layer study's one step and the multi-layer
    study's GD and GD++, tied (recurrent) and separate."""
    K = n_steps
    return {r.name: r for r in (
        Reference("gd1", 1, True, False, "1 GD step, η in closed form (single-layer)"),
        Reference("gd_separate", K, False, False, f"{K} GD steps, per-step η by L-BFGS (multi-layer, separate)"),
        Reference("gd_recurrent", K, True, False, f"{K} GD steps, one η by L-BFGS (multi-layer, recurrent)"),
        Reference("gdpp_recurrent", K, True, True, f"GD++ {K} steps, one (η, γ) by L-BFGS (multi-layer, recurrent)",
                  start="gd_recurrent"),
        Reference("gdpp_separate", K, False, True, f"GD++ {K} steps, per-step (η, γ) by L-BFGS (multi-layer, "
                                                   "separate)", start="gd_separate"),
    )}


REFERENCE_NAMES = tuple(references(2))


@dataclass(frozen=True)
class SpreadConfig:
    """What is measured: ``repeats`` tuning sets of each size in ``n_tunes`` (set r from seed + r), one test set of
    ``n_test`` tasks (from ``seed``), K = ``n_steps`` for the multi-step references."""

    task: RegressionTaskConfig
    n_steps: int
    seed: int
    repeats: int = 5
    n_tunes: tuple[int, ...] = (10_000, 40_000)
    n_test: int = 100_000
    references: tuple[str, ...] = REFERENCE_NAMES
    tolerance: float = MATCHES_TOLERANCE

    def __post_init__(self) -> None:
        if self.repeats < 2:
            raise ConfigError(f"repeats must be at least 2 (a spread needs two tunings), got {self.repeats}")
        if not self.n_tunes or min(self.n_tunes) < 1 or self.n_test < 1 or self.n_steps < 1:
            raise ConfigError("n_tunes, n_test and n_steps must be positive")
        unknown = [n for n in self.references if n not in REFERENCE_NAMES]
        if unknown or not self.references:
            raise ConfigError(f"references: unknown {unknown!r}; known: {', '.join(REFERENCE_NAMES)}")
        if not 0 < self.tolerance < 1:
            raise ConfigError(f"tolerance must be in (0, 1), got {self.tolerance}")

    @property
    def bar(self) -> float:
        """The largest relative spread that leaves a reference fit to judge 'matches': a tenth of the tolerance."""
        return BAR_FRACTION * self.tolerance


def default_config(overrides: Sequence[str] = (), **values) -> SpreadConfig:
    """The multi-layer study's default task, test_seed and depth (``overrides``: its ``KEY=VALUE`` settings), sizes
    n_tune and 4·n_tune; ``values`` replace any field of the result."""
    study = resolve_study_config(REGISTRY.get("multi-layer"), overrides=list(overrides))
    ev = study.evaluation
    config = SpreadConfig(task=study.task, n_steps=study.model.layers, seed=ev.test_seed,
                          n_tunes=(ev.n_tune, 4 * ev.n_tune))
    return replace(config, **values)


@dataclass(frozen=True)
class Tuning:
    """One reference tuned on one tuning set: its parameters, its loss on the common test set, the CPU seconds of
    its tuning (a GD++ tuning's own, its GD start not counted) and, for one GD step, the exact expected loss
    E L(η) of its η (``population_loss``; None otherwise)."""

    seed: int
    etas: tuple[float, ...]
    gammas: tuple[float, ...]
    test_loss: float
    cpu_s: float
    population_loss: float | None = None


@dataclass(frozen=True)
class Spread:
    """The test losses of one reference tuned on ``len(tunings)`` tuning sets of ``n_tune`` tasks, summarised.

    ``relative_spread`` = sample std / mean; ``relative_range`` = (max - min) / mean; ``fraction_of_tolerance`` =
    relative_spread / tolerance; ``under_bar``: relative_spread < a tenth of the tolerance; ``n_tune_for_bar``: the
    n_tune that would bring it under, extrapolated as n_tune · (relative_spread / bar)² (None when under)."""

    reference: str
    description: str
    n_tune: int
    tunings: tuple[Tuning, ...]
    mean: float
    std: float
    relative_spread: float
    relative_range: float
    fraction_of_tolerance: float
    under_bar: bool
    n_tune_for_bar: int | None
    cpu_s: float


@dataclass(frozen=True)
class PopulationCheck:
    """One GD step against its exact population optimum at one n_tune: η* and E L(η*), η* scored on the common test
    set, the mean tuned test loss and its relative gaps to both, and per tuning set the relative gap of the tuned η to
    η* and the exact relative excess loss E L(η_r) / E L(η*) - 1."""

    n_tune: int
    eta_star: float
    population_loss: float
    test_loss_at_eta_star: float
    mean_test_loss: float
    gap_to_population_loss: float
    gap_to_eta_star_on_test: float
    eta_gaps: tuple[float, ...]
    population_excess: tuple[float, ...]


@dataclass(frozen=True)
class SpreadResult:
    """Every (reference, n_tune) spread, the one-step population check per n_tune (empty where the task has no closed
    form), and per multi-size reference the slope of log relative spread against log n_tune (-1/2 for 1/√n_tune)."""

    config: SpreadConfig
    spreads: tuple[Spread, ...]
    population: tuple[PopulationCheck, ...]
    slopes: dict[str, float]


# ---------------------------------------------------------------------------------------------------- tuning
def draw_tasks(config: SpreadConfig, n_tasks: int, seed: int, stream: Stream) -> Tasks:
    """``n_tasks`` tasks of (seed, step 0, stream) in float64, as (x, y, x_query, y_query)."""
    b = config.task.build().sample(n_tasks, seed, 0, stream, "cpu", torch.float64)
    return b.x_context, b.y_context, b.x_query, b.y_query


def tune_reference(ref: Reference, tasks: Tasks, starts: dict[str, GDPPParams]) -> GDPPParams:
    """``ref`` tuned on ``tasks`` by the library's tuners as the studies call them (GD++ from ``starts[ref.start]``)."""
    if not ref.gdpp:
        return tune_gd(*tasks, ref.n_steps, shared=ref.shared)
    return tune_gdpp(*tasks, ref.n_steps, shared=ref.shared, start=starts[ref.start])


def tune_all(config: SpreadConfig, tasks: Tasks) -> dict[str, tuple[GDPPParams, float]]:
    """Every asked reference (and the GD start of each asked GD++) tuned on ``tasks``: name -> (params, CPU s)."""
    table = references(config.n_steps)
    asked = [table[n] for n in config.references]
    needed = {r.name: r for r in asked}
    needed.update({r.start: table[r.start] for r in asked if r.gdpp})
    tuned: dict[str, tuple[GDPPParams, float]] = {}
    for ref in sorted(needed.values(), key=lambda r: r.gdpp):  # GD first: GD++ starts from it
        started = time.process_time()
        params = tune_reference(ref, tasks, {n: p for n, (p, _) in tuned.items()})
        tuned[ref.name] = (params, time.process_time() - started)
    return tuned


# ---------------------------------------------------------------------------------------------------- statistics
def summarise(ref: Reference, n_tune: int, tunings: Sequence[Tuning], config: SpreadConfig) -> Spread:
    """The spread of ``tunings``' test losses (sample std over at least two)."""
    losses = [t.test_loss for t in tunings]
    mean, std = statistics.fmean(losses), statistics.stdev(losses)
    relative = std / mean
    under = relative < config.bar
    needed = None if under else math.ceil(n_tune * (relative / config.bar) ** 2)
    return Spread(reference=ref.name, description=ref.description, n_tune=n_tune, tunings=tuple(tunings), mean=mean,
                  std=std, relative_spread=relative, relative_range=(max(losses) - min(losses)) / mean,
                  fraction_of_tolerance=relative / config.tolerance, under_bar=under, n_tune_for_bar=needed,
                  cpu_s=sum(t.cpu_s for t in tunings))


def spread_slopes(spreads: Sequence[Spread]) -> dict[str, float]:
    """Per reference measured at two sizes or more: the least-squares slope of log relative spread on log n_tune."""
    slopes = {}
    for name in dict.fromkeys(s.reference for s in spreads):
        rows = [s for s in spreads if s.reference == name and s.relative_spread > 0]
        if len({s.n_tune for s in rows}) >= 2:
            slopes[name] = float(np.polyfit(np.log([s.n_tune for s in rows]),
                                            np.log([s.relative_spread for s in rows]), 1)[0])
    return slopes


def population_check(spread: Spread, population: PopulationOneStepGD, test: Tasks) -> PopulationCheck:
    """``spread`` (one GD step) against the exact optimum ``population``, η* scored on the ``test`` tasks."""
    at_star = gdpp_loss(*test, GDPPParams((population.eta,), (0.0,)))
    return PopulationCheck(
        n_tune=spread.n_tune, eta_star=population.eta, population_loss=population.loss,
        test_loss_at_eta_star=at_star, mean_test_loss=spread.mean,
        gap_to_population_loss=spread.mean / population.loss - 1, gap_to_eta_star_on_test=spread.mean / at_star - 1,
        eta_gaps=tuple(t.etas[0] / population.eta - 1 for t in spread.tunings),
        population_excess=tuple(t.population_loss / population.loss - 1 for t in spread.tunings))


def one_step_population(config: SpreadConfig) -> PopulationOneStepGD | None:
    """The exact one-step optimum of the task, or None where ``population.py`` has no closed form for it."""
    try:
        return population_one_step_gd_of_task(config.task)
    except ConfigError:
        return None


# ---------------------------------------------------------------------------------------------------- the measurement
def measure_spread(config: SpreadConfig, progress: Callable[[str], None] = lambda line: None) -> SpreadResult:
    """Tune every reference of ``config`` on ``repeats`` tuning sets of each size, score each on the common test set
    and summarise the spread of the test losses per (reference, n_tune)."""
    test = draw_tasks(config, config.n_test, config.seed, Stream.TEST)
    population = one_step_population(config)
    table = references(config.n_steps)
    found: dict[tuple[str, int], list[Tuning]] = {}
    for n_tune in config.n_tunes:
        for r in range(config.repeats):
            seed = config.seed + r
            for name, (params, cpu) in tune_all(config, draw_tasks(config, n_tune, seed, Stream.TUNE)).items():
                if name not in config.references:
                    continue  # a GD++ start nobody asked for
                exact = population.loss_at(params.etas[0]) if population is not None and name == "gd1" else None
                found.setdefault((name, n_tune), []).append(
                    Tuning(seed, params.etas, params.gammas, gdpp_loss(*test, params), cpu, exact))
                progress(f"n_tune {n_tune:>6} set {r}: {name:<15} {cpu:6.2f} s cpu, test loss "
                         f"{found[name, n_tune][-1].test_loss:.6f}")
    spreads = tuple(summarise(table[name], n_tune, found[name, n_tune], config)
                    for name in config.references for n_tune in config.n_tunes)
    checks = tuple(population_check(s, population, test) for s in spreads
                   if s.reference == "gd1" and population is not None)
    return SpreadResult(config, spreads, checks, spread_slopes(spreads))


# ---------------------------------------------------------------------------------------------------- the command
def table_lines(result: SpreadResult) -> list[str]:
    """The spreads as a Markdown table, then the one-step population check."""
    bar = f"{result.config.bar:.1%}"
    header = (f"| reference | n_tune | mean test loss | std / mean | (max - min) / mean | fraction of the "
              f"{result.config.tolerance:.0%} tolerance | under {bar} | n_tune for {bar} (extrapolated) |")
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for s in result.spreads:
        lines.append(f"| {s.reference} | {s.n_tune} | {s.mean:.6f} | {s.relative_spread:.3%} | "
                     f"{s.relative_range:.3%} | {s.fraction_of_tolerance:.4f} | {'yes' if s.under_bar else 'no'} | "
                     f"{'-' if s.n_tune_for_bar is None else f'{s.n_tune_for_bar:,}'} |")
    if result.slopes:
        lines.append("slope of log spread on log n_tune (-0.5 for 1/√n_tune): " +
                     ", ".join(f"{n} {v:+.2f}" for n, v in result.slopes.items()))
    for c in result.population:
        lines.append(f"one step at n_tune {c.n_tune}: η* {c.eta_star:.5f}, E L(η*) {c.population_loss:.6f}; mean "
                     f"tuned test loss {c.mean_test_loss:.6f} ({c.gap_to_population_loss:+.3%} from E L(η*), "
                     f"{c.gap_to_eta_star_on_test:+.4%} from η* on the same test tasks); tuned η - η* from "
                     f"{min(c.eta_gaps):+.3%} to {max(c.eta_gaps):+.3%}; exact excess E L(η) / E L(η*) - 1 up to "
                     f"{max(c.population_excess):.2e}")
    return lines


def machine() -> dict:
    """Versions and the machine's load, for the result file."""
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    return {"icl_gd": __version__, "source": source_commit(), "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform(), "cores": os.cpu_count(),
            "threads": torch.get_num_threads(), "load": os.getloadavg(), "uptime": uptime}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="tuning sets per size (R)")
    parser.add_argument("--n-tune", default=None, help="tuning-set sizes, comma separated (default: the study's "
                                                      "n_tune and 4x it)")
    parser.add_argument("--n-test", type=int, default=100_000, help="tasks of the one common test set")
    parser.add_argument("--references", default=",".join(REFERENCE_NAMES))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a multi-layer setting (task.d=5, layers=3, evaluation.test_seed=7, ...)")
    parser.add_argument("--tolerance", type=float, default=MATCHES_TOLERANCE)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "reference_spread.json")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    values = {"repeats": args.repeats, "n_test": args.n_test, "tolerance": args.tolerance,
              "references": tuple(n for n in args.references.split(",") if n)}
    if args.n_tune:
        values["n_tunes"] = tuple(int(n) for n in args.n_tune.split(","))
    try:
        config = default_config(args.overrides, **values)
    except ConfigError as error:
        raise SystemExit(f"reference_spread: {error}")
    before = machine()
    wall, cpu = time.perf_counter(), time.process_time()
    result = measure_spread(config, progress=lambda line: print(line, flush=True))
    after = machine()
    seconds = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    command = sys.argv if argv is None else ["benchmarks/reference_spread.py", *argv]
    write_json(args.out, {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command,
                          "seed": config.seed, **seconds, "machine_before": before, "load_after": after["load"],
                          "uptime_after": after["uptime"], "result": result})
    print("\n".join(table_lines(result)))
    print(f"# {seconds['wall_s']:.0f} s wall, {seconds['cpu_s']:.0f} s cpu; {before['uptime']} -> load "
          f"{after['load']}; wrote {args.out}")


if __name__ == "__main__":
    main()
