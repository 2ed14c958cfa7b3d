"""The memory a run will need, estimated from what its study declares (``Study.memory``: a ``RunMemory``) before
anything is allocated, and the check against what this machine (or GPU) has free.

- device: the parts the study declares (its largest tensors, e.g. ``icl_gd.regression.memory``), each sized by a
  config key;
- seeds (any study): what a run keeps per seed in host memory until it ends, its entry in the seed list and its
  metrics (SEED_BYTES) and a row of ``curves.csv`` per evaluation (ROW_BYTES each), so that a mistyped
  ``--seeds 999999999`` is refused at once instead of spending minutes building a billion-entry seed list.

A run is refused only when one of these alone exceeds the free memory, so a run that fits is never refused; what
the estimate misses still ends, at run time, in a one-line out-of-memory error.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.core.study import MemoryPart, RunMemory, Study

SEED_BYTES = 220  # at least: an int in the seed list (28 bytes and an 8-byte slot) and a metrics dict (184)
ROW_BYTES = 184  # at least: a curves.csv row, a dict of five fields


def seed_memory(declared: RunMemory) -> MemoryPart:
    """Bytes the per-seed results need in host memory, sized by the declared seed key."""
    per_seed = SEED_BYTES + ROW_BYTES * declared.evaluations
    return MemoryPart(declared.seeds_key, declared.seeds, declared.seeds * per_seed)


def memory_parts(study: Study, config: Any) -> list[tuple[MemoryPart, bool]]:
    """Each part of the run ``study.memory`` declares, with whether it lives in host memory (the seeds) whatever
    the device; none for a study that declares nothing."""
    if study.memory is None:
        return []
    declared = study.memory(config)
    return [*((part, False) for part in declared.device), (seed_memory(declared), True)]


def estimate_run_memory(study: Study, config: Any) -> dict[str, int]:
    """Bytes each declared part needs, by its config key (dotted, as ``icl-gd config`` shows it): the device parts
    (``training.batch_size``, ``evaluation.n_test``, ``evaluation.n_tune`` for a regression study) and the seeds'."""
    return {part.key: part.bytes for part, _ in memory_parts(study, config)}


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


def check_memory(study: Study, config: Any, device: torch.device, available: int | None = None) -> None:
    """Raise ConfigError naming the key to lower when one part of the run alone needs more than is free: on
    ``device``, and in host memory for the per-seed results (``available``: free bytes, None to ask)."""
    for part, host in sorted(memory_parts(study, config), key=lambda item: -item[0].bytes):
        where = torch.device("cpu") if host else device
        free = available_memory(where) if available is None else available
        if free is not None and part.bytes > free:
            short = part.key.rsplit(".", 1)[-1]
            raise ConfigError(f"this run needs at least {part.bytes / 2**30:.1f} GiB for {short} "
                              f"({part.key}={part.value}) but {where.type} has {free / 2**30:.1f} GiB free; "
                              f"lower {short} (--set {short}=...)")
