"""One (setting, seed) run of the dual-form study: train the MLP while recording it, analyse its memory, keep what
it produced.

A paper-size run trains for minutes and records gigabytes that are deleted after analysis, so the study keeps each
finished run's ``SettingResult`` (accuracies, curves, the analysis) as a resumable part of its run
(``StudyRun.resumable``, the checkpoint policy of ``icl_gd.core.checkpoints``): ``--seeds 2`` after an interrupted
``--seeds 5`` run reports the two seeds that finished without training them again.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from icl_gd.dual.analysis import Analysis, AnalysisConfig, analyse
from icl_gd.dual.classifier import TaskPair
from icl_gd.dual.settings import ClassifierTrainingConfig, train_setting


@dataclass(frozen=True)
class SettingResult:
    """What one (setting, seed) run produced."""

    accuracies: dict[str, float]
    curves: list[dict]
    analysis: Analysis
    wall_seconds: float


def run_setting(training: ClassifierTrainingConfig, analysis: AnalysisConfig, setting: str, tasks: TaskPair,
                seed: int, memory: Path, device: torch.device, single_task: int = 0,
                keep_memory: bool = True) -> SettingResult:
    """Train ``setting`` from ``seed`` while recording it under ``memory`` (a leftover of an interrupted attempt is
    removed first), then analyse the memory; ``keep_memory=False`` deletes it afterwards."""
    started = time.perf_counter()
    if memory.exists():
        shutil.rmtree(memory)
    trained = train_setting(training, setting, tasks, seed, memory, device, single_task=single_task)
    result = analyse(analysis, trained, tasks)
    if not keep_memory:
        shutil.rmtree(memory)
    return SettingResult(trained.accuracies, trained.curves, result, time.perf_counter() - started)
