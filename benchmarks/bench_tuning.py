"""Benchmark: tuning GD / GD++ step sizes on held-out tasks (the L-BFGS tuner and the authors' Adam tuning), in this
checkout and, with ``--base``, in another checkout of icl-gd (``git worktree add /tmp/base COMMIT``), one after
the other per case, each in a fresh process pinned to one thread.

    python benchmarks/bench_tuning.py [--base /tmp/base] [--cases 2s,3p,5p,adam5p] [--tasks 10000] [--rounds 1]

Cases: ``Ks`` L-BFGS ``tune_gdpp`` with one shared (η, γ) over K steps (a recurrent stack), ``Kp`` per step
(separate layers), ``adamKp`` 1000 of the authors' Adam steps (512 fresh tasks each) for K per-step layers.
Tasks: d = N = 10, the tuning stream of seed 0. Prints, per case and checkout, the CPU seconds, the tuned
schedule's mean query loss on the tuning tasks and on 10 000 test tasks (float64, step by step), and the ratio
base/this. Why the losses: the tuner's L-BFGS is local and the GD++ loss has several basins, so a faster loss
that rounds differently can end in another basin: the losses show which result is better. CI does not run this.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def worker(case: str, n_tasks: int) -> None:
    """Run one case in this process's ``icl_gd`` and print one JSON line."""
    import torch

    from icl_gd.regression.gd import gdpp_loss
    from icl_gd.regression.tasks import LinearRegressionTask, Stream
    from icl_gd.regression.tuning import tune_gdpp, tune_gdpp_adam

    torch.set_num_threads(1)
    task = LinearRegressionTask()

    def split(batch):
        return batch.x[:, :-1], batch.y[:, :-1], batch.x_query, batch.y_query

    tune = split(task.sample(n_tasks, seed=0, stream=Stream.TUNE, dtype=torch.float64))
    test = split(task.sample(10_000, seed=0, stream=Stream.TEST, dtype=torch.float64))
    start = time.process_time()
    if case.startswith("adam"):
        K = int(case[4:-1])
        params = tune_gdpp_adam(tune, lambda step: split(task.sample(512, seed=0, step=1 + step, stream=Stream.TUNE)),
                                K, shared=False, adam_steps=1000, lr=5e-4, grad_clip=10.0)  # the study's K > 3 settings
    else:
        params = tune_gdpp(*tune, int(case[:-1]), shared=case.endswith("s"))
    cpu = time.process_time() - start
    print(json.dumps({"cpu_s": cpu, "loss_tune": gdpp_loss(*tune, params), "loss_test": gdpp_loss(*test, params)}))


def run(root: Path, case: str, n_tasks: int) -> dict:
    out = subprocess.run([sys.executable, str(HERE), "--worker", case, "--tasks", str(n_tasks)], cwd=root,
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout to compare with")
    parser.add_argument("--cases", default="2s,3p,5p,adam5p")
    parser.add_argument("--tasks", type=int, default=10_000, help="tuning tasks (the studies' n_tune)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.tasks)
        return
    sides = [("this", HERE.parents[1])] + ([("base", args.base.resolve())] if args.base else [])
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for case in args.cases.split(","):
        for r in range(args.rounds):
            order = sides if r % 2 == 0 else sides[::-1]
            results = {tag: run(root, case, args.tasks) for tag, root in order}
            line = "  ".join(f"{tag}: {res['cpu_s']:7.1f} s cpu, loss tune {res['loss_tune']:.5f} test "
                             f"{res['loss_test']:.5f}" for tag, res in results.items())
            ratio = f"  base/this {results['base']['cpu_s'] / results['this']['cpu_s']:.1f}x" if args.base else ""
            print(f"{case:7s} {line}{ratio}  (load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
