"""Benchmark: the training step of each set-up in this checkout against another checkout of icl-gd (a commit before a
speed change: ``git worktree add /tmp/base COMMIT``), interleaved round by round, both pinned to one core.

    python benchmarks/bench_vs_checkout.py --base /tmp/base [--setups single,separate3] [--steps 10] [--rounds 12]
        [--core 0]

Each checkout runs in its own worker process (its own ``icl_gd`` imported from its own root, the set-ups of
``benchmarks/_setups.py``), kept alive and asked for ``--steps`` steps per round; the order of the two alternates
every round. Why paired rounds: on a shared machine the load drifts by 2x within a minute, so only the ratio of
two blocks timed back to back is trustworthy. Prints each side's median CPU ms per step and the per-round ratio
base/this (median, min, max) with the load. CI does not run this.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def worker(setup: str) -> None:
    """Serve ``n`` -> CPU ms per step of ``n`` training steps of ``setup``, one JSON line per request."""
    import torch
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    from _setups import SETUPS, captured_training  # this checkout's, as cwd is its root
    torch.set_num_threads(1)
    study, preset, overrides, calls = SETUPS[setup]
    captured = captured_training(study, preset, overrides, calls)
    for c in captured:  # warm-up
        c.time_steps(2)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        n, start = int(line), time.process_time()
        for c in captured:
            c.time_steps(n)
        print(json.dumps({"cpu_ms": 1e3 * (time.process_time() - start) / n}), flush=True)


def compare(setup: str, base: Path, steps: int, rounds: int, core: int) -> str:
    procs = {}
    for tag, root in (("base", base), ("this", HERE.parents[1])):
        procs[tag] = proc = subprocess.Popen(
            [sys.executable, str(HERE), "--worker", setup], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PYTHONPATH=str(root)),
            preexec_fn=lambda: os.sched_setaffinity(0, {core}))
        line = proc.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            raise SystemExit(f"the {tag} worker ({root}) did not start for {setup}")
    times: dict[str, list[float]] = {tag: [] for tag in procs}
    try:
        for r in range(rounds):
            for tag in (("base", "this") if r % 2 == 0 else ("this", "base")):
                procs[tag].stdin.write(f"{steps}\n")
                procs[tag].stdin.flush()
                times[tag].append(json.loads(procs[tag].stdout.readline())["cpu_ms"])
    finally:
        for proc in procs.values():
            proc.kill()
    ratios = [b / t for b, t in zip(times["base"], times["this"])]
    return (f"| {setup} | {statistics.median(times['base']):.2f} | {statistics.median(times['this']):.2f} | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="root of the other checkout")
    parser.add_argument("--setups", default="single,separate3,tokens,sine")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    if args.base is None or not (args.base / "icl_gd").is_dir():
        raise SystemExit("--base must be the root of an icl-gd checkout")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, base {args.base}, core {args.core}, "
          f"{args.rounds} rounds x {args.steps} steps, CPU ms per step (median); load {os.getloadavg()}")
    print("| set-up | base | this | base/this per round: median (min-max) |")
    print("|---|---|---|---|")
    for setup in args.setups.split(","):
        print(compare(setup, args.base, args.steps, args.rounds, args.core), flush=True)
    print(f"# load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
