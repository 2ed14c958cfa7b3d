"""Study ``dual-form``: which training patterns does a trained MLP attend to? (Irie, Csordás & Schmidhuber 2022)

A two-hidden-layer ReLU MLP is trained by SGD (momentum, weight decay, per-epoch lr decay, optional clipping)
while ``icl_gd.dual`` records every linear layer's keys and values, in three settings (``icl_gd.dual.settings``):
``single`` (task 0), ``joint`` (tasks 0 and 1 together on a shared 20-way head) and ``continual`` (task 0, then
task 1: forgetting). Task 0 is ``data.dataset`` (``auto``: Fashion-MNIST when its IDX files are at
``fashion_mnist_dir``, digits otherwise; digits runs in seconds and is what tests and CI use); task 1 is
``second_task`` (task 0 under a fixed pixel permutation, or another 28×28 dataset).

Each run's dual form is verified against the trained weights (float64 rebuild; training is float64, keys are
stored in float64 for digits and float32 otherwise, so the error is round-off of that storage), then test queries
are scored against every stored key (``icl_gd.dual.analysis``). Headline metrics in ``metrics.json`` ``mean`` come
from the first listed setting (votes averaged over the three layers; ``verify_max_rel_error`` is the maximum over
every setting, layer and seed); every setting's metrics are also there under ``<setting>.<metric>``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass

from icl_gd.config import require_non_negative, require_positive_ints, setting
from icl_gd.dual.analysis import (
    Analysis, AnalysisConfig, analyse, headline, verification_table, vote_table,
)
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.figures import setting_figures, summary_figures
from icl_gd.dual.settings import SETTINGS, ClassifierTrainingConfig, require_settings, train_setting
from icl_gd.results import write_csv, write_json, write_metrics
from icl_gd.study import RunContext, Study


@dataclass(frozen=True)
class DualFormConfig:
    data: TaskPairConfig = setting(doc="the two classification tasks", factory=TaskPairConfig)
    training: ClassifierTrainingConfig = setting(doc="the MLP and its recorded SGD", factory=ClassifierTrainingConfig)
    analysis: AnalysisConfig = setting(doc="test queries scored against the stored keys", factory=AnalysisConfig)
    settings: tuple[str, ...] = setting(SETTINGS, "settings to train, of single, joint, continual; the first "
                                                  "gives the headline metrics")
    keep_memory: bool = setting(True, "keep the recorded keys and values under out/memory")
    seeds: int = setting(1, "number of training seeds (inits and shuffles)")
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ...")

    def __post_init__(self) -> None:
        require_positive_ints(self, "seeds")
        require_non_negative("seed", self.seed)
        require_settings(self.settings)


def run(config: DualFormConfig, ctx: RunContext) -> dict[str, float]:
    tasks = config.data.build()
    curves, removals, per_seed = [], [], {}
    analyses: dict[str, list[Analysis]] = {s: [] for s in config.settings}
    seconds = dict.fromkeys(config.settings, 0.0)
    for seed in range(config.seed, config.seed + config.seeds):
        metrics: dict[str, float] = {}
        for name in config.settings:
            started = time.perf_counter()
            memory = ctx.out / "memory" / name / f"seed-{seed}"
            if memory.exists():
                shutil.rmtree(memory)  # an interrupted earlier attempt: recording restarts from scratch
            trained = train_setting(config.training, name, tasks, seed, memory, ctx.device)
            analysis = analyse(config.analysis, trained, tasks)
            if seed == config.seed:
                setting_figures(ctx.out, name, analysis, tasks)
            if not config.keep_memory:
                shutil.rmtree(memory)
            wall = time.perf_counter() - started
            seconds[name] += wall
            run_metrics = {**trained.accuracies, **analysis.metrics, "wall_seconds": wall}
            metrics.update({f"{name}.{k}": v for k, v in run_metrics.items()})
            curves += trained.curves
            removals += [{"seed": seed, **row} for row in analysis.removal_rows]
            analyses[name].append(analysis)
        per_seed[seed] = {**metrics, **headline(metrics, config.settings)}
    vote_rows, verify_rows = vote_table(analyses), verification_table(analyses)
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    write_csv(ctx.out / "vote_accuracy.csv", vote_rows)
    write_csv(ctx.out / "verification.csv", verify_rows)
    write_csv(ctx.out / "removal.csv", removals)
    summary_figures(ctx.out, vote_rows, verify_rows)
    write_json(ctx.out / "summary.json", {"dataset": tasks[0].data.name, "second_task": tasks[1].data.name,
                                          "wall_seconds_per_setting": seconds})
    return write_metrics(ctx.out, per_seed, reductions={"verify_max_rel_error": max})


STUDY = Study(
    name="dual-form",
    summary="Dual form of a trained MLP: every training pattern a key, verified exactly, attention per query",
    default_config=DualFormConfig,
    run=run,
)
