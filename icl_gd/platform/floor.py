"""The products floor: how long a run's training must take on one core at the least, from its matrix products.

A study declares what a run trains per seed (``Study.training_work``: ``TrainingWork``, each ``steps`` steps of
some models). One step of each is run under ``torch.utils.flop_counter.FlopCounterMode``, which counts the
floating-point operations of every matrix product of the forward and backward pass (mm, bmm, addmm, convolutions,
attention); sampling (on the trainer's batch thread), elementwise work and the optimiser are not counted. The floor
of a seed is those FLOPs times the steps over the core's matrix-product peak in the training's precision (float32,
or float64 where a study declares it, e.g. the image dual form's exact SGD): no code computing the same products can
train faster on that core, so a run's time over its floor says how far it is from arithmetic-bound.

The peaks (``Peak``) are given, or measured on this machine (a 2048³ product on one thread in each precision, best
of the repeats within about two seconds) and kept in ``peak_cache_path()``, which later calls read; without either,
``DEFAULT_PEAK_GFLOPS``. A given or default float32 peak sets the float64 one at half of it, the rate the core's
vector units run float64 products at (measured: 46 against 93 GFLOP/s). Measure on a quiet machine: a peak measured
under load is kept as it is until measured again.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icl_gd.core.errors import ConfigError
from icl_gd.core.study import PRECISIONS, Study, TrainingWork

# One core of the project's 2-core AMD EPYC machine: float32 2048³ GEMM on one thread, torch 2.13 (2026-12-02).
DEFAULT_PEAK_GFLOPS = 72.0
PEAK_GEMM_SIZE = 2048


@dataclass(frozen=True)
class Peak:
    """A core's float32 matrix-product peak in GFLOP/s, and where it came from (in words, for the printed plan);
    ``gflops64``: its float64 peak (None: half the float32 one)."""

    gflops: float
    source: str
    gflops64: float | None = None

    def of(self, precision: str) -> float:
        """The peak of products in ``precision`` (``float32`` or ``float64``)."""
        if precision not in PRECISIONS:
            raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        if precision == "float32":
            return self.gflops
        return self.gflops64 if self.gflops64 is not None else self.gflops / 2


def matmul_flops(fn: Callable[[], object]) -> int:
    """Floating-point operations of the matrix products ``fn()`` runs on this thread (a product of (m, k) by (k, n)
    counts 2·m·k·n)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def measure_peak_gflops(n: int = PEAK_GEMM_SIZE, seconds: float = 2.0, precision: str = "float32") -> float:
    """The best of repeated n x n x n products in ``precision`` on one intra-op thread within about ``seconds``,
    in GFLOP/s (the thread count is restored afterwards)."""
    import torch

    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    dtype = getattr(torch, precision)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        a @ b  # warm-up
        best = float("inf")
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return 2 * n ** 3 / best / 1e9


def _machine() -> str:
    """This machine in words: host, CPU model and torch version (a measured peak is kept per machine)."""
    import torch

    cpu = platform.processor()
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{platform.node()}, {cpu or platform.machine()}, torch {torch.__version__}"


def peak_cache_path() -> Path:
    """Where measured peaks are kept: ``$XDG_CACHE_HOME/icl-gd/gemm_peak.json`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "icl-gd" / "gemm_peak.json"


def _cached_peaks(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


def machine_peak(measure: bool = False, cache: Path | None = None) -> Peak:
    """This machine's peaks: ``measure``: both measured now (about two seconds each) and kept in ``cache``,
    replacing earlier ones; else those kept before, else ``DEFAULT_PEAK_GFLOPS`` (float64: half). A cache that
    cannot be written is skipped."""
    cache = cache or peak_cache_path()
    machine, peaks = _machine(), _cached_peaks(cache)
    key64 = f"{machine}, float64"
    if not measure:
        if machine in peaks:
            return Peak(peaks[machine], f"measured on this machine before, kept in {cache}", peaks.get(key64))
        return Peak(DEFAULT_PEAK_GFLOPS, "the default, one core of the project's 2-core machine")
    gflops, gflops64 = measure_peak_gflops(), measure_peak_gflops(precision="float64")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({**peaks, machine: round(gflops, 2), key64: round(gflops64, 2)}, indent=1))
    except OSError:
        pass
    return Peak(gflops, "measured now on this machine", gflops64)


def parse_peak(value: str | None, cache: Path | None = None) -> Peak:
    """``--peak``: None (this machine's cached peaks, else the default), ``measure``, or the float32 peak in GFLOP/s
    (a positive number; float64 at half of it); anything else is a ConfigError."""
    if value is None or value == "measure":
        return machine_peak(measure=value == "measure", cache=cache)
    try:
        gflops = float(value)
    except ValueError:
        gflops = float("nan")
    if not gflops > 0 or gflops == float("inf"):
        raise ConfigError(f"--peak {value!r} is not a peak: give GFLOP/s (a positive number, e.g. "
                          f"{DEFAULT_PEAK_GFLOPS:g}) or 'measure'")
    return Peak(gflops, "given")


@dataclass(frozen=True)
class WorkFlops:
    """One declared training: ``steps`` steps of ``flops`` matrix-product FLOPs each, in ``precision``."""

    label: str
    steps: int
    flops: int
    precision: str = "float32"


def step_flops(work: TrainingWork) -> int:
    """Matrix-product FLOPs of one training step of ``work`` (one step of its fresh training, counted)."""
    return matmul_flops(work.fresh_training(1))


def training_flops(study: Study, config: Any) -> tuple[WorkFlops, ...] | None:
    """Each training a seed of ``study`` with ``config`` does, with its counted FLOPs a step; None when the study
    declares none (it has no FLOP model)."""
    if study.training_work is None:
        return None
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # counting runs one real step: on one thread, as the runs do
    try:
        return tuple(WorkFlops(w.label, w.steps, step_flops(w), w.precision) for w in study.training_work(config))
    finally:
        torch.set_num_threads(threads)


def seed_flops(trainings: Sequence[WorkFlops]) -> int:
    """Matrix-product FLOPs of one seed's whole training."""
    return sum(t.steps * t.flops for t in trainings)


def floor_s(flops: float, peak: Peak, precision: str = "float32") -> float:
    """Seconds ``flops`` in ``precision`` take at ``peak``."""
    return flops / (peak.of(precision) * 1e9)


def seed_floor_s(trainings: Sequence[WorkFlops], peak: Peak) -> float:
    """The floor of one seed's whole training: each training's FLOPs at the peak of its precision."""
    return sum(floor_s(t.steps * t.flops, peak, t.precision) for t in trainings)
