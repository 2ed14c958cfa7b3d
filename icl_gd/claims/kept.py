"""The project's kept full-budget verdicts beside a ``--quick`` reading.

A ``--quick`` run cannot settle an empirical claim (fewer steps and seeds), so on its own its table is a column of
"inconclusive". What a newcomer wants to know is whether their machine reads what the project found: each quick
row therefore shows the kept full-budget verdict of the same claim (``docs/claims-table.json`` of the source checkout,
the table the claims page is written from) and whether the quick reading lies on the side of the threshold that
verdict found. Nothing is decided from it; an installed package without the checkout's ``docs/`` shows nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
