"""What a sweep runs: the Cartesian product of grid values times seeds, one ``RunSpec`` (one run directory) each."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from icl_gd.core.errors import ConfigError

_UNSAFE = re.compile(r"[^A-Za-z0-9._=+-]")
_MAX_NAME = 120
MAX_RUNS = 100_000  # a sweep's runs are directories under one folder and specs held in memory: beyond this, split it


@dataclass(frozen=True)
class RunSpec:
    """One run of one seed: ``study`` with ``preset`` and the ``KEY=VALUE`` overrides applied in order (the sweep's
    own settings, then the grid values, then ``seed=S`` and ``seeds=1``)."""

    study: str
    preset: str = "default"
    overrides: tuple[str, ...] = ()
    # How many leading overrides are the sweep's settings for every run (``--set``): ``run_id`` names them by a
    # hash, so directory names show what varies (grid values, seed) yet differ whenever any setting does.
    n_common: int = 0

    def values(self) -> dict[str, str]:
        """The overrides as {key: value} (a later one wins, as when they are applied)."""
        return dict(item.split("=", 1) for item in self.overrides if "=" in item)

    def run_id(self) -> str:
        """The run directory's name: the study, a non-default preset, the overrides after the common ones but
        ``seeds=1``, and ``c`` + a hash of the common ones, e.g. ``single-layer__n_context=5__seed=0__c1a2b3c4d``.
        Characters a file system may refuse become ``_``, and a hash of the exact spec is appended when that (or
        a cut to 120 characters) could make two specs collide."""
        parts = [self.study] + ([self.preset] if self.preset != "default" else [])
        parts += [item for item in self.overrides[self.n_common:] if item.replace(" ", "") != "seeds=1"]
        if self.n_common:
            parts.append("c" + _digest(self.overrides[:self.n_common], 8))
        name = "__".join(parts)
        safe = _UNSAFE.sub("_", name)
        if safe != name or len(safe) > _MAX_NAME:
            safe = f"{safe[:_MAX_NAME]}__{_digest((self.study, self.preset, self.overrides), 10)}"
        return safe


Figures = bool | Set[str]  # every run draws its figures (True), none does (False), or only the runs of these ids


def draws_figures(figures: Figures, spec: RunSpec) -> bool:
    """Whether the run of ``spec`` draws its figures under a sweep's ``figures`` choice."""
    return figures if isinstance(figures, bool) else spec.run_id() in figures


def _digest(value: object, length: int) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:length]


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """``["n_context=5,10", "d=3"]`` -> {"n_context": ["5", "10"], "d": ["3"]} (ConfigError on a bad item)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--grid expects KEY=V1,V2,..., got {item!r}")
        key, text = (part.strip() for part in item.split("=", 1))
        values = [v.strip() for v in text.split(",")]
        if not key or not all(values):
            raise ConfigError(f"--grid {item!r}: a key and non-empty comma-separated values are needed")
        if key in grid:
            raise ConfigError(f"--grid {key} is given twice")
        grid[key] = values
    return grid


def plan_sweep(study: str, grid: Mapping[str, Sequence[str]], seeds: int | Sequence[int], preset: str = "default",
               overrides: Sequence[str] = ()) -> list[RunSpec]:
    """Every combination of the grid values (first key slowest) times every seed, one run of one seed each.

    ``seeds``: a count (seeds 0..n-1) or the seeds themselves. ``overrides`` apply to every run, before the grid
    values. The seed keys belong to the sweep: ``seed``/``seeds`` in ``grid`` or ``overrides`` is a ConfigError.
    """
    n_points = math.prod(len(values) for values in grid.values())
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    if n_points * n_seeds > MAX_RUNS:
        raise ConfigError(f"--seeds {seeds if isinstance(seeds, int) else n_seeds} times {n_points} grid point(s) is "
                          f"{n_points * n_seeds} runs, more than a sweep holds ({MAX_RUNS}, one run directory "
                          "each); lower --seeds or the grid")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list or any(s < 0 for s in seed_list) or len(set(seed_list)) != len(seed_list):
        raise ConfigError(f"--seeds must be a positive count or distinct non-negative seeds, got {seeds!r}")
    for key in [*grid, *(item.split("=", 1)[0].strip() for item in overrides)]:
        if key.rsplit(".", 1)[-1] in {"seed", "seeds"}:
            raise ConfigError(f"{key} is set by the sweep (one run per seed); use --seeds instead")
    for key, values in grid.items():
        if not values:
            raise ConfigError(f"--grid {key} has no values")
    keys = list(grid)
    specs = []
    for combination in itertools.product(*(list(grid[k]) for k in keys)):
        for seed in seed_list:
            chosen = tuple(f"{k}={v}" for k, v in zip(keys, combination))
            specs.append(RunSpec(study, preset, (*overrides, *chosen, f"seed={seed}", "seeds=1"), len(overrides)))
    return specs
