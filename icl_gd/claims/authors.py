"""The authors' own code beside ours: values of claims' statistics measured here with the authors' code
(``authors_values.json``, recorded by hand from the ``docs/authors_check`` drivers, with their provenance), their
own verdict under the claim's rule, and the second verdict, whether the two codes agree.

Their verdict (``their_verdict``) is the claim's rule (``model.judge_values``) applied to their seeds. A seed whose
training failed by the claim's declared test (``Claim.training``: the record's per-seed final losses against the
untrained model's) is flagged, counted and left out, of their verdict and of the comparison, as ours are.

The agreement rule (``agreement``), on the seeds both codes trained: the per-seed values are two samples of one
statistic (on the log scale for a ratio statistic). They **agree** when the 95% interval of the difference of their
means (pooled two-sample t, df = n_ours + n_theirs - 2) contains 0 (no evidence of a difference), or lies within
± the claim's equivalence margin (``Claim.margin``: a difference too small to matter for the claim, however tiny
the spreads); they **differ** otherwise. A value that is not finite (a roll-out that diverged) on either side makes
them **differ**, with the reason: one code's statistic is unbounded where the other's is not. With fewer than three
values in all there is no interval: **agrees** when the two means lie within the margin, else **cannot tell**; a
NaN (a measurement that did not happen) is **cannot tell**. A recorded run whose set-up is not the claim's
full-budget one (``same_setup`` false) is shown but not compared: **not run** at this set-up, as for a claim with no
record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

from icl_gd.core import stats
from icl_gd.claims.formatting import format_value
from icl_gd.claims.claim import Claim
from icl_gd.claims.verdict import Spread, Verdict, judge_values, seed_list

AUTHORS_VALUES = Path(__file__).with_name("authors_values.json")


class Agreement(str, Enum):
    AGREES = "agrees"
    DIFFERS = "differs"
    CANNOT_TELL = "cannot tell"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class AuthorsValue:
    """What the authors' code gave for one claim's statistic (per seed), and how it was run. ``trained_loss``: per
    seed, the final test loss of every trained model the statistic uses; ``untrained_loss``: the untrained model's
    (both optional: the failed-seed test runs where they are recorded)."""

    claim_id: str
    values: tuple[float, ...]
    same_setup: bool
    provenance: dict[str, Any] = field(default_factory=dict)  # every other recorded field (seeds, steps, versions...)
    trained_loss: tuple[tuple[float, ...], ...] = ()
    untrained_loss: float | None = None
    # runs of their code at other set-ups than the claim's (e.g. their notebook's shorter length): shown, never compared
    other_setups: tuple[AuthorsValue, ...] = ()

    def as_json(self) -> dict[str, Any]:
        extra = {"trained_loss": [list(v) for v in self.trained_loss], "untrained_loss": self.untrained_loss} \
            if self.trained_loss else {}
        others = {"other_setups": [o.as_json() for o in self.other_setups]} if self.other_setups else {}
        return {"values": list(self.values), "same_setup": self.same_setup, **extra, **self.provenance, **others}

    def seed_label(self, index: int) -> str:
        seeds = self.provenance.get("seeds") or []
        return str(seeds[index]) if index < len(seeds) else str(index)


def _parse(claim_id: str, record: dict[str, Any]) -> AuthorsValue:
    record = dict(record)
    values = tuple(float(v) for v in record.pop("values"))
    same = bool(record.pop("same_setup"))
    losses = tuple(tuple(float(x) for x in (v if isinstance(v, list) else [v]))
                   for v in record.pop("trained_loss", []))
    untrained = record.pop("untrained_loss", None)
    others = tuple(_parse(claim_id, {**o, "same_setup": False}) for o in record.pop("other_setups", []))
    return AuthorsValue(claim_id, values, same, record, losses, None if untrained is None else float(untrained),
                        others)


@lru_cache(maxsize=None)
def _load(path: Path) -> dict[str, AuthorsValue]:
    records = json.loads(path.read_text())
    return {claim_id: _parse(claim_id, record) for claim_id, record in records.items() if not claim_id.startswith("_")}


def authors_values(path: Path = AUTHORS_VALUES) -> dict[str, AuthorsValue]:
    """Claim id -> the authors' code's recorded value (claims without a record are absent)."""
    return _load(Path(path))


def their_failed_seeds(claim: Claim, theirs: AuthorsValue) -> tuple[tuple[int, str], ...]:
    """(index, reason) of each of their seeds whose training failed by the claim's declared test (none when the
    claim declares no test or the record holds no losses)."""
    if claim.training is None or not theirs.trained_loss or theirs.untrained_loss is None:
        return ()
    return tuple((i, reason) for i, losses in enumerate(theirs.trained_loss)
                 if (reason := claim.training.failed(losses, theirs.untrained_loss)))


def their_verdict(claim: Claim, theirs: AuthorsValue) -> tuple[Verdict, str, tuple[tuple[int, str], ...]]:
    """Their verdict under the claim's rule, its note (their failed seeds named by their labels) and those seeds."""
    failed = their_failed_seeds(claim, theirs)
    verdict, note = judge_values(claim, theirs.values, failed)
    if failed:
        note = note.replace(seed_list([i for i, _ in failed]), seed_list([theirs.seed_label(i) for i, _ in failed]))
    return verdict, note, failed


def judged_at_other_setups(claim: Claim, theirs: AuthorsValue | None) -> tuple[tuple[AuthorsValue, Verdict, str], ...]:
    """Each run of their code recorded at another set-up than the claim's, with its verdict under the claim's rule;
    shown beside the claim, never compared with ours."""
    return tuple((other, *their_verdict(claim, other)[:2]) for other in (theirs.other_setups if theirs else ()))


def compared(theirs: AuthorsValue | None) -> bool:
    """Whether their record is at the claim's set-up with values (what their verdict and the agreement need)."""
    return theirs is not None and bool(theirs.values) and theirs.same_setup


@dataclass(frozen=True)
class Comparison:
    agreement: Agreement
    note: str = ""
    difference: float | None = None  # mean ours - mean theirs (log-ratio for a log-scale statistic)
    interval: tuple[float, float] | None = None
    verdict: Verdict | None = None  # theirs, under the claim's rule (None when not run at this set-up)
    verdict_note: str = ""
    failed_seeds: tuple[tuple[int, str], ...] = ()  # theirs: (index, reason)


def _range(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g}"


def _not_finite(a: Sequence[float], b: Sequence[float]) -> str:
    """Why values that are not all finite differ: which side, which seeds, and how the finite ones lie."""

    sides = []
    for name, values in (("ours", a), ("theirs", b)):
        bad = [f"seed {i} {format_value(v)}" for i, v in enumerate(values) if not math.isfinite(v)]
        sides.append(f"{name}: {', '.join(bad)}" if bad else f"{name} all finite")
    text = "a value is not finite (" + "; ".join(sides) + ")"
    fa, fb = [v for v in a if math.isfinite(v)], [v for v in b if math.isfinite(v)]
    if fa and fb and (min(fa) > max(fb) or max(fa) < min(fb)):
        side = "above" if min(fa) > max(fb) else "below"
        text += (f"; every finite value of ours ({_range(fa)}) lies {side} every one of theirs ({_range(fb)})")
    return text


def agreement(claim: Claim, ours: Spread | None, theirs: AuthorsValue | None,
              ours_failed: Sequence[int] = ()) -> Comparison:
    """Their verdict and the second verdict (see the module docstring); ``ours_failed``: indices of our seeds
    whose training failed, left out."""
    if theirs is None or not theirs.values:
        return Comparison(Agreement.NOT_RUN, "the authors' code has not been run for this claim here"
                          if theirs is None else "their value is not this claim's statistic")
    if not theirs.same_setup:
        return Comparison(Agreement.NOT_RUN, "their recorded run differs from this claim's set-up")
    verdict, verdict_note, failed = their_verdict(claim, theirs)
    judged = dict(verdict=verdict, verdict_note=verdict_note, failed_seeds=failed)
    if ours is None or not ours.values:
        return Comparison(Agreement.CANNOT_TELL, "no value of ours", **judged)
    left_out = {i for i, _ in failed}
    a = [v for i, v in enumerate(ours.values) if i not in set(ours_failed)]
    b = [v for i, v in enumerate(theirs.values) if i not in left_out]
    flagged = []
    if ours_failed:
        flagged.append(f"our {seed_list(sorted(ours_failed))}")
    if failed:
        flagged.append(f"their {seed_list([theirs.seed_label(i) for i in sorted(left_out)])}")
    out = f"; left out, training failed: {' and '.join(flagged)}" if flagged else ""
    if not a or not b:
        return Comparison(Agreement.CANNOT_TELL, f"no trained seed on one side{out}", **judged)
    if any(math.isnan(v) for v in a + b):
        return Comparison(Agreement.CANNOT_TELL, f"a value is NaN (not measured){out}", **judged)
    if not all(math.isfinite(v) for v in a + b):
        return Comparison(Agreement.DIFFERS, _not_finite(a, b) + out, **judged)
    if claim.log_scale and all(v > 0 for v in a + b):
        a, b = [math.log(v) for v in a], [math.log(v) for v in b]
    margin = claim.margin.value if claim.margin else 0.0
    n, m = len(a), len(b)
    df = n + m - 2
    diff = sum(a) / n - sum(b) / m
    within = f"within the margin ±{margin:.3g} ({claim.margin.source})" if claim.margin else ""
    if df < 1:
        if claim.margin and abs(diff) <= margin:
            return Comparison(Agreement.AGREES, f"{n} + {m} seeds give no interval; the means are {within}{out}",
                              diff, **judged)
        return Comparison(Agreement.CANNOT_TELL, f"{n} + {m} seeds give no interval{out}", diff, **judged)
    mean_a, mean_b = sum(a) / n, sum(b) / m
    ss = sum((v - mean_a) ** 2 for v in a) + sum((v - mean_b) ** 2 for v in b)
    from scipy.stats import t

    half = float(t.ppf(stats.QUANTILE, df)) * math.sqrt(ss / df * (1 / n + 1 / m))
    interval = (diff - half, diff + half)
    seeds = f"ours {n} seeds, theirs {m}; pooled t, df {df}"
    if interval[0] <= 0 <= interval[1]:
        return Comparison(Agreement.AGREES, seeds + out, diff, interval, **judged)
    if claim.margin and -margin <= interval[0] and interval[1] <= margin:
        return Comparison(Agreement.AGREES, f"{seeds}; the interval lies {within}{out}", diff, interval, **judged)
    beyond = f"; the interval reaches beyond the margin ±{margin:.3g}" if claim.margin else "; no margin declared"
    return Comparison(Agreement.DIFFERS, seeds + beyond + out, diff, interval, **judged)
