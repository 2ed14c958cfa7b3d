"""Benchmark: the arithmetic floor of each set-up's training step on this CPU, beside its measured step.

    python benchmarks/flop_floor.py [--core 0] [--setups single,separate3,tokens,sine] [--authors-ms 14.2,50.8,87,216]

For each set-up of ``bench_vs_authors.py`` (the study's own models, task and settings, ``_setups.py``) one training
step runs under ``torch.utils.flop_counter.FlopCounterMode``, which counts the floating-point operations of every
matrix product in the forward and backward pass (mm, bmm, addmm, convolutions; elementwise work, sampling and the
optimiser are not counted, so the floor is a lower bound). The same core's peak for float32 matrix products is
measured on a large square GEMM (2048³, one thread). ``floor ms = GFLOP per step / peak GFLOP/s``: no code computing
the same products can take a step faster on this core. With ``--authors-ms`` (their step's ms, e.g. from
docs/performance.md's table or ``bench_vs_authors.py``'s authors column) it prints the step an 8x target asks for
and whether that is below the floor. CI does not run this.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setups import SETUPS, captured_training  # noqa: E402


def gemm_peak_gflops(n: int = 2048, seconds: float = 2.0) -> float:
    """Best of several timed float32 n x n x n products on one thread, in GFLOP/s."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def step_gflop(captured) -> float:
    """Matrix-product GFLOP of one training step (forward and backward) of every model the set-up trains."""
    total = 0
    for c in captured:
        run = c.fresh_training(1)
        with FlopCounterMode(display=False) as counter:
            run()
        total += counter.get_total_flops()
    return total / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--authors-ms", default=None, help="their step's ms per set-up, in --setups order")
    parser.add_argument("--steps", type=int, default=10, help="steps timed per set-up (best of 3 blocks)")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    names = args.setups.split(",")
    authors = [float(v) for v in args.authors_ms.split(",")] if args.authors_ms else [None] * len(names)
    if len(authors) != len(names):
        raise SystemExit(f"--authors-ms has {len(authors)} values for {len(names)} set-ups")
    peak = gemm_peak_gflops()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, torch {torch.__version__}, core {args.core}, "
          f"float32 GEMM peak {peak:.1f} GFLOP/s (2048³, one thread); load {os.getloadavg()}")
    print("| set-up | GFLOP a step (products) | floor ms | icl-gd ms | icl-gd / floor | authors ms | 8x target ms |")
    print("|---|---|---|---|---|---|---|")
    for name, theirs in zip(names, authors):
        study, preset, overrides, calls = SETUPS[name]
        captured = captured_training(study, preset, overrides, calls)
        gflop = step_gflop(captured)
        for c in captured:
            c.time_steps(2)
        ms = min(sum(c.time_steps(args.steps) for c in captured) for _ in range(3)) * 1e3 / args.steps
        floor = gflop / peak * 1e3
        target = f"{theirs / 8:.2f}" + (" (below the floor)" if theirs / 8 < floor else "") if theirs else "-"
        print(f"| {name} | {gflop:.3f} | {floor:.2f} | {ms:.2f} | {ms / floor:.1f}x | {theirs or '-'} | {target} |")


if __name__ == "__main__":
    main()
