"""Benchmarks of the LSTM language model's dual form (dual-form-lm): recording overhead, scoring, store size, RSS.

1. Recording overhead: the study's default LSTM (vocabulary 2000, embedding 64, hidden 128, BPTT 35, 16 streams)
   trained one epoch on the first ``--tokens`` words of the default corpus, plain (the same loop, no hooks, no
   store) vs. recorded (``train_lm``: every gate-map and output key and error into the memory-mapped store,
   float32). Target: recorded / plain <= 1.5. Both runs are repeated ``--repeats`` times (median).
2. Scoring: 100 queries against every recorded key of every layer of a store (the one just recorded, or
   ``--store DIR``, e.g. a study run's ``out/store/seed-0``) with ``score_lm`` (top-k, totals, entropy, time
   bins). Target: <= 30 s for all layers together.
3. The store's size on disk and this process's peak resident memory.

Usage: ``python benchmarks/bench_dual_lm.py [--tokens N] [--store DIR] [--repeats R]``. Prints one JSON object,
with the machine's load average at the start and the end (the figures are wall-clock on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from icl_gd.dual.corpus import tokenise  # noqa: E402
from icl_gd.dual.text_sources import load_raw  # noqa: E402
from icl_gd.dual.lm_analysis import score_lm  # noqa: E402
from icl_gd.core.optim import clip_gradients, make_optimizer  # noqa: E402
from icl_gd.dual.lm_training import LMTrainingConfig, batchify, build_model, train_lm  # noqa: E402
from icl_gd.dual.lstm import detach  # noqa: E402
from icl_gd.dual.store_reader import open_store  # noqa: E402
from icl_gd.dual.layer import dual_layer  # noqa: E402


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux reports KiB


def store_gb(root: Path) -> float:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1024**3


def plain_epoch(config: LMTrainingConfig, corpus, seed: int = 0) -> float:
    """Seconds for one epoch of the same training loop with nothing recorded."""
    model = build_model(config, corpus.vocab_size, seed, torch.device("cpu"))
    optimizer = make_optimizer(config.optimizer, model.parameters(), config)
    data = batchify(corpus.train, config.batch_size)
    state = model.initial_state(config.batch_size)
    started = time.perf_counter()
    for start, length in data.windows(config.bptt):
        optimizer.zero_grad()
        h, state, _ = model.hidden_states(data.ids[start:start + length], state)
        loss = nn.functional.cross_entropy(model.output(h.reshape(-1, config.hidden)),
                                           data.ids[start + 1:start + 1 + length].reshape(-1))
        loss.backward()
        clip_gradients(model.parameters(), config.grad_clip)
        optimizer.step()
        state = detach(state)
    return time.perf_counter() - started


def recorded_epoch(config: LMTrainingConfig, corpus, root: Path, seed: int = 0) -> float:
    if root.exists():
        shutil.rmtree(root)
    trained = train_lm(config, corpus, seed, root / "store", root / "checkpoint.pt", torch.device("cpu"))
    return trained.train_seconds


def scoring(store: Path, n_queries: int = 100, seed: int = 0) -> dict:
    """Seconds to score ``n_queries`` random queries (unit-norm-ish, like LSTM states) against every key."""
    layers = open_store(store)
    rng = np.random.default_rng(seed)
    out = {}
    for name, mem in layers.items():
        layer = dual_layer(mem)
        d_in, d_out = int(mem.info["in_features"]), int(mem.info["out_features"])
        q = np.tanh(rng.standard_normal((n_queries, d_in)))
        r = rng.standard_normal((n_queries, d_out)) / np.sqrt(d_out)
        started = time.perf_counter()
        s = score_lm(layer, q, r, k=10, step_bins=20, n_epochs=int(mem.table("rows").column("epoch").max()) + 1,
                     n_curves=5)
        out[name] = {"keys": s.n_keys, "width_in": d_in, "width_out": d_out,
                     "seconds": round(time.perf_counter() - started, 2)}
    out["total_seconds"] = round(sum(v["seconds"] for v in out.values()), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=30_000, help="training words for the overhead measurement")
    parser.add_argument("--store", type=Path, default=None, help="score this store instead of the recorded one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the recorded store is written")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {"load_start": os.getloadavg(), "threads": 1}
    corpus = tokenise(load_raw("auto"), 2000, max_train_tokens=args.tokens, max_eval_tokens=2000)
    config = replace(LMTrainingConfig(), epochs=1, checkpoint_every=10**9)
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        plain, recorded = [], []
        for _ in range(args.repeats):  # interleaved, so a change of load hits both
            plain.append(plain_epoch(config, corpus))
            recorded.append(recorded_epoch(config, corpus, work / "run"))
        result["recording"] = {
            "corpus": corpus.name, "train_tokens": len(corpus.train), "plain_seconds": [round(x, 2) for x in plain],
            "recorded_seconds": [round(x, 2) for x in recorded],
            "ratio_median": round(statistics.median(recorded) / statistics.median(plain), 3),
            "store_gb": round(store_gb(work / "run" / "store"), 3),
            "store_gb_per_100k_tokens_epoch": round(store_gb(work / "run" / "store") * 1e5 / len(corpus.train), 3),
        }
        store = args.store or work / "run" / "store"
        result["scoring_100_queries"] = {"store": str(store), "store_gb": round(store_gb(store), 3),
                                         **scoring(store)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["peak_rss_gb"] = round(peak_rss_gb(), 3)
    result["load_end"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
