"""Benchmarks of the dual form: recording overhead, and scoring queries against a million keys.

1. Recording overhead: a 784-800-800-10 ReLU MLP trained by SGD (momentum, batch 128), plain vs. with all three
   layers recorded (input layer compressed, float32 keys). Target: recorded / plain <= 1.5.
2. Scoring: 1000 queries against 1,000,000 stored keys of width 800 (float32, 3.2 GB on disk, values of width
   10), read from disk shards with top-k, class/task/epoch totals and entropy. Target: <= 10 s, peak resident
   memory below the 3.2 GB the keys take. The keys are written chunk by chunk, so this script never holds them.

Usage: ``python benchmarks/bench_dual.py [--dir DIR] [--keys N] [--skip-recording]``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_gd.dual.scan import score_queries  # noqa: E402
from icl_gd.dual.recorder import PARAMS, STEP_FIELDS, DualRecorder, Provenance  # noqa: E402
from icl_gd.dual.settings import mlp_layers  # noqa: E402
from icl_gd.dual.storage import Column, StoreWriter  # noqa: E402
from icl_gd.dual.store_reader import open_store  # noqa: E402
from icl_gd.dual.layer import dual_layer  # noqa: E402


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux reports KiB


def current_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024**2
    return float("nan")


def _train(steps: int, batch: int, root: Path | None, seed: int = 0) -> float:
    g = torch.Generator().manual_seed(seed)
    n = steps * batch // 4  # four epochs' worth of examples: repeated keys exercise the compressed layer
    x = torch.rand(n, 784, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    torch.manual_seed(seed)  # benchmark only: nn.Linear's default init
    model = nn.Sequential(nn.Linear(784, 800), nn.ReLU(), nn.Linear(800, 800), nn.ReLU(), nn.Linear(800, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    recorder = None
    if root is not None:
        recorder = DualRecorder(mlp_layers([model[0], model[2], model[4]]), opt, root, key_dtype="float32",
                                chunk_rows=8192)
    started = time.perf_counter()
    for step in range(steps):
        ids = torch.arange(step * batch, (step + 1) * batch) % n
        opt.zero_grad()
        if recorder is None:
            nn.functional.cross_entropy(model(x[ids]), y[ids]).backward()
        else:
            with recorder.batch(Provenance(ids, y[ids], 0, step * batch // n)):
                nn.functional.cross_entropy(model(x[ids]), y[ids]).backward()
        opt.step()
    if recorder is not None:
        recorder.close()
    return time.perf_counter() - started


def bench_recording(workdir: Path, steps: int = 100, batch: int = 128, repeats: int = 3) -> dict:
    _train(20, batch, None)  # warm-up
    plain, recorded = [], []
    for r in range(repeats):
        plain.append(_train(steps, batch, None))
        root = workdir / f"record-{r}"
        recorded.append(_train(steps, batch, root))
        shutil.rmtree(root)
    return {"steps": steps, "batch": batch, "plain_seconds": min(plain), "recorded_seconds": min(recorded),
            "overhead_ratio": min(recorded) / min(plain)}


def write_keys(root: Path, n_keys: int, width: int, out: int, chunk: int = 65536, seed: int = 0) -> None:
    """A layer store with ``n_keys`` random float32 keys, written chunk by chunk (one SGD step per 1000 rows)."""
    rng = np.random.default_rng(seed)
    writer = StoreWriter(root, chunk_rows=chunk)
    writer.add_layer("bench", {"in_features": width, "out_features": out, "has_bias": True, "compressed": False,
                               "key_dtype": "float32", "value_dtype": "float32", "optimizer": "SGD", "exact": True})
    writer.add_table("bench", "rows", [Column("key", "float32", width), Column("error", "float32", out),
                                       Column("example", "int64"), Column("label", "int64"), Column("task", "int64"),
                                       Column("step", "int64"), Column("epoch", "int64")])
    writer.add_table("bench", "steps", [Column(f"{p}_{f}", "float64") for p in PARAMS for f in STEP_FIELDS])
    writer.save_array("bench", "initial_weight", np.zeros((out, width)))
    writer.save_array("bench", "initial_bias", np.zeros(out))
    per_step = 1000
    for start in range(0, n_keys, chunk):
        n = min(chunk, n_keys - start)
        ids = np.arange(start, start + n)
        writer.append("bench", "rows", {
            "key": rng.standard_normal((n, width), dtype=np.float32),
            "error": rng.standard_normal((n, out), dtype=np.float32),
            "example": ids % 60000, "label": ids % 10, "task": ids % 2, "step": ids // per_step,
            "epoch": ids * 4 // n_keys,
        })
    n_steps = (n_keys + per_step - 1) // per_step
    for _ in range(n_steps):
        row = {f"{p}_{f}": np.zeros(1) for p in PARAMS for f in STEP_FIELDS}
        for p in PARAMS:
            row[f"{p}_lr"] = np.full(1, 0.01)
            row[f"{p}_scale"] = np.ones(1)
        writer.append("bench", "steps", row)
    writer.close()


def bench_scoring(workdir: Path, n_keys: int, n_queries: int = 1000, width: int = 800, out: int = 10) -> dict:
    root = workdir / "keys"
    started = time.perf_counter()
    write_keys(root, n_keys, width, out)
    write_seconds = time.perf_counter() - started
    rss_after_write = current_rss_gb()
    g = torch.Generator().manual_seed(1)
    queries = torch.randn(n_queries, width, generator=g).numpy()
    readouts = torch.nn.functional.one_hot(torch.randint(0, out, (n_queries,), generator=g), out).float().numpy()
    layer = dual_layer(open_store(root)["bench"])
    started = time.perf_counter()
    scores = score_queries(layer, queries, readouts, k=10, n_classes=10, n_tasks=2, n_epochs=4, block_rows=32768)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    fast = score_queries(layer, queries, readouts, k=10, n_classes=10, n_tasks=2, n_epochs=4, block_rows=32768,
                         matmul_dtype=torch.bfloat16)
    bf16_seconds = time.perf_counter() - started
    top1_agreement = float((fast.attention_top.row[:, 0] == scores.attention_top.row[:, 0]).mean())
    total_rel_error = float(np.max(np.abs(fast.attention_total - scores.attention_total) / scores.attention_total))
    flops = 2.0 * n_keys * width * n_queries
    result = {
        "n_keys": n_keys, "width": width, "n_queries": n_queries,
        "keys_gb_float32": n_keys * width * 4 / 1e9, "write_seconds": write_seconds,
        "score_seconds": seconds, "score_gflops": flops / seconds / 1e9,
        "score_seconds_bf16_products": bf16_seconds, "bf16_top1_agreement": top1_agreement,
        "bf16_attention_total_max_rel_error": total_rel_error,
        "rss_after_write_gb": rss_after_write, "peak_rss_gb": peak_rss_gb(),
        "check_top1_finite": bool(np.isfinite(scores.attention_top.score[:, 0]).all()),
    }
    shutil.rmtree(root)
    return result


def matmul_gflops(width: int = 800, n_queries: int = 1000, rows: int = 32768) -> float:
    a, b = torch.randn(rows, width), torch.randn(width, n_queries)
    a @ b
    started = time.perf_counter()
    for _ in range(3):
        a @ b
    return 3 * 2.0 * rows * width * n_queries / (time.perf_counter() - started) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--skip-recording", action="store_true")
    parser.add_argument("--skip-scoring", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        report = {"torch_threads": torch.get_num_threads(), "matmul_gflops": matmul_gflops()}
        if not args.skip_recording:
            report["recording"] = bench_recording(workdir)
        if not args.skip_scoring:
            report["scoring"] = bench_scoring(workdir, args.keys)
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
