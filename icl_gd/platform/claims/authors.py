"""The authors' own code beside ours: values of claims' statistics measured here with the authors' code
(``authors_values.json``, recorded by hand from the ``docs/authors_check`` drivers, with their provenance) and the
second verdict, whether our value agrees with theirs within the two runs' sampling error.

The rule (``agreement``): the per-seed values of both runs are two samples of one statistic (on the log scale for
a ratio statistic); they **agree** when the 95% interval of the difference of their means, from the pooled
two-sample t-test (df = n_ours + n_theirs - 2), contains 0, and **differ** when it does not. With fewer than three
values in all, or no spread at all, there is no interval: **cannot tell**. A recorded run whose set-up is not the
claim's full-budget one (``same_setup`` false) is shown but not compared: **not run** at this set-up, as for a
claim with no record. Agreeing is the absence of evidence of a difference: with one or two of their seeds the test
has little power, and the report shows both samples so a reader can judge.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

from icl_gd.core import stats
from icl_gd.platform.claims.model import Claim, Spread

AUTHORS_VALUES = Path(__file__).with_name("authors_values.json")


class Agreement(str, Enum):
    AGREES = "agrees"
    DIFFERS = "differs"
    CANNOT_TELL = "cannot tell"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class AuthorsValue:
    """What the authors' code gave for one claim's statistic (per seed), and how it was run."""

    claim_id: str
    values: tuple[float, ...]
    same_setup: bool
    provenance: dict[str, Any] = field(default_factory=dict)  # every other recorded field (seeds, steps, versions...)

    def as_json(self) -> dict[str, Any]:
        return {"values": list(self.values), "same_setup": self.same_setup, **self.provenance}


@lru_cache(maxsize=None)
def _load(path: Path) -> dict[str, AuthorsValue]:
    records = json.loads(path.read_text())
    out = {}
    for claim_id, record in records.items():
        if claim_id.startswith("_"):
            continue
        record = dict(record)
        values = tuple(float(v) for v in record.pop("values"))
        same = bool(record.pop("same_setup"))
        out[claim_id] = AuthorsValue(claim_id, values, same, record)
    return out


def authors_values(path: Path = AUTHORS_VALUES) -> dict[str, AuthorsValue]:
    """Claim id -> the authors' code's recorded value (claims without a record are absent)."""
    return _load(Path(path))


@dataclass(frozen=True)
class Comparison:
    agreement: Agreement
    note: str = ""
    difference: float | None = None  # mean ours - mean theirs (log-ratio for a log-scale statistic)
    interval: tuple[float, float] | None = None


def agreement(claim: Claim, ours: Spread | None, theirs: AuthorsValue | None) -> Comparison:
    """The second verdict (see the module docstring)."""
    if theirs is None or not theirs.values:
        return Comparison(Agreement.NOT_RUN, "the authors' code has not been run for this claim here"
                          if theirs is None else "their value is not this claim's statistic")
    if not theirs.same_setup:
        return Comparison(Agreement.NOT_RUN, "their recorded run differs from this claim's set-up")
    if ours is None or not ours.values:
        return Comparison(Agreement.CANNOT_TELL, "no value of ours")
    a, b = list(ours.values), list(theirs.values)
    if claim.log_scale and all(v > 0 for v in a + b):
        a, b = [math.log(v) for v in a], [math.log(v) for v in b]
    if not all(math.isfinite(v) for v in a + b):
        return Comparison(Agreement.CANNOT_TELL, "a value is not finite")
    n, m = len(a), len(b)
    df = n + m - 2
    mean_a, mean_b = sum(a) / n, sum(b) / m
    ss = sum((v - mean_a) ** 2 for v in a) + sum((v - mean_b) ** 2 for v in b)
    if df < 1 or ss == 0:
        return Comparison(Agreement.CANNOT_TELL, f"{n} + {m} seeds give no interval", mean_a - mean_b)
    from scipy.stats import t

    half = float(t.ppf(stats.QUANTILE, df)) * math.sqrt(ss / df * (1 / n + 1 / m))
    diff = mean_a - mean_b
    interval = (diff - half, diff + half)
    verdict = Agreement.AGREES if interval[0] <= 0 <= interval[1] else Agreement.DIFFERS
    return Comparison(verdict, f"ours {n} seeds, theirs {m}; pooled t, df {df}", diff, interval)
