"""The skeleton of every dual-form study, as ``icl_gd.regression.study`` is for the regression studies.

A dual-form study trains a network while recording it, for every seed and every *part* of its config (a setting
of the image study, a set-up of the language-model study), then reads the key store's dual form. What is the same
whatever the study lives here:

- ``DualStudyConfig``: the keys every dual-form study has (``seeds``, ``seed``, ``keep_store``) and its seed list;
- ``DualRun``: one run, on the core study contract (``icl_gd.core.study.StudyRun``): one key store per
  (part, seed) under ``out/store/<part>/seed-<s>``, each finished (part, seed) kept as a resumable result (a rerun
  of an interrupted run reuses every (part, seed) that finished), the store deleted after its analysis unless
  ``keep_store``, per-part metrics prefixed ``<part>.``, tidy tables, and ``metrics.json`` last.

A study says only what is particular to it: its config, what one (part, seed) trains and measures, its tables and
figures (docs/adding-a-study.md).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.core.config import check_settings, positive_int, require_non_negative, setting
from icl_gd.core.metric_name import in_part
from icl_gd.core.study import RunContext, RunMemory, StudyRun

T = TypeVar("T")


@dataclass(frozen=True)
class DualStudyConfig:
    """The seeds and the key stores of a dual-form study; a study's config subclasses it."""

    seeds: int = positive_int(1, "number of training seeds (inits and shuffles)")
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ...", check=require_non_negative)
    keep_store: bool = setting(True, "keep each (part, seed)'s recorded keys and values under out/store")

    def __post_init__(self) -> None:
        check_settings(self)

    def seed_list(self) -> list[int]:
        return [self.seed + i for i in range(self.seeds)]


def run_memory(config: DualStudyConfig) -> RunMemory:
    """What a dual-form run declares before it starts (``Study.memory``): its seeds."""
    return RunMemory(seeds_key="seeds", seeds=config.seeds)


class DualRun(StudyRun):
    """One run of a dual-form study, from its seeds to ``metrics.json`` (``StudyRun``), with a key store per
    (part, seed)."""

    def __init__(self, ctx: RunContext, config: DualStudyConfig) -> None:
        super().__init__(ctx, config.seed_list())
        self.config = config

    def store(self, part: str, seed: int) -> Path:
        """Where (part, seed)'s key store lives."""
        return self.ctx.out / "store" / part / f"seed-{seed}"

    def part(self, part: str, seed: int, compute: Callable[[Path], T], *made_of: Any, fresh_store: bool = True) -> T:
        """``compute(store)`` for (``part``, ``seed``), kept as a resumable result whose fingerprint is ``made_of``
        (the config parts that made it), the seed and the device. ``fresh_store``: a leftover store of an
        interrupted attempt is removed first (False: the part's own training resumes into it). The store is
        deleted afterwards unless ``keep_store``."""
        store = self.store(part, seed)

        def computed() -> T:
            if fresh_store and store.exists():
                shutil.rmtree(store)
            result = compute(store)
            if not self.config.keep_store and store.exists():
                shutil.rmtree(store)
            return result

        fingerprint = config_fingerprint(*made_of, part, seed, str(self.device))
        return self.resumable(f"{part}/seed-{seed}", fingerprint, computed)

    def worst(self, seed: int, metric: str, parts: Any) -> float:
        """The largest ``<part>.<metric>`` of ``seed`` over ``parts`` (e.g. the verification error)."""
        return max(self.per_seed[seed][in_part(part, metric)] for part in parts)
