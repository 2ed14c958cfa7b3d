"""What each run plan's seeds cost, kept as data (``estimates.json`` beside this module), not as notes in source.

``icl-gd reproduce`` writes what its finished runs measured (their ``timings.json`` CPU seconds) to
``OUT/estimates.json`` in the same form; ``--update-estimates`` merges that into the kept file, so the printed plan
of the next reproduction starts from today's measurements.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from icl_gd.core.errors import ConfigError, ICLGDNotice
from icl_gd.core.results import write_json

ESTIMATES = Path(__file__).with_name("estimates.json")
FILE_NAME = "estimates.json"  # what a reproduction writes beside its report


@dataclass(frozen=True)
class SeedCost:
    """CPU seconds a seed of one plan takes: the first seed's and a later seed's (which reads what the first
    computed, ``icl_gd.core.shared``) at the full budget, and any seed's under ``--smoke``; ``measured`` says how."""

    first_seed_s: float | None = None  # None: not measured (the default below stands in)
    later_seed_s: float | None = None
    quick_seed_s: float | None = None
    measured: str = "not measured"

    def seconds(self, quick: bool, seed: int) -> float:
        if quick:
            return _or(self.quick_seed_s, DEFAULT_QUICK_S)
        return _or(self.later_seed_s if seed > 0 else self.first_seed_s, DEFAULT_S)


DEFAULT_S, DEFAULT_QUICK_S = 60.0, 10.0  # a plan no reproduction has measured yet
UNMEASURED = SeedCost()


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


SECONDS = ("first_seed_s", "later_seed_s", "quick_seed_s")


def _read(path: Path) -> dict[str, SeedCost]:
    """The plans' costs in the estimates file at ``path``; a figure that is not a number of seconds (a string, a
    negative or infinite number) is a notice, one line each, and counts as not measured (the default stands in)."""
    try:
        data = json.loads(Path(path).read_text())
        return {key: _checked(SeedCost(**entry), key, path) for key, entry in data["plans"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: not an estimates file of icl-gd reproduce ({exc})") from None


def _checked(cost: SeedCost, plan_name: str, path: Path) -> SeedCost:
    bad = {}
    for name in SECONDS:
        value = getattr(cost, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            default = DEFAULT_QUICK_S if name == "quick_seed_s" else DEFAULT_S
            warnings.warn(f"{path}: plan {plan_name!r}: {name} is {value!r}, not a number of seconds; counted at the "
                          f"default {default:.0f} s", ICLGDNotice, stacklevel=2)
            bad[name] = None
    return replace(cost, **bad) if bad else cost


@lru_cache(maxsize=None)
def _kept(path: Path) -> dict[str, SeedCost]:
    return _read(path)


def seed_cost(plan_name: str, path: Path | None = None) -> SeedCost:
    """The kept cost of the plan named ``plan_name`` in ``path`` (default: ``ESTIMATES``); ``UNMEASURED`` when none
    is kept, with a notice (once a plan) that its seeds are counted at the default."""
    path = Path(path or ESTIMATES)
    kept = _kept(path)
    if plan_name not in kept:
        _say_unmeasured(path, plan_name)
    return kept.get(plan_name, UNMEASURED)


@lru_cache(maxsize=None)
def _say_unmeasured(path: Path, plan_name: str) -> None:
    warnings.warn(f"{path} holds no estimate for plan {plan_name!r}: its seeds are counted at the default "
                  f"{DEFAULT_S:.0f} s ({DEFAULT_QUICK_S:.0f} s under --smoke)", ICLGDNotice, stacklevel=3)


def write_costs(path: Path, costs: Mapping[str, SeedCost], about: str) -> None:
    """Write ``costs`` (plan name -> cost) as an estimates file (atomically)."""
    write_json(Path(path), {"_about": about, "plans": {k: asdict(v) for k, v in sorted(costs.items())}})


def record_costs(path: Path, costs: Mapping[str, SeedCost], about: str) -> None:
    """Write a reproduction's measured ``costs`` to ``path``, keeping the plans an earlier reproduction into the same
    output measured and this one did not (a run restricted with ``--only`` must not erase the others' figures); an
    unreadable earlier file is replaced."""
    try:
        earlier = _read(path) if Path(path).exists() else {}
    except ConfigError:
        earlier = {}
    write_costs(path, {**earlier, **costs}, about)


def merge_into_kept(measured: Path, kept: Path | None = None) -> list[str]:
    """Merge the plans ``measured`` (a reproduction's estimates.json) holds into ``kept`` (default: the package's
    file): a measured figure that differs from the kept one replaces it, and the plan's note of how it was measured
    gains how the new figure was (appended, the old note kept); a figure the reproduction did not measure (e.g.
    ``--smoke``'s after a full run), every other field and the file's order stay as they are; a plan the file
    lacks is added at its end. Returns the plans whose figures changed."""
    kept = Path(kept or ESTIMATES)
    new, _ = _read(measured), _read(kept)  # both checked before anything is written
    data = json.loads(kept.read_text())
    updated = []
    for name, cost in new.items():
        entry = data["plans"].get(name)
        if entry is None:
            data["plans"][name] = asdict(cost)
            updated.append(name)
            continue
        changed = [f for f in SECONDS if getattr(cost, f) is not None and getattr(cost, f) != entry.get(f)]
        if not changed:
            continue
        for f in changed:
            entry[f] = getattr(cost, f)
        note = f"{', '.join(changed)} from {cost.measured}"
        entry["measured"] = f"{entry['measured']}; {note}" if entry.get("measured") else note
        updated.append(name)
    if updated:
        write_json(kept, data)
    _kept.cache_clear()
    _say_unmeasured.cache_clear()
    return sorted(updated)
