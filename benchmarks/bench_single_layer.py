"""Benchmark: one training step of the default single-layer model at batch 2048 (median ms, data sampling
included), and the whole default study end to end (seconds, a fresh process as a user runs it).

    python benchmarks/bench_single_layer.py [--steps 300] [--skip-study]

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

from icl_gd.lsa import LSAConfig, LSAModel  # noqa: E402
from icl_gd.tasks import LinearRegressionTask  # noqa: E402
from icl_gd.tokens import ConcatTokenTask  # noqa: E402
from icl_gd.training import TrainConfig, make_optimizer, query_loss  # noqa: E402


def time_training_steps(n_steps: int, batch_size: int = 2048) -> list[float]:
    """Milliseconds per step: sample fresh tasks, forward, backward, clip, AdamW step (the loop in training.py)."""
    task = ConcatTokenTask(LinearRegressionTask())
    model = LSAModel(LSAConfig(d_model=11))
    optimizer = make_optimizer(model, TrainConfig())
    params = list(model.parameters())
    device, times = torch.device("cpu"), []
    for step in range(n_steps + 20):
        start = time.perf_counter()
        tokens, target = task.train_batch(batch_size, 0, step, device, torch.float32)
        loss = query_loss(model(tokens), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1e-3, foreach=True)
        optimizer.step()
        if step >= 20:  # warm-up excluded
            times.append((time.perf_counter() - start) * 1e3)
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
    args = parser.parse_args()
    times = time_training_steps(args.steps)
    print(f"training step (batch 2048): median {statistics.median(times):.2f} ms, "
          f"p10 {sorted(times)[len(times) // 10]:.2f} ms, p90 {sorted(times)[9 * len(times) // 10]:.2f} ms "
          f"over {len(times)} steps, {torch.get_num_threads()} threads")
    if not args.skip_study:
        seconds, mean = time_default_study()
        print(f"default single-layer study (5000 steps, 1 seed, evaluation, OOD, figures): {seconds:.1f} s; "
              f"loss_trained={mean['loss_trained']:.4f} loss_gd={mean['loss_gd']:.4f} "
              f"cos_sensitivity={mean['cos_sensitivity']:.4f}")


if __name__ == "__main__":
    main()
