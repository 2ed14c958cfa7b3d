"""Benchmark: seeds in one batch against a loop over seeds, and the multi-layer study end to end.

    python benchmarks/bench_multi_layer.py [--seeds 5] [--steps 200] [--threads N] [--study] [--study-50k]
                                           [--compile]

1. Throughput (training steps per second, data sampling, clipping and AdamW included, no evaluation) of S seeds
   trained as one batched model (``training.train`` with S models) against S lone ``training.train`` runs
   one after the other, for the default recurrent K = 2 model at batch 2048. Target: >= 3x for 5 seeds.
2. ``--study``: wall time of ``icl-gd run multi-layer --set recurrent=true`` (defaults: K = 2, 5000 steps,
   3 seeds batched), a fresh process as a user runs it. Target: <= 60 s on the 2-core CI machine.
3. ``--study-50k``: wall time of the non-recurrent K = 2 study at the authors' 50 000 steps, one seed.
   Target: <= 10 min.

``--compile`` runs every training step through ``torch.compile`` (``compile=true``); its one-off build is
outside the timed throughput loops but inside the study wall times. Prints one JSON object. On a shared
machine, pass ``--threads 1``: oversubscribed intra-op threads can slow small-matrix training by an order of
magnitude.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from icl_gd.regression.lsa import LSAConfig, LSAModel  # noqa: E402
from icl_gd.regression.tasks import LinearRegressionTask  # noqa: E402
from icl_gd.regression.tokens import ConcatTokenTask  # noqa: E402
from icl_gd.regression.training import authors_train_config, train  # noqa: E402


def throughput(n_seeds: int, n_steps: int, compile: bool, layers: int = 2,
               recurrent: bool = True) -> dict[str, float]:
    task = ConcatTokenTask(LinearRegressionTask())
    config = LSAConfig(d_model=11, n_layers=layers, recurrent=recurrent)
    train_config = authors_train_config(layers, recurrent, steps=n_steps, eval_every=n_steps, compile=compile)
    seeds = list(range(n_seeds))
    warm = authors_train_config(layers, recurrent, steps=3, compile=compile)
    train([LSAModel(config)], task, warm, [0])  # lazy imports (the optimiser's) and allocator warm-up, untimed
    train([LSAModel(config, seed=s) for s in seeds], task, warm, seeds)

    start = time.perf_counter()
    for seed in seeds:
        train([LSAModel(config, seed=seed)], task, train_config, [seed])
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    train([LSAModel(config, seed=s) for s in seeds], task, train_config, seeds)
    batched = time.perf_counter() - start
    return {
        "seeds": n_seeds, "steps": n_steps,
        "sequential_s": sequential, "batched_s": batched,
        "sequential_seed_steps_per_s": n_seeds * n_steps / sequential,
        "batched_seed_steps_per_s": n_seeds * n_steps / batched,
        "speedup": sequential / batched,
    }


def study_wall_time(args: list[str], threads: int | None) -> dict[str, object]:
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "cli", "run", "multi-layer", "--out", f"{tmp}/run", "--no-progress", *args]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"study failed: {done.stderr.strip()}")
        metrics = json.loads(Path(f"{tmp}/run/metrics.json").read_text())["mean"]
    keys = ("loss_trained", "loss_gd", "loss_gdpp", "cos_sensitivity_gd", "cos_sensitivity_gdpp",
            "cos_sensitivity_gd_peak", "cos_sensitivity_gd_peak_step")
    return {"args": args, "wall_s": wall, **{k: metrics[k] for k in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--study", action="store_true", help="also time the default recurrent K=2 study")
    parser.add_argument("--study-50k", action="store_true", help="also time non-recurrent K=2 at 50 000 steps")
    parser.add_argument("--compile", action="store_true", help="train through torch.compile (compile=true)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    result: dict[str, object] = {"threads": torch.get_num_threads(),
                                 "compile": args.compile,
                                 "throughput": throughput(args.seeds, args.steps, args.compile)}
    extra = ["--set", "compile=true"] if args.compile else []
    if args.study:
        result["study_recurrent_k2"] = study_wall_time(["--set", "recurrent=true", *extra], args.threads)
    if args.study_50k:
        result["study_k2_50k"] = study_wall_time(["--seeds", "1", *extra], args.threads)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
