"""What every study is: a name, a default config and a run function over the library."""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .results import write_json


@dataclass(frozen=True)
class RunContext:
    """Where and how a study runs. ``out`` exists and is writable when ``run`` is called."""

    out: Path
    device: torch.device
    progress: bool = True


@dataclass(frozen=True)
class Study:
    """``run(config, ctx)`` writes every result file under ``ctx.out`` (``metrics.json`` last) and returns
    the ``mean`` metrics it wrote."""

    name: str
    summary: str
    default_config: Callable[[], Any]
    run: Callable[[Any, RunContext], dict[str, Any]]
    # Intra-op CPU threads when --threads is not given; None keeps torch's default (all cores). Studies of tiny
    # matrices use 1: they gain nothing from intra-op threads, the batch prefetcher uses the other core, and
    # two threads on a busy machine make every step wait on the slowest core (measured 50x slower).
    default_threads: int | None = None


def write_resolved_config(ctx: RunContext, study: str, config: Any) -> None:
    """Write ``config.json``: the fully resolved config (seeds included), device and versions."""
    write_json(
        ctx.out / "config.json",
        {
            "study": study,
            "config": config,
            "device": str(ctx.device),
            "threads": torch.get_num_threads(),
            "command": sys.argv,
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "platform": platform.platform(),
            },
        },
    )
