"""What a finished (setting, seed) run of the dual-form study saves, so that an interrupted study resumes.

A paper-size run trains for minutes and records gigabytes that are deleted after analysis, so the study keeps what
each finished (setting, seed) produced (accuracies, curves, the analysis) as a resumable part of its run
(``StudyRun.resumable``, the one checkpoint policy of ``icl_gd.core.checkpoints``): ``--seeds 2`` after an
interrupted ``--seeds 5`` run reports the two seeds that finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from icl_gd.dual.analysis import Analysis


@dataclass(frozen=True)
class SettingResult:
    """What one (setting, seed) run produced."""

    accuracies: dict[str, float]
    curves: list[dict]
    analysis: Analysis
    wall_seconds: float
