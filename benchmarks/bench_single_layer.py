"""Benchmark: one training step of the default single-layer model at batch 2048 (median ms, data sampling
included), and the whole default study end to end (seconds, a fresh process as a user runs it).

    python benchmarks/bench_single_layer.py [--steps 300] [--threads 1] [--skip-study]

Targets on the 2-core CI machine: <= 3 ms per step, <= 30 s for the default study.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
from icl_gd.regression.training import TrainConfig, train  # noqa: E402


def time_training_steps(n_steps: int, batch_size: int = 2048, repeats: int = 9) -> list[float]:
    """Milliseconds per step of ``training.train`` (fresh tasks, forward, backward, clip, AdamW; the batch
    prefetcher on), each repeat a fresh ``n_steps``-step run without evaluation; one value per repeat."""
    task = ConcatTokenTask(LinearRegressionTask())
    config = TrainConfig(steps=n_steps, batch_size=batch_size, eval_every=10 * n_steps, checkpoint_every=10 * n_steps)
    train([LSAModel(LSAConfig(d_model=11))], task, TrainConfig(steps=20, batch_size=batch_size), [0])  # warm-up
    times = []
    for repeat in range(repeats):
        model = LSAModel(LSAConfig(d_model=11), seed=repeat)
        start = time.perf_counter()
        train([model], task, config, [repeat])
        times.append((time.perf_counter() - start) * 1e3 / n_steps)
    return times


def time_default_study() -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli", "run", "single-layer", "--out", f"{tmp}/run", "--no-progress"],
                       check=True, cwd=ROOT)
        seconds = time.perf_counter() - start
        return seconds, json.loads(Path(f"{tmp}/run/metrics.json").read_text())["mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the study's default is 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    times = time_training_steps(args.steps)
    print(f"training step (batch 2048): median {statistics.median(times):.2f} ms "
          f"(min {min(times):.2f}, max {max(times):.2f}) over {len(times)} runs of {args.steps} steps, "
          f"{torch.get_num_threads()} thread(s)")
    if not args.skip_study:
        seconds, mean = time_default_study()
        print(f"default single-layer study (5000 steps, 1 seed, evaluation, OOD, figures): {seconds:.1f} s; "
              f"loss_trained={mean['loss_trained']:.4f} loss_gd={mean['loss_gd']:.4f} "
              f"cos_sensitivity={mean['cos_sensitivity']:.4f}")


if __name__ == "__main__":
    main()
