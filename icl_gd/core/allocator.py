"""Freed memory kept for the next training step: glibc's malloc told not to hand large blocks back to the kernel.

A training step allocates and frees the same large tensors every step (activations, logits, gradients). By default
glibc serves a block above its mmap threshold (at most 32 MB) with a fresh mapping and unmaps it when freed, and
trims the top of its heap on every large free, so the next step faults all those pages in again: on the language
models' wiki step (a 20 000-word output layer, 128 MB of logits) about 130 000 page faults, a quarter of the step in
the kernel; 2000-2700 on the sine model's. With mmap off (``M_MMAP_MAX`` 0: every block from the heap) and the
heap kept up to ``TRIM_THRESHOLD`` free bytes, freed blocks are reused: same arithmetic on the same values, only
where the memory comes from changes. A process then keeps its peak heap until it exits, so the CLI and the sweep's
run workers set this (``keep_freed_memory``), not the library: a notebook keeps glibc's behaviour.

Glibc on Linux only (elsewhere a no-op), and never over a user's own choice: any ``MALLOC_*`` variable in the
environment (glibc's tunables, read at start) leaves malloc as configured.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
TRIM_THRESHOLD = 1 << 30  # free bytes at the top of the heap kept rather than returned (1 GiB)


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to serve every block from the heap and keep up to 1 GiB of it free for reuse; True when
    it took both settings. False (nothing changed) off Linux, without glibc, or when the environment sets any
    ``MALLOC_*`` variable (glibc's own tunables: the user's choice stands)."""
    if not sys.platform.startswith("linux") or any(name.startswith("MALLOC_") for name in os.environ):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # musl and other libcs without these parameters return 0: nothing was changed there
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
