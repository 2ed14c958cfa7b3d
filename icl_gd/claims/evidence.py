"""What one seed's runs measured, as a claim's statistic reads it."""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icl_gd.core.results import read_json


@dataclass(frozen=True)
class SeedEvidence:
    """What one seed's runs measured: ``metrics[i]`` is ``metrics.json["mean"]`` of the i-th plan's run for this
    seed (one seed per run), ``run_dirs[i]`` its directory (for claims that read a table such as ``ood.csv``)."""

    metrics: tuple[Mapping[str, Any], ...]
    run_dirs: tuple[Path, ...]

    def value(self, key: str, plan: int = 0) -> float:
        """A scalar metric, or ``key[i]`` for item i of a list-valued one (a per-step metric); a missing or
        non-numeric one is a MissingEvidence (the claim becomes inconclusive)."""
        metrics = self.metrics[plan]
        indexed = _INDEXED.fullmatch(key)
        name = indexed.group(1) if indexed else key
        if name not in metrics:
            raise MissingEvidence(f"metric {name!r} is not in the run's metrics.json")
        value = metrics[name]
        if indexed:
            if not isinstance(value, list) or not value:
                raise MissingEvidence(f"metric {name!r} is not a non-empty list ({value!r})")
            value = value[int(indexed.group(2))] if -len(value) <= int(indexed.group(2)) < len(value) else None
        if isinstance(value, str) and value in ("inf", "-inf"):
            return float(value)
        if value is None or isinstance(value, (bool, list, dict)):
            raise MissingEvidence(f"metric {key!r} is not a finite number ({value!r})")
        return float(value)


_INDEXED = re.compile(r"(.+)\[(-?\d+)\]")


class MissingEvidence(LookupError):
    """A claim's statistic could not be computed from the runs it was given."""


def table_rows(evidence: SeedEvidence, name: str, plan: int = 0) -> list[dict[str, str]]:
    """The rows of ``name`` (e.g. ``ood.csv``) in the plan's run directory; a missing file is a MissingEvidence."""
    path = Path(evidence.run_dirs[plan]) / name
    if not path.is_file():
        raise MissingEvidence(f"{path} is missing")
    with path.open() as handle:
        return list(csv.DictReader(handle))


def seed_evidence(per_plan: Sequence[Sequence[Path]]) -> list[SeedEvidence]:
    """One SeedEvidence per seed (the seeds every plan has; a one-run plan, such as verify, serves every seed)."""
    seeds = min(len(dirs) for dirs in per_plan)
    return [SeedEvidence(tuple(read_json(dirs[min(i, len(dirs) - 1)] / "metrics.json")["mean"] for dirs in per_plan),
                         tuple(dirs[min(i, len(dirs) - 1)] for dirs in per_plan))
            for i in range(seeds)]
