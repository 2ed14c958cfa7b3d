"""What a trained setting's dual form says about its test predictions.

For each recorded layer: the dual form is verified against the trained weights, then test queries are scored
against every stored key (``queries.score_queries``): attention per training class and per (task, epoch), the
vote (the training class with most attention) against the prediction and the label, the spread of attention
(effective keys), the training images with most attention, and the effect of removing a task's or an epoch's
keys from all three layers at once. ``vote_table``/``verification_table`` summarise many runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..config import require_positive_ints, setting
from .classifier import ClassificationTask
from .queries import UnitSelection, keys_removed, layer_queries, removal_delta, score_queries, vote_agreement
from .settings import TrainedSetting
from .storage import open_memory
from .training import LAYERS
from .units import DualLayer, dual_layer
from .verification import DualVerification, verify_layer

VERIFY_QUERIES = 64  # queries on which each layer's dual outputs are compared with its primal outputs
VOTE_COLUMNS = ("vote_agrees_with_prediction", "vote_agrees_with_label", "effective_keys")
VERIFY_COLUMNS = ("weight_max_abs_error", "weight_max_rel_error", "output_max_abs_error", "output_max_rel_error")
HEADLINE = ("test_accuracy", "vote_agrees_with_prediction", "vote_agrees_with_label")


@dataclass(frozen=True)
class AnalysisConfig:
    """The test queries scored against the stored keys."""

    n_queries: int = setting(200, "test images per task scored against every stored key")
    n_figure_queries: int = setting(4, "queries whose top training images are drawn")
    top_k: int = setting(6, "keys kept per query, and training images drawn per query")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_queries", "n_figure_queries", "top_k")


@dataclass(frozen=True)
class Queries:
    """The first ``n`` test images of each task: ``x (nq, D)``, labels on the shared head ``y (nq,)``, ``task (nq,)``."""

    x: np.ndarray
    y: np.ndarray
    task: np.ndarray

    @classmethod
    def first(cls, tasks: Sequence[ClassificationTask], n: int) -> Queries:
        return cls(np.concatenate([t.data.test_x[:n] for t in tasks]),
                   np.concatenate([t.data.test_y[:n] + t.label_offset for t in tasks]),
                   np.concatenate([np.full(min(n, len(t.data.test_y)), t.index) for t in tasks]))


@dataclass(frozen=True)
class Analysis:
    """What one trained run's dual form says; lists hold one entry per layer (``LAYERS`` order)."""

    metrics: dict[str, float]
    verification: list[DualVerification]
    class_attention: list[np.ndarray]  # (nq, C) per layer, normalised per query
    query_prediction: np.ndarray  # (nq,)
    epoch_attention: list[np.ndarray]  # (T, E): attention share per task and epoch, mean over queries
    figure_queries: np.ndarray  # (nf, D) images
    figure_top_examples: list[np.ndarray]  # (nf, k) example ids with most attention, per layer
    removal_rows: list[dict]  # per removed key set: changed predictions, accuracy per task before and after


def analyse(config: AnalysisConfig, trained: TrainedSetting, tasks: Sequence[ClassificationTask]) -> Analysis:
    """Score ``config.n_queries`` test images per trained task against ``trained``'s memory; ``tasks`` are all
    the run's tasks (they define the example-id space)."""
    memory = open_memory(trained.memory)
    layers = [dual_layer(memory[name]) for name in LAYERS]
    queries = Queries.first(trained.tasks, config.n_queries)
    device = next(trained.model.parameters()).device
    xq = torch.as_tensor(queries.x, dtype=torch.float64, device=device)
    logits, inputs, readouts = layer_queries(trained.model, trained.model.layers, xq)
    inputs, readouts = [q.cpu().numpy() for q in inputs], [r.cpu().numpy() for r in readouts]
    pred = logits.argmax(1).cpu().numpy()
    verification = [verify_layer(layer, q[:VERIFY_QUERIES]) for layer, q in zip(layers, inputs)]
    metrics = {f"{name}.verify_max_rel_error": v.max_rel_error for name, v in zip(LAYERS, verification)}
    metrics["verify_max_rel_error"] = max(v.max_rel_error for v in verification)
    scoring = {"n_classes": sum(t.n_classes for t in trained.tasks), "n_tasks": len(tasks),
               "n_epochs": trained.n_epochs}
    class_attention, epoch_attention = [], []
    for name, layer, q, r in zip(LAYERS, layers, inputs, readouts):
        s = score_queries(layer, q, r, k=config.top_k, **scoring)
        agree_pred, agree_label = vote_agreement(s.attention_by_class, pred, queries.y)
        metrics[f"{name}.vote_agrees_with_prediction"] = agree_pred
        metrics[f"{name}.vote_agrees_with_label"] = agree_label
        metrics[f"{name}.effective_keys"] = float(np.mean(s.effective_keys))
        metrics[f"{name}.n_keys"] = float(layer.memory.table("rows").rows)
        metrics[f"{name}.attention_share_task1"] = float(np.mean(s.attention_by_task[:, 1] / s.attention_total))
        class_attention.append(s.attention_by_class / s.attention_total[:, None])
        epoch_attention.append(np.mean(s.attention_by_task_epoch / s.attention_total[:, None, None], axis=0))
    for key in ("vote_agrees_with_prediction", "vote_agrees_with_label"):
        metrics[key] = float(np.mean([metrics[f"{name}.{key}"] for name in LAYERS]))
    figure = np.linspace(0, len(queries.x) - 1, min(config.n_figure_queries, len(queries.x))).astype(int)
    n_examples = sum(t.n_train for t in tasks)
    figure_top = [top_examples(layer, q[figure], r[figure], config.top_k, n_examples, scoring)
                  for layer, q, r in zip(layers, inputs, readouts)]
    removal_rows = removals(trained, layers, xq, pred, queries)
    metrics.update({f"removal.{row['removed']}.changed_fraction": row["changed_fraction"] for row in removal_rows})
    return Analysis(metrics, verification, class_attention, pred, epoch_attention, queries.x[figure], figure_top,
                    removal_rows)


def top_examples(layer: DualLayer, queries: np.ndarray, readouts: np.ndarray, k: int, n_examples: int,
                 scoring: Mapping[str, int]) -> np.ndarray:
    """``(nq, k)`` ids of the training examples with most attention (summed over their steps) per query."""
    s = score_queries(layer, queries, readouts, k=1, n_examples=n_examples, **scoring)
    return np.argsort(-s.attention_by_example, axis=1)[:, :k]


def removals(trained: TrainedSetting, layers: Sequence[DualLayer], xq: torch.Tensor, pred: np.ndarray,
             queries: Queries) -> list[dict]:
    """Subtract a set of keys (a task's, the first or last epoch's) from all three layers; how do predictions
    move? One row per set: the fraction of changed predictions and each task's accuracy before and after."""
    used = trained.tasks
    selections = [(f"task{t.index}", UnitSelection(tasks=(t.index,))) for t in used] if len(used) > 1 else []
    selections += [("first_epoch", UnitSelection(epochs=(0,))),
                   ("last_epoch", UnitSelection(epochs=(trained.n_epochs - 1,)))]
    rows = []
    for label, selection in selections:
        deltas = [(module, *removal_delta(layer, selection)) for module, layer in zip(trained.model.layers, layers)]
        with keys_removed(deltas), torch.no_grad():
            after = trained.model(xq).argmax(1).cpu().numpy()
        row = {"setting": trained.setting, "removed": label, "changed_fraction": float(np.mean(after != pred))}
        for t in used:
            mask = queries.task == t.index
            row[f"task{t.index}_accuracy_before"] = float(np.mean(pred[mask] == queries.y[mask]))
            row[f"task{t.index}_accuracy_after"] = float(np.mean(after[mask] == queries.y[mask]))
        rows.append(row)
    return rows


def headline(metrics: Mapping[str, float], settings: Sequence[str]) -> dict[str, float]:
    """The headline metrics of one seed from its ``<setting>.<metric>`` metrics: the first setting's accuracy and
    votes, and the largest verification error of any setting."""
    out = {key: metrics[f"{settings[0]}.{key}"] for key in HEADLINE}
    out["verify_max_rel_error"] = max(metrics[f"{s}.verify_max_rel_error"] for s in settings)
    return out


def vote_table(analyses: Mapping[str, Sequence[Analysis]]) -> list[dict]:
    """Per setting and layer: vote agreement and effective keys, mean over the runs (seeds) of that setting."""
    return [{"setting": setting, "layer": name,
             **{key: float(np.mean([a.metrics[f"{name}.{key}"] for a in runs])) for key in VOTE_COLUMNS}}
            for setting, runs in analyses.items() for name in LAYERS]


def verification_table(analyses: Mapping[str, Sequence[Analysis]]) -> list[dict]:
    """Per setting and layer: the dual form's weight and output errors, max over the runs of that setting."""
    return [{"setting": setting, "layer": name,
             **{key: float(np.max([getattr(a.verification[i], key) for a in runs])) for key in VERIFY_COLUMNS}}
            for setting, runs in analyses.items() for i, name in enumerate(LAYERS)]
