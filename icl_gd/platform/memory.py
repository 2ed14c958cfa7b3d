"""The memory a run will need, estimated from its config before anything is allocated, and the check against
what this machine (or GPU) has free.

The estimate is a lower bound from the largest tensors of a regression study (B tasks of T tokens of width D,
K layers, H heads, S seeds trained as one model, 4-byte floats, 8-byte float64 references):

- training (``batch_size``): per task the prefetched batches and the activations autograd keeps per layer,
  S · B · (T·D·(3 + 6K) + 2·H·K·T²) floats;
- evaluation (``n_test``): the test tokens and their float64 copies, 2 · n_test · T·D floats and doubles, plus
  each layer's states in the sensitivities' graph, 2 · T·D floats for each of min(n_test · K, EVAL_TASK_LAYERS)
  task-layers (deep models are scored in chunks of tasks, ``icl_gd.regression.metrics``);
- tuning (``n_tune``): the tuning tasks, 2 · n_tune · T·D doubles, plus the L-BFGS graph of K GD/GD++ steps,
  2 · T·D doubles for each of min(n_tune · K, TUNE_TASK_STEPS) task-steps (``icl_gd.regression.tuning``);
- seeds (``seeds``, any study): what a run keeps per seed in host memory until it ends, its entry in the seed list
  and its metrics (SEED_BYTES) and a row of ``curves.csv`` per evaluation (ROW_BYTES each), so that a mistyped
  ``--seeds 999999999`` is refused at once instead of spending minutes building a billion-entry seed list.

A run is refused only when one of these alone exceeds the free memory, so a run that fits is never refused; what
the estimate misses still ends, at run time, in a one-line out-of-memory error.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.tuning import TUNE_TASK_STEPS
from icl_gd.regression.metrics import EVAL_TASK_LAYERS

FLOAT, DOUBLE = 4, 8
SEED_BYTES = 220  # at least: an int in the seed list (28 bytes and an 8-byte slot) and a metrics dict (184)
ROW_BYTES = 184  # at least: a curves.csv row, a dict of five fields
SEED_KEYS = ("evaluation.seeds", "seeds")  # held in host memory whatever the device


def estimate_seed_memory(config: Any) -> dict[str, int]:
    """Bytes the per-seed results need in host memory, under the config's seed key; {} if it has none."""
    evaluation = getattr(config, "evaluation", None)
    key = "evaluation.seeds" if hasattr(evaluation, "seeds") else "seeds" if hasattr(config, "seeds") else None
    seeds = _value(config, key) if key else None
    if not isinstance(seeds, int) or isinstance(seeds, bool):
        return {}
    training = config.train_config() if hasattr(config, "train_config") else None
    steps, every = getattr(training, "steps", None), getattr(training, "eval_every", None)
    rows = steps // every + 1 if isinstance(steps, int) and isinstance(every, int) and every > 0 else 0
    return {key: seeds * (SEED_BYTES + ROW_BYTES * rows)}


def estimate_run_memory(config: Any) -> dict[str, int]:
    """Bytes each of ``training.batch_size``, ``evaluation.n_test`` and ``evaluation.n_tune`` needs (the config
    keys to lower, dotted as ``icl-gd config`` shows them), and the seeds' (``estimate_seed_memory``); only the
    latter for configs of another shape (the dual form)."""
    task, model = getattr(config, "task", None), getattr(config, "model", None)
    training, evaluation = getattr(config, "training", None), getattr(config, "evaluation", None)
    if task is None or training is None or not hasattr(task, "n_context"):
        return estimate_seed_memory(config)
    T = int(task.n_context) + 1
    D = int(getattr(task, "d", 1)) + 1
    K = int(getattr(model, "layers", 1) or 1)
    heads = getattr(model, "heads", 1)
    H = max(heads) if isinstance(heads, tuple) else int(heads)
    S = int(evaluation.seeds) if evaluation is not None and getattr(config, "batched_seeds", False) else 1
    out = {"training.batch_size": FLOAT * S * int(training.batch_size) * (T * D * (3 + 6 * K) + 2 * H * K * T * T)}
    if evaluation is not None and hasattr(evaluation, "n_test"):
        n_test, n_tune = int(evaluation.n_test), int(evaluation.n_tune)
        out["evaluation.n_test"] = 2 * T * D * ((FLOAT + DOUBLE) * n_test + FLOAT * min(n_test * K, EVAL_TASK_LAYERS))
        out["evaluation.n_tune"] = 2 * T * D * DOUBLE * (n_tune + min(n_tune * K, TUNE_TASK_STEPS))
    return {**out, **estimate_seed_memory(config)}


def available_memory(device: torch.device) -> int | None:
    """Free bytes: the GPU's free memory for CUDA, MemAvailable (or free pages) for the CPU; None if unknown."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(config: Any, device: torch.device, available: int | None = None) -> None:
    """Raise ConfigError naming the key to lower when one part of the run alone needs more than is free: on
    ``device``, and in host memory for the per-seed results (``available``: free bytes, None to ask)."""
    need = estimate_run_memory(config)
    for key, bytes_needed in sorted(need.items(), key=lambda item: -item[1]):
        where = torch.device("cpu") if key in SEED_KEYS else device
        free = available_memory(where) if available is None else available
        if free is not None and bytes_needed > free:
            short = key.rsplit(".", 1)[-1]
            raise ConfigError(f"this run needs at least {bytes_needed / 2**30:.1f} GiB for {short} "
                              f"({key}={_value(config, key)}) but {where.type} has {free / 2**30:.1f} GiB free; "
                              f"lower {short} (--set {short}=...)")


def _value(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config
