"""The project's kept full-budget verdicts (``docs/claims-table.json`` of the source checkout, the table the claims
page is written from) beside what this machine read; an installed package without the checkout's ``docs/`` shows
nothing.

``--quick`` re-runs the cheap claims at their full budget (``icl_gd.claims.quick``) and ``kept_comparison`` sets
each verdict beside the kept one, with both intervals, and lists the claims not re-run with their kept verdicts.
A ``--smoke`` run cannot settle an empirical claim (fewer steps and seeds): each of its rows shows the kept verdict
of the same claim and whether the smoke reading lies on the side of the threshold that verdict found
(``kept_text``, ``quick_agreement``); nothing is decided from it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from collections.abc import Mapping, Sequence

from icl_gd.claims.claim import Claim
from icl_gd.claims.formatting import format_value
from icl_gd.claims.verdict import ClaimResult, Verdict

KEPT_TABLE = Path(__file__).resolve().parents[2] / "docs" / "claims-table.json"


@dataclass(frozen=True)
class KeptVerdict:
    """One claim's verdict in the kept full-budget table: verdict, mean, interval, seeds, and when it was measured."""

    verdict: str
    mean: float | None
    interval: tuple[float, float] | None
    seeds: int
    measured: str  # the table's date and commit

    def reading(self) -> str:
        """"holds, mean 0.0017 [0.0013, 0.0022] (30 seeds)": the verdict and its mean and interval."""
        return f"{self.verdict}{_mean_text(self.mean, self.interval)} ({_seeds(self.seeds)})"

    def text(self) -> str:
        where = ""
        if self.mean is not None:
            where = f", mean {format_value(self.mean)}"
            if self.interval:
                where += f" [{format_value(self.interval[0])}, {format_value(self.interval[1])}]"
        return f"kept full budget: {self.verdict}{where} ({self.seeds} seeds, {self.measured})"


@lru_cache(maxsize=4)
def kept_verdicts(path: Path = KEPT_TABLE) -> dict[str, KeptVerdict]:
    """Claim id -> its kept full-budget verdict ({} when the table is not there: an installed package)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    if data.get("quick"):
        return {}
    measured = f"{data.get('date', '?')}, commit {data.get('commit', '?')}"
    kept = {}
    for entry in list(data.get("claims", [])) + list(data.get("construction_checks", [])):
        interval = entry.get("interval") or None
        mean = entry.get("mean")
        kept[entry["id"]] = KeptVerdict(
            str(entry.get("verdict")), float(mean) if isinstance(mean, (int, float)) else None,
            (float(interval["low"]), float(interval["high"])) if interval else None,
            int(entry.get("seeds") or 0), measured)
    return kept


def quick_side(result: ClaimResult, kept: KeptVerdict) -> bool | None:
    """Whether a --quick reading lies on the side of the threshold the kept verdict found (None when the kept
    verdict is not settled, or the reading has no finite mean)."""
    if kept.verdict not in (Verdict.HOLDS.value, Verdict.FAILS.value) or result.kept is None:
        return None
    mean = result.kept.mean
    if not math.isfinite(mean):
        return None
    return result.claim.passes(mean) == (kept.verdict == Verdict.HOLDS.value)


def kept_text(result: ClaimResult) -> str:
    """For a --quick row: the kept full-budget verdict and whether this reading is on its side ("" otherwise)."""
    if not result.quick:
        return ""
    kept = kept_verdicts().get(result.claim.id)
    if kept is None:
        return ""
    side = quick_side(result, kept)
    tail = "" if side is None else ("; this reading is on its side of the threshold" if side else
                                    "; this reading is on the other side of the threshold")
    return kept.text() + tail


def quick_agreement(results: list[ClaimResult]) -> str:
    """The --quick headline's last sentence: of the claims the kept table settled, how many quick readings lie on
    the side of the threshold it found, and which do not."""
    kept = kept_verdicts()
    sides = [(r.claim.id, quick_side(r, kept[r.claim.id])) for r in results if r.quick and r.claim.id in kept]
    judged = [(claim_id, side) for claim_id, side in sides if side is not None]
    if not judged:
        return ""
    other = [claim_id for claim_id, side in judged if not side]
    return (f"Beside the kept full-budget table: {len(judged) - len(other)} of the {len(judged)} claims it settled "
            "read on the same side of their threshold here"
            + (f"; on the other side: {', '.join(other)}" if other else ""))


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _mean_text(mean: float | None, interval: tuple[float, float] | None) -> str:
    if mean is None:
        return ""
    return f", mean {format_value(mean)}" + (f" [{format_value(interval[0])}, {format_value(interval[1])}]"
                                             if interval else " (no interval)")


def reading_here(result: ClaimResult) -> str:
    """"holds, mean 0.0017 [0.0012, 0.0021] (3 seeds)": this machine's verdict with its mean and interval."""
    spread = result.kept
    if spread is None:
        return f"{result.verdict.value} (no value: {result.note})" if result.note else result.verdict.value
    return f"{result.verdict.value}{_mean_text(spread.mean, spread.interval)} ({_seeds(len(spread.values))})"


def kept_comparison(results: Sequence[ClaimResult], not_rerun: Sequence[Claim], why_not: Mapping[str, str],
                    kept: Mapping[str, KeptVerdict] | None = None) -> list[str]:
    """--quick's closing lines: each claim re-run here (``results``, at its full budget) beside its kept verdict,
    each other claim (``not_rerun``; ``why_not``: claim id -> why) with its kept verdict, marked "not re-run here",
    then the last line: how many claims re-run here read as the kept table does (the same verdict), and the others,
    each with both intervals. Construction checks are counted apart, as the tables count them."""
    kept = kept_verdicts() if kept is None else kept
    if not kept:
        return ["no kept table (docs/claims-table.json of a source checkout) to set these verdicts beside"]
    lines = ["beside the kept full-budget table (docs/claims-table.json, "
             f"{next(iter(kept.values())).measured}):"]
    compared = {False: 0, True: 0}  # construction check or not -> re-run here with a kept verdict
    agreed = {False: 0, True: 0}  # ... and read as the kept table does
    other: list[str] = []
    unkept: list[str] = []
    for r in results:
        mine = kept.get(r.claim.id)
        if mine is None:
            unkept.append(r.claim.id)
            lines.append(f"  {r.claim.id}: here {reading_here(r)}; not in the kept table")
            continue
        agrees = r.verdict.value == mine.verdict
        compared[r.claim.is_construction] += 1
        agreed[r.claim.is_construction] += agrees
        if not agrees:
            other.append(f"{r.claim.id} (here {reading_here(r)}; kept {mine.reading()})")
        lines.append(f"  {r.claim.id}: here {reading_here(r)}; kept {mine.reading()}"
                     f"{'' if agrees else ' (reads otherwise)'}")
    for claim in not_rerun:
        mine = kept.get(claim.id)
        lines.append(f"  {claim.id}: not re-run here ({why_not.get(claim.id, 'not selected')}); "
                     + (f"kept {mine.reading()}" if mine else "not in the kept table"))
    last = (f"{agreed[False]} of {compared[False]} claims re-run at full budget here read as the kept table does"
            + (f" (and {agreed[True]} of {compared[True]} construction checks)" if compared[True] else "")
            + f"; the others: {', '.join(other) or 'none'}")
    if unkept:
        last += f"; not in the kept table: {', '.join(unkept)}"
    if not_rerun:
        last += f"; {len(not_rerun)} not re-run here (their kept verdicts above)"
    return lines + [last]
