"""Finished (setting, seed) runs of the dual-form study, saved so that an interrupted study resumes.

A paper-size run trains for minutes and records gigabytes that are deleted after analysis, so the study saves
what each finished (setting, seed) produced (accuracies, curves, the analysis) and, when the same command runs
again, reuses those whose config fingerprint matches instead of training them again: ``--seeds 2`` after an
interrupted ``--seeds 5`` run reports the two seeds that finished. A damaged or foreign file is ignored.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from icl_gd.core.results import atomic_write_bytes
from icl_gd.dual.analysis import Analysis

FORMAT = "dual-form-setting-result/1"


@dataclass(frozen=True)
class SettingResult:
    """What one (setting, seed) run produced."""

    accuracies: dict[str, float]
    curves: list[dict]
    analysis: Analysis
    wall_seconds: float


def save_result(path: Path, fingerprint: str, result: SettingResult) -> None:
    """Write ``result`` atomically; ``fingerprint`` (``training.config_fingerprint`` of everything that made it)
    must match when it is loaded."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, pickle.dumps({"format": FORMAT, "fingerprint": fingerprint, "result": result}))


def load_result(path: Path, fingerprint: str) -> SettingResult | None:
    """The saved result at ``path`` if it exists and belongs to ``fingerprint``; otherwise None."""
    if not path.is_file():
        return None
    try:
        saved = pickle.loads(path.read_bytes())
    except Exception:  # noqa: BLE001 - a truncated or foreign file is simply not reused
        return None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or saved.get("fingerprint") != fingerprint:
        return None
    result = saved.get("result")
    return result if isinstance(result, SettingResult) else None
