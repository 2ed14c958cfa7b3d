"""The CPU threads and the device a run is given: one check of ``--threads`` for every command and worker, and
the one place they are set or resolved."""

from __future__ import annotations

import os

import torch

from icl_gd.core.errors import ConfigError


def logical_cores() -> int:
    """This machine's logical CPU cores (``os.cpu_count``; 1 when it cannot tell)."""
    return os.cpu_count() or 1


def check_threads(threads: int | None) -> int | None:
    """``threads`` unchanged when it is None or 1..the machine's logical cores; ConfigError (naming the core count)
    otherwise. More threads than cores only wait on each other (1000 threads on 2 cores took 9 minutes where one
    took 4 s), and torch ends a process asked for 100 000 in a segmentation fault."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"--threads must be a positive integer, got {threads}")
    cores = logical_cores()
    if threads > cores:
        raise ConfigError(f"--threads {threads} is more than this machine's {cores} logical cores (use 1 to {cores})")
    return threads


def set_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count and numpy's BLAS threads for this process (None: leave them), after
    ``check_threads``.

    numpy's BLAS (OpenBLAS) otherwise takes every core whatever torch uses: with two runs on two busy cores its
    threads wait on each other (a float64 product in the dual-form verification took 1.04 s on 2 threads and
    0.067 s on 1), and its last bits depend on the machine's core count instead of ``--threads``."""
    if check_threads(threads) is None:
        return
    torch.set_num_threads(threads)
    import numpy  # noqa: F401  (threadpoolctl limits loaded libraries only: make sure numpy's BLAS is one)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads, user_api="blas")  # called, not entered: the limit stays for the process


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda[:i]`` as a torch device; ConfigError for anything else or a missing GPU."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {name!r} is not a device (use cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: no CUDA device is available on this machine")
    if device.type not in {"cpu", "cuda"}:
        raise ConfigError(f"--device {name!r} is not supported (use cpu or cuda)")
    return device
