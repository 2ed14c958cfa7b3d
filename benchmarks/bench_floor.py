"""Benchmark: each set-up's measured training step beside its products floor (and the authors' step), on one core.

    python benchmarks/bench_floor.py [--quick] [--core 0] [--steps 10] [--rounds 3] [--peak measure|GFLOPS]
        [--set training.compile=true ...] [--json /tmp/bench_floor.json] [--authors-ms single=22.65,sine=370]
        [--authors-dir .../transformers_learn_icl_by_gd --jax-python /tmp/jaxenv/bin/python]

Set-ups: one LSA layer (single-layer), three and five separate layers, ten recurrent layers and two transformer
blocks without MLP (multi-layer, the claims' plans), separate tokens and sine (paper presets; sine's step is the
model's plus its baseline's), and the image dual form's recorded step (dual-form's paper preset, its single setting:
the float64 784-800-800-10 MLP at batch 128, SGD with clipping, all three layers recorded into a store written in
the background), and the language models' (dual-form-lm's paper preset: a recorded Adam step of the book's LSTM plus
one of the wiki's, whose 20 000-word output layer is most of its products). Each step is what its study declares it
trains (``Study.training_work``, the same declaration ``icl-gd reproduce --plan`` prices; ``tests/test_floor.py``
checks it against the study's own steps): sampling or the mini-batch, forward, backward, clipping, the optimiser
(and the recording).

The floor is ``icl_gd.platform.floor``'s: the matrix-product FLOPs of one step (forward and backward, counted)
over this core's GEMM peak in the step's precision (``--peak measure``: a 2048³ product on one thread in float32
and in float64, best within about two seconds each; or the float32 GFLOP/s, float64 at half of it). ``icl-gd /
floor`` is how far a step is from arithmetic-bound. The authors' step comes from
their code where ``bench_vs_authors.py`` has it (single, separate3, tokens, sine; ``--authors-dir``), timed in the
same rounds, or from ``--authors-ms`` (ms a step recorded elsewhere, e.g. docs/performance.md).

Prints a markdown table (median ms a step over rounds, best block within a round) and writes the figures to
``--json``. ``--quick``: 3 steps, one round, a one-second peak: under a minute. CI does not run this.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from bench_vs_authors import AUTHORS_SETUPS, authors_worker  # noqa: E402

from icl_gd.core.allocator import keep_freed_memory  # noqa: E402
from icl_gd.core.errors import ConfigError  # noqa: E402
from icl_gd.core.study import resolve_study_config  # noqa: E402
from icl_gd.platform.floor import Peak, floor_s, measure_peak_gflops, step_flops  # noqa: E402
from icl_gd.studies import REGISTRY  # noqa: E402

# name: (study, preset, overrides, in words)
SETUPS = {
    "single": ("single-layer", "default", (), "one LSA layer, batch 2048"),
    "separate3": ("multi-layer", "default", ("layers=3", "recurrent=false"), "3 separate layers"),
    "separate5": ("multi-layer", "default", ("layers=5", "recurrent=false"), "5 separate layers"),
    "recurrent10": ("multi-layer", "default", ("layers=10", "recurrent=true"), "10 recurrent layers"),
    "transformer2": ("multi-layer", "default", ("layers=2", "block=transformer", "mlp=false"),
                     "two transformer blocks without MLP (LayerNorm, linear attention)"),
    "tokens": ("separate-tokens", "paper", (), "separate tokens, paper preset"),
    "sine": ("sine", "paper", (), "sine, paper preset: model + baseline"),
    "dual-image": ("dual-form", "paper", ("settings=single",), "image dual form, paper preset: float64 recorded SGD"),
    "dual-lm": ("dual-form-lm", "paper", (), "LSTM language models, paper preset: a book step + a wiki step"),
}
# --set applies to these
REGRESSION = ("single", "separate3", "separate5", "recurrent10", "transformer2", "tokens", "sine")


def declared_setup(name: str, extra: tuple[str, ...] = ()):
    """(FLOPs a step by precision, ``timer(n)`` -> seconds of n steps of fresh models) of a set-up, its config
    with ``extra`` overrides (``KEY=VALUE``, e.g. ``training.compile=true``) on top of the set-up's."""
    study_name, preset, overrides, _ = SETUPS[name]
    study = REGISTRY.get(study_name)
    works = study.training_work(resolve_study_config(study, preset, (*overrides, *extra, "seeds=1")))
    flops: dict[str, int] = {}
    for w in works:
        flops[w.precision] = flops.get(w.precision, 0) + step_flops(w)

    def timer(n: int) -> float:
        total = 0.0
        for w in works:
            run = w.fresh_training(n)  # the models are copied here, outside the clock
            start = time.perf_counter()
            run()
            total += time.perf_counter() - start
        return total

    return flops, timer


def parse_authors_ms(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    try:
        return {k.strip(): float(v) for k, v in (item.split("=", 1) for item in text.split(","))}
    except ValueError:
        raise SystemExit(f"--authors-ms {text!r}: give NAME=MS pairs, e.g. single=22.65,sine=370")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 steps, one round, a one-second peak")
    parser.add_argument("--core", type=int, default=0, help="the one CPU core every process is pinned to")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--steps", type=int, default=10, help="steps a timed block")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each timing every set-up once")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override of every regression set-up (repeatable; not dual-image), e.g. "
                             "training.compile=true: "
                             "a compiled step is timed after the warm-up has built it")
    parser.add_argument("--peak", default="measure", help="'measure' or this core's float32 GEMM peak in GFLOP/s "
                                                          "(float64: half of it)")
    parser.add_argument("--json", type=Path, default=Path(tempfile.gettempdir()) / "bench_floor.json",
                        help="where the figures go (default: bench_floor.json in the temporary directory)")
    parser.add_argument("--authors-ms", default=None, help="recorded ms a step of the authors' code, NAME=MS,...")
    parser.add_argument("--authors-dir", type=Path, help="transformers_learn_icl_by_gd of their repository")
    parser.add_argument("--jax-python", default=sys.executable, help="a python with jax, dm-haiku, optax, ...")
    args = parser.parse_args()
    steps, rounds = (3, 1) if args.quick else (args.steps, args.rounds)
    names = args.setups.split(",")
    unknown = [n for n in names if n not in SETUPS]
    if unknown:
        raise SystemExit(f"--setups: unknown set-up {unknown[0]!r}; known: {', '.join(SETUPS)}")
    recorded = parse_authors_ms(args.authors_ms)
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    keep_freed_memory()  # as an icl-gd run's process does (icl_gd.core.allocator)
    started, load_start = time.perf_counter(), os.getloadavg()
    if args.peak == "measure":
        seconds = 1.0 if args.quick else 2.0
        peak = Peak(measure_peak_gflops(seconds=seconds), "measured (2048³, one thread)",
                    measure_peak_gflops(seconds=seconds, precision="float64"))
    else:
        peak = Peak(float(args.peak), "given")

    timers, flops, workers, authors = {}, {}, {}, {}
    for name in names:
        try:
            extra = tuple(args.overrides) if name in REGRESSION else ()
            flops[name], timers[name] = declared_setup(name, extra)
        except ConfigError as error:  # a mistyped --set: one line, not a traceback
            raise SystemExit(f"bench_floor: {name}: {error}")
        if args.authors_dir is not None and name in AUTHORS_SETUPS:
            workers[name], authors[name] = authors_worker(name, args.authors_dir, args.jax_python)
    for name in names:  # warm-up
        timers[name](2)
        if name in authors:
            authors[name](2)
    ms: dict[str, list[float]] = {n: [] for n in names}
    theirs: dict[str, list[float]] = {n: [] for n in authors}
    for _ in range(rounds):
        for name in names:
            ms[name].append(1e3 * timers[name](steps) / steps)
            if name in authors:
                theirs[name].append(1e3 * authors[name](steps)["cpu_s"] / steps)
    for proc in workers.values():
        proc.kill()

    rows = []
    for name in names:
        floor_ms = 1e3 * sum(floor_s(f, peak, precision) for precision, f in flops[name].items())
        step_ms = statistics.median(ms[name])
        their_ms = statistics.median(theirs[name]) if name in theirs else recorded.get(name)
        rows.append({"setup": name, "gflop_a_step": sum(flops[name].values()) / 1e9,
                     "precision": "+".join(flops[name]), "floor_ms": floor_ms, "icl_gd_ms": step_ms,
                     "icl_gd_over_floor": step_ms / floor_ms, "authors_ms": their_ms,
                     "authors_source": "timed" if name in theirs else "recorded" if their_ms is not None else None,
                     "authors_over_floor": their_ms / floor_ms if their_ms is not None else None,
                     "icl_gd_ms_rounds": ms[name]})
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    header = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch.__version__,
              "core": args.core, "peak_gflops": peak.gflops, "peak_gflops_float64": peak.of("float64"),
              "peak_source": peak.source, "steps": steps, "rounds": rounds,
              "quick": args.quick, "overrides": args.overrides, "load_start": load_start,
              "load_end": os.getloadavg(), "uptime": uptime,
              "seconds": time.perf_counter() - started}
    print(f"# {header['date']}, torch {header['torch']}, core {args.core}, GEMM peak {peak.gflops:.1f} GFLOP/s "
          f"float32, {peak.of('float64'):.1f} float64 ({peak.source}); {rounds} round(s) x {steps} steps, median "
          f"ms a step"
          f"{'; --set ' + ' '.join(args.overrides) if args.overrides else ''}; load {load_start} -> "
          f"{header['load_end']}")
    print("| set-up | GFLOP a step (products) | precision | floor ms | icl-gd ms | icl-gd / floor | authors ms | "
          "authors / floor |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        their = "-" if r["authors_ms"] is None else f"{r['authors_ms']:.2f}" + (
            " (recorded)" if r["authors_source"] == "recorded" else "")
        their_ratio = "-" if r["authors_over_floor"] is None else f"{r['authors_over_floor']:.1f}x"
        print(f"| {r['setup']} | {r['gflop_a_step']:.3f} | {r['precision']} | {r['floor_ms']:.2f} | "
              f"{r['icl_gd_ms']:.2f} | {r['icl_gd_over_floor']:.1f}x | {their} | {their_ratio} |")
    print(f"# {uptime}; {header['seconds']:.0f} s; wrote {args.json}")
    args.json.write_text(json.dumps({**header, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
