"""Benchmark: S seeds trained as one batched model against S lone runs, paired, per seed-step.

    python benchmarks/bench_seed_batching.py [--seeds 3] [--steps 100] [--rounds 5] [--core 1]
                                             [--setups single,separate3,recurrent2] [--parts] [--check-steps 0]

For each set-up (taken from the studies, ``benchmarks/_setups.py``: ``single`` is the default single-layer model,
``separate3`` three separate layers of multi-layer, ``recurrent2`` two tied layers of multi-layer, all at batch
2048 with the authors' clipping), every round times ``training.train`` with the S models at once (stacked and
vmapped, ``icl_gd.regression.ensemble``) and S ``training.train`` runs of one model each, the two in alternating
order, in one process on one intra-op thread
(``--core`` pins the process, the batch prefetch thread included, to one core: sampling is then counted in full).
Prints ms per seed-step of each (median over rounds), the paired ratio sequential / batched per round (median,
min, max) and the load average before and after.

``--parts`` adds where a seed-step goes: one seed's batch sampled alone, and the optimiser step (forward, backward,
clipping, AdamW) on fixed batches, lone against stacked, interleaved. ``--check-steps N`` trains the S seeds both
ways for N steps and prints the largest per-seed relative parameter difference (float32).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._setups import SETUPS, Captured, captured_training  # noqa: E402
from icl_gd.core.optim import make_optimizer  # noqa: E402
from icl_gd.regression.training import _LoneModel, _StackedModels, train  # noqa: E402

# The set-ups of ``_setups.SETUPS`` that train LSA models, and two tied layers (multi-layer's recurrent=true).
LSA_SETUPS = {"single": SETUPS["single"][:3], "separate3": SETUPS["separate3"][:3],
              "recurrent2": ("multi-layer", "default", (*SETUPS["single"][2], "recurrent=true", "gdpp_adam_steps=0"))}


def setup(name: str, seeds: int) -> Captured:
    """The set-up's S models in one ``train`` call, as the study trains them with ``batched_seeds=true``."""
    study, preset, overrides = LSA_SETUPS[name]
    (captured,) = captured_training(study, preset, (*overrides, "batched_seeds=true"), calls=1, seeds=seeds)
    return captured


def paired_rounds(captured: Captured, n_steps: int, rounds: int) -> dict[str, object]:
    config = replace(captured.config, steps=n_steps, eval_every=10 * n_steps, checkpoint_every=10 * n_steps)
    S = len(captured.seeds)

    def batched() -> float:
        models = [copy.deepcopy(m) for m in captured.models]
        start = time.perf_counter()
        train(models, captured.task, config, captured.seeds)
        return time.perf_counter() - start

    def sequential() -> float:
        models = [copy.deepcopy(m) for m in captured.models]
        start = time.perf_counter()
        for model, seed in zip(models, captured.seeds):
            train([model], captured.task, config, [seed])
        return time.perf_counter() - start

    batched(), sequential()  # warm-up: lazy imports, the allocator
    times: dict[str, list[float]] = {"batched": [], "sequential": []}
    for r in range(rounds):
        for name, run in (("batched", batched), ("sequential", sequential))[:: 1 if r % 2 == 0 else -1]:
            times[name].append(run() * 1e3 / (S * n_steps))
    ratios = [s / b for s, b in zip(times["sequential"], times["batched"])]
    return {"ms_per_seed_step": {k: round(statistics.median(v), 3) for k, v in times.items()},
            "ratio_sequential_over_batched": {"median": round(statistics.median(ratios), 3),
                                              "min": round(min(ratios), 3), "max": round(max(ratios), 3)}}


def parts(captured: Captured, rounds: int, reps: int = 20) -> dict[str, float]:
    """ms per seed: one batch sampled; one optimiser step on fixed batches, lone models against the stack."""
    config, task, seeds = captured.config, captured.task, captured.seeds
    device = next(captured.models[0].parameters()).device
    lone = [_LoneModel(copy.deepcopy(m)) for m in captured.models]
    stacked = _StackedModels([copy.deepcopy(m) for m in captured.models])
    trainees = {"lone": lone, "stacked": [stacked]}
    optimizers = {k: [make_optimizer("adamw", t.parameters(), config) for t in v] for k, v in trainees.items()}
    batches = {"lone": [t.batch(task, config.batch_size, [s], 0, device) for t, s in zip(lone, seeds)],
               "stacked": [stacked.batch(task, config.batch_size, seeds, 0, device)]}

    def step(kind: str) -> None:
        for trainee, optimizer, (tokens, targets) in zip(trainees[kind], optimizers[kind], batches[kind]):
            for p in trainee.parameters():
                p.grad = None
            losses = trainee.losses(tokens, targets)
            (losses if losses.dim() == 0 else losses.sum()).backward()
            trainee.clip_(config.grad_clip)
            optimizer.step()

    def sample() -> None:
        for seed in seeds:
            task.train_batch(config.batch_size, seed, 1, device, torch.float32)

    jobs = {"sample": sample, "step_lone": lambda: step("lone"), "step_stacked": lambda: step("stacked")}
    for job in jobs.values():
        job()
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for r in range(rounds):
        for name, job in list(jobs.items())[:: 1 if r % 2 == 0 else -1]:
            start = time.perf_counter()
            for _ in range(reps):
                job()
            times[name].append((time.perf_counter() - start) * 1e3 / (reps * len(seeds)))
    return {f"{k}_ms_per_seed": round(statistics.median(v), 3) for k, v in times.items()}


def check(captured: Captured, n_steps: int) -> dict[str, float]:
    """The largest per-seed relative parameter difference after ``n_steps`` steps, batched against lone runs."""
    config = replace(captured.config, steps=n_steps, eval_every=n_steps, checkpoint_every=10 * n_steps)
    batched = [copy.deepcopy(m) for m in captured.models]
    train(batched, captured.task, config, captured.seeds)
    worst = 0.0
    for model, seed, b in zip(captured.models, captured.seeds, batched):
        lone = copy.deepcopy(model)
        train([lone], captured.task, config, [seed])
        for p, q in zip(lone.state_dict().values(), b.state_dict().values()):
            worst = max(worst, float((p - q).abs().max() / p.abs().max()))
    return {"steps": n_steps, "max_rel_param_diff": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="training steps per timed run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--core", type=int, default=None, help="pin the process (all its threads) to this core")
    parser.add_argument("--setups", default="single,separate3,recurrent2")
    parser.add_argument("--parts", action="store_true", help="also time sampling and the step alone")
    parser.add_argument("--check-steps", type=int, default=0, help="also compare parameters after N steps")
    args = parser.parse_args()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    result: dict[str, object] = {"threads": 1, "core": args.core, "seeds": args.seeds, "steps": args.steps,
                                 "rounds": args.rounds, "load_before": os.getloadavg()}
    for name in args.setups.split(","):
        captured = setup(name, args.seeds)
        entry: dict[str, object] = paired_rounds(captured, args.steps, args.rounds)
        if args.parts:
            entry["parts"] = parts(captured, args.rounds)
        if args.check_steps:
            entry["check"] = check(captured, args.check_steps)
        result[name] = entry
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
