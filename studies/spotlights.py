"""Study ``spotlights``: are the dual form's spotlights faithful? Attention against retraining and attribution methods.

Beyond the papers. Irie et al. read the training patterns a prediction attends to most as the patterns
the network uses; this study tests that reading against the data-attribution field's ground truth. An MLP is
trained on digits by the recorded SGD loop (``icl_gd.dual.settings.train_setting``, setting ``single``); for
``n_queries`` test images, every training example gets a score from the dual form (attention and contribution per
layer and summed over layers, ``icl_gd.dual.attribution``), from dattri's TracIn, TRAK and influence function, and
at random. Retraining then measures what the scores predict (``icl_gd.dual.lds``):

- ``lds.csv`` / ``lds_<method>``: the linear datamodeling score over ``subsets`` random subsets of a fraction
  ``subset_fraction`` of the training set, each retrained with ``retrain_seeds`` seeds (mean per query; the
  interval ``lds_<method>_low``/``_high`` is the 95% t-interval over the queries of that seed);
- ``leave_k_out.csv`` / ``loo_move_<method>_k<k>`` (mean |Δ logit|) and ``loo_drop_<method>_k<k>`` (mean drop):
  how far the predicted class's logit moves when each method's top-k examples for a query are removed and the model
  retrained (``retrain_seeds`` seeds, averaged), against the same retraining on the full set; ``random`` is the
  control;
- ``figures/spotlights``: both.

The target of every method is the logit of the class the trained model predicts for the query. dattri's methods
need the optional extra ``attribution``; without it the run refuses at once unless ``methods`` is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from icl_gd.core import stats
from icl_gd.core.config import positive_int, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.progress import phase, tick
from icl_gd.core.plotting import plt
from icl_gd.core.study import RunContext, Study
from icl_gd.dual import metric_names as names
from icl_gd.dual.attribution import (DATTRI_METHODS, DUAL_METHODS, DattriSettings, dattri_scores, dual_scores,
                                     random_scores, require_dattri)
from icl_gd.dual.classifier import ClassificationTask
from icl_gd.dual.datasets import load_dataset
from icl_gd.dual.lds import (lds, logits_of, mean_targets, random_subsets, retrain, subset_targets, top_examples,
                             without)
from icl_gd.dual.settings import ClassifierTrainingConfig, train_setting
from icl_gd.dual.study import DualRun, DualStudyConfig, run_memory

ALL_METHODS = (*DUAL_METHODS, *DATTRI_METHODS, "random")


def _known_methods(name: str, value: tuple[str, ...]) -> None:
    unknown = [m for m in value if m not in ALL_METHODS]
    if unknown:
        raise ConfigError(f"{name}: unknown methods {', '.join(unknown)}; known: {', '.join(ALL_METHODS)}")


@dataclass(frozen=True)
class SpotlightsConfig(DualStudyConfig):
    dataset: Literal["digits", "mnist-subset", "fashion-mnist"] = setting("digits", "the images")
    train_examples: int | None = positive_int(None, "train on the first N training images (none: all)")
    training: ClassifierTrainingConfig = setting(doc="the MLP and its recorded SGD",
                                                 factory=lambda: ClassifierTrainingConfig(hidden=64))
    methods: tuple[str, ...] = setting(DATTRI_METHODS, "dattri methods to run, of tracin, trak, influence "
                                                       "(extra 'attribution'); empty: dual form and random only")
    n_queries: int = positive_int(50, "test images attributed (the first ones of the test split)")
    subsets: int = positive_int(50, "LDS: random training subsets, each retrained")
    subset_fraction: float = setting(0.5, "LDS: fraction of the training set in each subset")
    retrain_seeds: int = positive_int(3, "seeds each subset (and each leave-k-out set) is retrained with")
    loo_queries: int = positive_int(6, "leave-k-out: the first queries whose top-k examples are removed")
    loo_k: tuple[int, ...] = setting((10, 40, 160), "leave-k-out: examples removed per query")
    loo_methods: tuple[str, ...] = setting(("attention_sum", "contribution_sum", "tracin", "trak", "influence",
                                            "random"), "leave-k-out: the methods whose top-k are removed (dattri's "
                                                      "only when in methods)",
                                           check=_known_methods)
    trak_projection_dim: int = positive_int(512, "TRAK: random projection size")
    influence_damping: float = setting(0.01, "influence function: λ added to the output layer's Hessian")
    seeds: int = positive_int(3, "training seeds (init and shuffles of the attributed model)")

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = [m for m in self.methods if m not in DATTRI_METHODS]
        if unknown:
            raise ConfigError(f"methods: {', '.join(unknown)} not dattri methods; known: {', '.join(DATTRI_METHODS)}")
        if not 0 < self.subset_fraction < 1:
            raise ConfigError(f"subset_fraction must be in (0, 1), got {self.subset_fraction}")
        if any(k <= 0 for k in self.loo_k):
            raise ConfigError(f"loo_k must be positive, got {self.loo_k}")


@dataclass(frozen=True)
class SeedResult:
    """One training seed's measurements: LDS per (method, query), leave-k-out Δ per (method, k, query)."""

    lds_rows: list[dict]
    loo_rows: list[dict]
    accuracy: float
    retrain_max_abs_diff: float  # retraining on the full set against the recorded model: 0 when the loops agree


def retrain_seeds(config: SpotlightsConfig, seed: int) -> list[int]:
    """The retraining seeds of training seed ``seed``: disjoint from every training seed and from each other's."""
    return [1000 * (seed + 1) + r for r in range(config.retrain_seeds)]


def run_seed(config: SpotlightsConfig, task: ClassificationTask, seed: int, store: Path,
             device: torch.device) -> SeedResult:
    n = task.n_train
    with phase(f"seed {seed}: recorded training and attribution"):
        trained = train_setting(config.training, "single", (task, task), seed, store, device)
        checkpoints, lrs = [], []
        full = retrain(config.training, task, np.arange(n), seed, device, on_epoch=lambda e, m, lr: (
            checkpoints.append({k: v.detach().clone() for k, v in m.state_dict().items()}), lrs.append(lr)))
        drift = max(float((a - b).abs().max()) for a, b in zip(full.state_dict().values(),
                                                                trained.model.state_dict().values()))
        x = torch.as_tensor(task.data.test_x[:config.n_queries], dtype=torch.float64, device=device)
        target_class = trained.model(x).argmax(1).cpu().numpy()
        scores = dual_scores(trained, x, n)
        if config.methods:
            scores.update(dattri_scores(trained.model, checkpoints, lrs, task.data.train_x, task.data.train_y,
                                        task.data.test_x[:config.n_queries], target_class, config.methods,
                                        DattriSettings(config.trak_projection_dim, 0.0, config.influence_damping,
                                                       seed)))
        scores["random"] = random_scores(len(target_class), n, seed)

    def targets(keep: np.ndarray, retrain_seed: int) -> np.ndarray:
        tick("retrainings")
        return logits_of(retrain(config.training, task, keep, retrain_seed, device), x, target_class)

    seeds = retrain_seeds(config, seed)
    with phase(f"seed {seed}: LDS retrainings"):
        subsets = random_subsets(n, config.subsets, config.subset_fraction, seed)
        truth = subset_targets(targets, subsets, seeds)
    lds_rows = [{"method": m, "query": q, "lds": float(v)}
                for m, s in scores.items() for q, v in enumerate(lds(s, subsets, truth))]
    loo_rows = []
    with phase(f"seed {seed}: leave-k-out retrainings"):
        base = mean_targets(targets, np.arange(n), seeds)
        for q in range(min(config.loo_queries, len(target_class))):
            for method in (m for m in config.loo_methods if m in scores):
                for k in config.loo_k:
                    moved = mean_targets(targets, without(n, top_examples(scores[method][q], k)), seeds)
                    loo_rows.append({"method": method, "k": k, "query": q, "delta": float(moved[q] - base[q])})
    return SeedResult(lds_rows, loo_rows, trained.accuracies["test_accuracy"], drift)


def seed_metrics(result: SeedResult) -> dict[str, float]:
    """``lds_<method>`` (mean over queries) with its 95% interval over queries, ``loo_move/drop_<method>_k<k>``."""
    metrics = {"test_accuracy": result.accuracy, "retrain_max_abs_diff": result.retrain_max_abs_diff}
    for method in dict.fromkeys(r["method"] for r in result.lds_rows):
        values = [r["lds"] for r in result.lds_rows if r["method"] == method and np.isfinite(r["lds"])]
        spread = stats.spread(values)
        metrics[f"lds_{method}"] = spread.mean
        metrics[f"lds_{method}_low"], metrics[f"lds_{method}_high"] = spread.low, spread.high
    for method, k in dict.fromkeys((r["method"], r["k"]) for r in result.loo_rows):
        deltas = np.array([r["delta"] for r in result.loo_rows if r["method"] == method and r["k"] == k])
        metrics[names.loo_move(method, k)] = float(np.abs(deltas).mean())
        metrics[names.loo_drop(method, k)] = float(-deltas.mean())
    return metrics


def run(config: SpotlightsConfig, ctx: RunContext) -> dict[str, float]:
    if config.methods:
        require_dattri()  # refuse before any training
    data = load_dataset(config.dataset).first_train(config.train_examples)
    if config.n_queries > len(data.test_y) or max(config.loo_k, default=0) >= len(data.train_y):
        raise ConfigError(f"n_queries must be at most {len(data.test_y)} and loo_k below {len(data.train_y)}")
    task = ClassificationTask(0, data, 0, 0)
    run = DualRun(ctx, config)
    for seed in run.seeds:
        result = run.part("single", seed, lambda store: run_seed(config, task, seed, store, ctx.device), config)
        metrics = seed_metrics(result)
        run.record(seed, metrics)
        methods = dict.fromkeys(r["method"] for r in result.lds_rows)
        run.add_rows("lds", [{"method": m, "lds": metrics[f"lds_{m}"], "low": metrics[f"lds_{m}_low"],
                              "high": metrics[f"lds_{m}_high"]} for m in methods], seed=seed)
        run.add_rows("lds_queries", result.lds_rows, seed=seed)
        run.add_rows("leave_k_out", result.loo_rows, seed=seed)
    return run.finish(lambda mean: [("spotlights", spotlights_figure(run.tables["lds"], run.tables["leave_k_out"]))],
                      reductions={"retrain_max_abs_diff": max})


def spotlights_figure(lds_rows: Sequence[dict], loo_rows: Sequence[dict]):
    """Left: LDS per method (mean over seeds; bars: the lowest and highest per-seed interval ends over queries).
    Right: mean |Δ target| after removing each method's top-k examples and retraining, against k."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    methods = list(dict.fromkeys(r["method"] for r in lds_rows))
    means = [np.mean([r["lds"] for r in lds_rows if r["method"] == m]) for m in methods]
    lows = [np.nanmin([r["low"] if r["low"] is not None else np.nan for r in lds_rows if r["method"] == m])
            for m in methods]
    highs = [np.nanmax([r["high"] if r["high"] is not None else np.nan for r in lds_rows if r["method"] == m])
             for m in methods]
    y = np.arange(len(methods))
    left.barh(y, means, xerr=[np.subtract(means, lows), np.subtract(highs, means)], color="tab:blue", alpha=0.7)
    left.set_yticks(y, methods)
    left.axvline(0, color="black", lw=0.8)
    left.set_xlabel("LDS (Spearman, retrained subsets)")
    left.set_title("linear datamodeling score")
    for method in dict.fromkeys(r["method"] for r in loo_rows):
        ks = sorted({r["k"] for r in loo_rows if r["method"] == method})
        moves = [np.mean([abs(r["delta"]) for r in loo_rows if r["method"] == method and r["k"] == k]) for k in ks]
        right.plot(ks, moves, marker="o", label=method, ls="--" if method == "random" else "-")
    right.set_xscale("log")
    right.set_xlabel("k training examples removed (top-k of each method)")
    right.set_ylabel("mean |Δ logit of predicted class| after retraining")
    right.set_title("leave-top-k-out")
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


STUDY = Study(
    name="spotlights",
    summary="Beyond the paper: the dual form's spotlights against retraining (LDS, leave-k-out) and dattri",
    default_config=SpotlightsConfig,
    run=run,
    default_threads=1,
    headline=("test_accuracy", "lds_contribution_sum", "lds_attention_sum", "lds_tracin", "lds_trak",
              "lds_influence", "lds_random", "loo_move_attention_sum_k40"),
    memory=run_memory,
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("train_examples=200", "hidden=8", "epochs=1", "n_queries=4", "subsets=4", "retrain_seeds=1",
          "loo_queries=1", "loo_k=40", "methods="),
)
