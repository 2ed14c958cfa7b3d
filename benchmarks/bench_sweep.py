"""Benchmark: a sweep on the local process pool and on Ray against the same runs one after another.

    python benchmarks/bench_sweep.py [--runs 8] [--steps 1000] [--workers 2] [--no-ray]

The runs are ``single-layer`` at ``steps`` training steps, seeds 0..runs-1 (one run each), in fresh directories:

1. sequential: ``execute_run`` for each spec, one after the other in this process (one intra-op thread, as a
   sweep worker runs it), the imports already paid: the fastest way to do the runs without a sweep.
2. local: ``run_sweep(backend="local", workers)``, worker start-up included. Target: <= 0.6x sequential with 2
   workers on the 2-core machine.
3. ray: ``run_sweep(backend="ray")`` on a local single-node Ray instance with ``workers`` CPUs started for the
   sweep (start-up and shut-down included). Target: at most 2 s per run more than local.

Prints one JSON object with the times, the ratios and the load average before and after (the machine may be
shared: say so with the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icl_gd.platform.runner import execute_run  # noqa: E402
from icl_gd.platform.sweep import plan_sweep, run_sweep  # noqa: E402
from icl_gd.studies import REGISTRY  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    args = parser.parse_args()
    specs = plan_sweep("single-layer", {}, args.runs, overrides=[f"steps={args.steps}"])
    result: dict[str, object] = {"runs": args.runs, "steps": args.steps, "workers": args.workers,
                                 "cores": os.cpu_count(), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        execute_run(REGISTRY, "single-layer", Path(tmp) / "warm", overrides=["steps=2", "n_test=64", "n_tune=64", "n_ood=16"],
                    threads=1, progress=False)  # imports and lazy initialisation, untimed
        start = time.perf_counter()
        for spec in specs:
            execute_run(REGISTRY, spec.study, Path(tmp) / "sequential" / spec.run_id(), spec.preset, spec.overrides,
                        threads=1, progress=False)
        sequential = time.perf_counter() - start
        start = time.perf_counter()
        records = run_sweep(specs, Path(tmp) / "local", registry=REGISTRY, workers=args.workers, progress=False)
        local = time.perf_counter() - start
        assert all(r.status == "done" for r in records), [r.error for r in records]
        result.update(sequential_s=round(sequential, 1), local_s=round(local, 1),
                      local_over_sequential=round(local / sequential, 3))
        if not args.no_ray:
            start = time.perf_counter()
            records = run_sweep(specs, Path(tmp) / "ray", registry=REGISTRY, backend="ray", workers=args.workers, progress=False)
            ray = time.perf_counter() - start
            assert all(r.status == "done" for r in records), [r.error for r in records]
            result.update(ray_s=round(ray, 1), ray_extra_s_per_run=round((ray - local) / args.runs, 2))
    result["load_after"] = os.getloadavg()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
