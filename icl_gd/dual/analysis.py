"""What a trained setting's dual form says about its test predictions.

For each recorded layer: the dual form is verified against the trained weights, then test queries are scored
against every stored key (``queries.score_queries``): attention per training class and per (task, epoch), the
vote (the training class with most attention) against the prediction and the label, split as the authors' Table 1
(``table1_split``), the attention per key of each task (each phase of ``continual``), the spread of attention
(effective keys), the effect of removing a task's or an epoch's keys from all three layers at once, and for
``continual`` the authors' counterfactual: each layer restricted to the first phase's keys (``restricted_accuracies``).
The
figure queries are picked as the authors' ``plot_attention.py`` figures are (``figure_query_indices``: for each
trained task, correctly classified and misclassified test queries) and get their per-query "spotlight" views
(``spotlights``): the largest scores of each (task, class) sorted, each (task, class)'s total score, the top-scoring
units (training example at a step), and ours: the attention mass on each of the last training steps and the
training images with most attention summed over their steps.
``vote_table``/``verification_table`` summarise many runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from icl_gd.core.config import check_settings, positive_int, require_non_negative, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.metric_name import in_part
from icl_gd.dual import metric_names as names
from icl_gd.dual.classifier import ClassificationTask
from icl_gd.dual.form import DualForm
from icl_gd.dual.layer import DualLayer, UnitBlock
from icl_gd.dual.removal import UnitSelection
from icl_gd.dual.scan import one_hot, readonly_tensor
from icl_gd.dual.settings import LAYERS, accuracy, TrainedSetting
from icl_gd.dual.verification import DualVerification

VERIFY_QUERIES = 64  # queries on which each layer's dual outputs are compared with its primal outputs
# Their Table 1 (paper/ff_as_attention/print_predictive_power.py): per layer, among correctly classified queries how
# often the vote matches the output (= the target), among misclassified ones how often it matches the (wrong) output
# and how often the target.
TABLE1_SPLITS = ("correct", "misclassified_output", "misclassified_target")


@dataclass(frozen=True)
class AnalysisConfig:
    """The test queries scored against the stored keys."""

    n_queries: int = positive_int(200, "test images per task scored against every stored key")
    n_figure_queries: int = setting(1, "figure queries per trained task and kind (correctly classified, "
                                       "misclassified), as the authors' plot_attention.py picks them; 0: no "
                                       "per-query views or figures", check=require_non_negative)
    top_k: int = positive_int(6, "keys kept per query, and training images drawn per query")
    spotlight_keys: int = positive_int(500, "figure: the largest scores drawn per (task, training class), sorted")
    recent_steps: int = positive_int(500, "figure: the last training steps whose attention mass is drawn")
    removals: bool = setting(True, "measure how predictions move when a task's or an epoch's keys are removed")

    def __post_init__(self) -> None:
        check_settings(self)


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
class FigureQuery:
    """Who a figure query is: its position among the scored queries, its task, label and the model's prediction
    (both on the output layer's classes)."""

    index: int
    task: int
    label: int
    prediction: int

    @property
    def correct(self) -> bool:
        return self.label == self.prediction

    @property
    def kind(self) -> str:
        return "correct" if self.correct else "misclassified"


@dataclass(frozen=True)
class Spotlight:
    """One layer's attention |a_u| for each of ``nf`` figure queries, T tasks, C classes on the output layer; a
    unit u is one training example at one optimizer step (their "per update" scores)."""

    sorted_scores: np.ndarray  # (nf, T, C, n) the n largest |a_u| of each (task, class), descending; NaN-padded
    recent_steps: np.ndarray  # (S,) the last S optimizer steps
    step_mass: np.ndarray  # (nf, S, T) Σ |a_u| over each step's units of each task, / the query's Σ |a_u|
    top_examples: np.ndarray  # (nf, k) example ids with most attention (summed over their steps)
    # Their total_score_per_class: Σ |a_u| over every unit of each (task, class), and how many units it has.
    class_totals: np.ndarray | None = None  # (nf, T, C)
    class_units: np.ndarray | None = None  # (T, C)
    # Their closest_training_<i>: the k units with the largest |a_u| (an example may recur at other steps).
    top_unit_example: np.ndarray | None = None  # (nf, k)
    top_unit_step: np.ndarray | None = None  # (nf, k)
    top_unit_score: np.ndarray | None = None  # (nf, k) descending


@dataclass(frozen=True)
class Analysis:
    """What one trained run's dual form says; lists hold one entry per layer (``LAYERS`` order)."""

    metrics: dict[str, float]
    verification: list[DualVerification]
    class_attention: list[np.ndarray]  # (nq, C) per layer, normalised per query
    query_prediction: np.ndarray  # (nq,)
    query_label: np.ndarray  # (nq,) on the output layer
    votes: list[np.ndarray]  # (nq,) per layer: the training class with most attention
    epoch_attention: list[np.ndarray]  # (T, E): attention share per task and epoch, mean over queries
    figure_queries: np.ndarray  # (nf, D) images
    spotlights: list[Spotlight]  # per layer, for the figure queries
    removal_rows: list[dict]  # per removed key set: changed predictions, accuracy per task before and after
    figure_query_info: tuple[FigureQuery, ...] = ()  # (nf,) who each figure query is

    @property
    def figure_top_examples(self) -> list[np.ndarray]:
        """(nf, k) example ids with most attention, per layer."""
        return [s.top_examples for s in self.spotlights]


def analyse(config: AnalysisConfig, trained: TrainedSetting, tasks: Sequence[ClassificationTask]) -> Analysis:
    """Score ``config.n_queries`` test images per trained task against ``trained``'s store; ``tasks`` are all
    the run's tasks (they define the example-id space).

    numpy's BLAS (the float64 verification) gets as many threads as torch (``--threads``): by default OpenBLAS
    takes every core, and on a busy machine its threads wait on each other, up to 15x slower per product. The
    numbers then follow ``--threads`` rather than the machine's core count: OpenBLAS sums a product's terms in
    the same order for any thread count, except for skinny products (the 10-output layer's rebuild), whose last
    bits differ between 1 and 2 threads (about 1e-13 relative; no reported error changes at that level)."""
    with threadpool_limits(torch.get_num_threads(), user_api="blas"):
        return _analyse(config, trained, tasks)


def _analyse(config: AnalysisConfig, trained: TrainedSetting, tasks: Sequence[ClassificationTask]) -> Analysis:
    queries = Queries.first(trained.tasks, config.n_queries)
    device = next(trained.model.parameters()).device
    xq = torch.as_tensor(queries.x, dtype=torch.float64, device=device)
    form = DualForm(trained.store, trained.model, dict(zip(LAYERS, trained.model.layers)))
    batch = form.inputs(xq)
    inputs = [batch.query(name) for name in LAYERS]
    pred = batch.logits.argmax(1).cpu().numpy()
    n_classes = trained.model.output.out_features
    figure = figure_query_indices(pred, queries.y, queries.task, config.n_figure_queries)
    # The figure queries' spotlights and the authors' vote score ride on the same pass over the units (the same
    # float32 blocks) as the class totals.
    spot = {name: SpotlightScores(q[figure], module.bias is not None, trained.n_steps)
            for name, q, module in zip(LAYERS, inputs, trained.model.layers)}
    theirs = {name: TheirScoreTotals(q, n_classes) for name, q in zip(LAYERS, inputs)}
    reading = form.read(batch, {name: [spot[name], theirs[name]] for name in LAYERS}, VERIFY_QUERIES,
                        k=config.top_k, n_classes=n_classes, n_tasks=len(tasks), n_epochs=trained.n_epochs)
    verification = [reading.verification[name] for name in LAYERS]
    metrics = {in_part(name, names.VERIFY_MAX_REL_ERROR): v.max_rel_error for name, v in zip(LAYERS, verification)}
    metrics[names.VERIFY_MAX_REL_ERROR] = max(v.max_rel_error for v in verification)
    class_attention, epoch_attention, votes = [], [], []
    shape = {"n_tasks": len(tasks), "n_classes": n_classes, "n_examples": sum(t.n_train for t in tasks)}
    spots = []
    for name in LAYERS:
        s = reading.scores[name]
        if len(figure):
            spots.append(spot[name].spotlight(config, **shape))
        votes.append(vote(s.attention_by_class))
        metrics.update(table1_metrics(name, votes[-1], pred, queries.y, queries.task,
                                      [t.index for t in trained.tasks]))
        metrics.update(table1_metrics(name, vote(theirs[name].by_class()), pred, queries.y,
                                      queries.task, [t.index for t in trained.tasks], score="table1_their_score"))
        units = spot[name].units_per_task(len(tasks))
        if len(trained.tasks) > 1:
            metrics.update({f"{name}.{k}": v for k, v in attention_per_key(
                s.attention_by_task, s.attention_total, units, [t.index for t in trained.tasks]).items()})
        agree_pred, agree_label = vote_agreement(s.attention_by_class, pred, queries.y)
        metrics[in_part(name, names.VOTE_AGREES_WITH_PREDICTION)] = agree_pred
        metrics[in_part(name, names.VOTE_AGREES_WITH_LABEL)] = agree_label
        metrics[f"{name}.effective_keys"] = float(np.mean(s.effective_keys))
        metrics[f"{name}.n_keys"] = float(units.sum())
        metrics[f"{name}.attention_share_task1"] = float(np.mean(s.attention_by_task[:, 1] / s.attention_total))
        class_attention.append(s.attention_by_class / s.attention_total[:, None])
        epoch_attention.append(np.mean(s.attention_by_task_epoch / s.attention_total[:, None, None], axis=0))
    for key in (names.VOTE_AGREES_WITH_PREDICTION, names.VOTE_AGREES_WITH_LABEL):
        metrics[key] = float(np.mean([metrics[in_part(name, key)] for name in LAYERS]))
    correct = pred == queries.y
    metrics["table1.n_correct"], metrics["table1.n_misclassified"] = float(correct.sum()), float((~correct).sum())
    if trained.setting == "continual":
        metrics.update(restricted_accuracies(trained, form, trained.phase_starts[1], "restrict_phase1"))
    removal_rows = removals(trained, form, xq, pred, queries) if config.removals else []
    metrics.update({f"removal.{row['removed']}.changed_fraction": row["changed_fraction"] for row in removal_rows})
    info = tuple(FigureQuery(int(i), int(queries.task[i]), int(queries.y[i]), int(pred[i])) for i in figure)
    return Analysis(metrics, verification, class_attention, pred, queries.y, votes, epoch_attention,
                    queries.x[figure], spots, removal_rows, info)


def vote(attention_by_class: np.ndarray) -> np.ndarray:
    """The class each query attends to most, ``(nq,)``."""
    return np.argmax(attention_by_class, axis=1)


def vote_agreement(attention_by_class: np.ndarray, predictions: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Fractions of queries whose vote equals the model's prediction, and the true label."""
    votes = vote(attention_by_class)
    return float(np.mean(votes == np.asarray(predictions))), float(np.mean(votes == np.asarray(labels)))


def figure_query_indices(predictions: np.ndarray, labels: np.ndarray, task: np.ndarray, per_kind: int) -> np.ndarray:
    """The figure queries as the authors' ``plot_attention.py`` figures pick them: their task draws, for each test
    set, ``analyze_n_samples`` correctly classified and as many misclassified queries (at random; here the first in
    test order, so a rerun draws the same), and the paper's figures show one (e.g. a misclassified MNIST query of
    the sequential setting). For each task in order of appearance: up to ``per_kind`` correct, then up to
    ``per_kind`` misclassified queries; indices into the ``(nq,)`` arrays, ``(nf,)``."""
    correct = np.asarray(predictions) == np.asarray(labels)
    chosen = []
    for t in dict.fromkeys(np.asarray(task).tolist()):  # tasks in order of appearance
        in_task = np.asarray(task) == t
        for kind in (correct, ~correct):
            chosen.extend(np.flatnonzero(in_task & kind)[:per_kind].tolist())
    return np.asarray(chosen, dtype=np.int64)


class SpotlightScores:
    """Collects the figure queries' scores |a_u| = |k_u·q| (+1 for the augmented bias key) block by block, from
    float32 blocks (``DualLayer.blocks(dtype="float32")``): a ``Scorer`` that rides on ``score_queries``'s pass over
    the units instead of reading them once more. Holds (units, nf) scores: a handful of queries."""

    def __init__(self, queries: np.ndarray, has_bias: bool, n_steps: int) -> None:
        self.n_steps = n_steps  # of the layer's recorded training
        self.q = torch.as_tensor(np.asarray(queries), dtype=torch.float32)  # (nf, in)
        self.offset = 1.0 if has_bias else 0.0
        self.parts: dict[str, list[np.ndarray]] = {"score": [], "task": [], "label": [], "step": [], "example": []}

    def add(self, block: UnitBlock, attention: torch.Tensor | None = None,
            contribution: torch.Tensor | None = None) -> None:
        self.parts["score"].append((readonly_tensor(block.key) @ self.q.T).add_(self.offset).abs_().numpy())
        for field in ("task", "label", "step", "example"):
            self.parts[field].append(np.asarray(getattr(block, field), dtype=np.int64))

    def units_per_task(self, n_tasks: int) -> np.ndarray:
        """How many units (keys) of each task were scored, ``(n_tasks,)``."""
        return np.bincount(np.concatenate(self.parts["task"]), minlength=n_tasks)

    def spotlight(self, config: AnalysisConfig, n_tasks: int, n_classes: int, n_examples: int) -> Spotlight:
        return _spotlight(self.n_steps, *(np.concatenate(self.parts[f]) for f in ("score", "task", "label", "step",
                                                                                  "example")),
                          config=config, n_tasks=n_tasks, n_classes=n_classes, n_examples=n_examples)


def spotlights(layer: DualLayer, queries: np.ndarray, config: AnalysisConfig, n_tasks: int, n_classes: int,
               n_examples: int) -> Spotlight:
    """The authors' per-query views of one layer for ``queries (nf, in)``: scores |a_u| = |k_u·q| (+1 for the
    augmented bias key) of every unit, then sorted per (task, class), summed per recent step and per example.
    Holds (units, nf) scores in float32: meant for a handful of queries."""
    scores = SpotlightScores(queries, layer.has_bias, layer.n_steps)
    for block in layer.blocks(dtype="float32"):
        scores.add(block)
    return scores.spotlight(config, n_tasks, n_classes, n_examples)


def _spotlight(n_steps: int, score: np.ndarray, task: np.ndarray, label: np.ndarray, step: np.ndarray,
               example: np.ndarray, config: AnalysisConfig, n_tasks: int, n_classes: int,
               n_examples: int) -> Spotlight:
    """``spotlights`` from every unit's scores ``(units, nf)`` and provenance ``(units,)``."""
    nf, n = score.shape[1], config.spotlight_keys
    sorted_scores = np.full((nf, n_tasks, n_classes, n), np.nan)
    for t in range(n_tasks):
        for c in range(n_classes):
            group = score[(task == t) & (label == c)]  # (g, nf)
            top = -np.sort(-group, axis=0)[:n].T  # (nf, min(g, n)) descending
            sorted_scores[:, t, c, :top.shape[1]] = top
    total = score.sum(0, dtype=np.float64)  # (nf,)
    first = max(n_steps - config.recent_steps, 0)
    recent = step >= first
    cell = (step[recent] - first) * n_tasks + task[recent]
    n_recent = n_steps - first
    step_mass = np.stack([np.bincount(cell, weights=score[recent, i], minlength=n_recent * n_tasks)
                          for i in range(nf)]).reshape(nf, n_recent, n_tasks) / total[:, None, None]
    by_example = np.stack([np.bincount(example, weights=score[:, i], minlength=n_examples) for i in range(nf)])
    top_examples = np.argsort(-by_example, axis=1, kind="stable")[:, :config.top_k]
    group = task * n_classes + label
    class_totals = np.stack([np.bincount(group, weights=score[:, i], minlength=n_tasks * n_classes)
                             for i in range(nf)]).reshape(nf, n_tasks, n_classes)
    class_units = np.bincount(group, minlength=n_tasks * n_classes).reshape(n_tasks, n_classes)
    k = min(config.top_k, len(score))
    top = np.argsort(-score, axis=0, kind="stable")[:k].T  # (nf, k) units by decreasing score, ties by row
    return Spotlight(sorted_scores, np.arange(first, n_steps), step_mass, top_examples, class_totals,
                     class_units, example[top], step[top], np.take_along_axis(score.T, top, 1))


def removals(trained: TrainedSetting, form: DualForm, xq: torch.Tensor, pred: np.ndarray,
             queries: Queries) -> list[dict]:
    """Subtract a set of keys (a task's, the first or last epoch's) from all three layers; how do predictions
    move? One row per set: the fraction of changed predictions and each task's accuracy before and after."""
    used = trained.tasks
    selections = [(f"task{t.index}", UnitSelection(tasks=(t.index,))) for t in used] if len(used) > 1 else []
    selections += [("first_epoch", UnitSelection(epochs=(0,))),
                   ("last_epoch", UnitSelection(epochs=(trained.n_epochs - 1,)))]
    rows = []
    for label, selection in selections:
        with form.removed(dict.fromkeys(LAYERS, selection)), torch.no_grad():
            after = trained.model(xq).argmax(1).cpu().numpy()
        row = {"setting": trained.setting, "removed": label, "changed_fraction": float(np.mean(after != pred))}
        for t in used:
            mask = queries.task == t.index
            row[f"task{t.index}_accuracy_before"] = float(np.mean(pred[mask] == queries.y[mask]))
            row[f"task{t.index}_accuracy_after"] = float(np.mean(after[mask] == queries.y[mask]))
        rows.append(row)
    return rows


def table1_split(votes: np.ndarray, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Their Table 1 for one layer (``TABLE1_SPLITS``): the share of correctly classified queries whose vote matches
    the output, of misclassified ones whose vote matches the (wrong) output, and of misclassified ones whose vote
    matches the target; all ``(nq,)``. NaN where a split has no query (their script divides by the same empty
    column)."""
    correct = predictions == labels

    def share(hit: np.ndarray, among: np.ndarray) -> float:
        return float(np.mean(hit[among])) if among.any() else float("nan")

    return {"correct": share(votes == predictions, correct),
            "misclassified_output": share(votes == predictions, ~correct),
            "misclassified_target": share(votes == labels, ~correct)}


def table1_metrics(layer: str, votes: np.ndarray, predictions: np.ndarray, labels: np.ndarray, task: np.ndarray,
                   task_ids: Sequence[int], score: str = "table1") -> dict[str, float]:
    """Their Table 1 for one layer's ``votes (nq,)`` as metrics ``metric_names.table1(layer, split, score)``, and,
    when the queries come from several tasks, per task as ``<that>.task<t>`` (theirs is one task's queries: a joint
    model's vote over both tasks' keys can differ between the tasks' queries)."""
    out = {names.table1(layer, key, score): value for key, value in table1_split(votes, predictions, labels).items()}
    if len(task_ids) > 1:
        for t in task_ids:
            mine = task == t
            split = table1_split(votes[mine], predictions[mine], labels[mine])
            out.update({f"{names.table1(layer, key, score)}.task{t}": value for key, value in split.items()})
    return out


class TheirScoreTotals:
    """Σ_u |k_u·q| per training class for queries ``(nq, in)``: the authors' vote score (their ``get_all_scores``
    scores |x·q|, with no +1 for the bias's augmented key, which ours adds), a ``Scorer`` fed block by block on
    ``score_queries``'s pass, from the pass's own k·q (the same queries): what the +1 changes in Table 1."""

    def __init__(self, queries: np.ndarray, n_classes: int) -> None:
        self.q = torch.as_tensor(np.asarray(queries), dtype=torch.float32)  # (nq, in)
        self.n_classes = n_classes
        self.totals = torch.zeros(self.q.shape[0], n_classes, dtype=torch.float64)

    def add(self, block: UnitBlock, attention: torch.Tensor | None = None,
            contribution: torch.Tensor | None = None, dot: torch.Tensor | None = None) -> None:
        """``dot (nq, b)``: the pass's k·q for these same queries (not computed again), else computed here."""
        if dot is not None and dot.shape[0] != self.q.shape[0]:
            raise ConfigError(f"the pass scores {dot.shape[0]} queries, these totals are for {self.q.shape[0]}")
        scores = (self.q @ readonly_tensor(block.key).T).abs_() if dot is None else dot.abs()  # (nq, b)
        onehot = one_hot(block.label, self.n_classes, "classes", torch.float32)  # (b, C)
        self.totals += (scores @ onehot).to(torch.float64)  # block sums in float32, totals in float64

    def by_class(self) -> np.ndarray:
        """(nq, C) the totals so far."""
        return self.totals.numpy()


def attention_per_key(attention_by_task: np.ndarray, attention_total: np.ndarray, units: np.ndarray,
                      task_ids: Sequence[int]) -> dict[str, float]:
    """Ours: attention per key of each task (each phase of ``continual``) relative to uniform attention, mean over
    queries: (Σ_{u∈t} |a_u| / n_t) / (Σ_u |a_u| / n), 1 when a task's keys get their share by count. From
    ``attention_by_task (nq, T)``, ``attention_total (nq,)`` and the units of each task ``(T,)``."""
    n = units.sum()
    return {f"attention_per_key_task{t}": float(np.mean(attention_by_task[:, t] / units[t]
                                                        / (attention_total / n)))
            for t in task_ids if units[t] > 0}


def restricted_accuracies(trained: TrainedSetting, form: DualForm, stop: int, prefix: str) -> dict[str, float]:
    """The counterfactual of the authors' continual setting: one layer's attention restricted to the keys of steps
    before ``stop`` (the units of later steps subtracted, ``DualForm.restricted``), the other layers as trained; then
    all three at once (``all``). Each trained task's test accuracy (whole test set), as
    ``{prefix}.{layer or all}.task<i>_accuracy``. ``stop`` = the number of steps keeps every key (the trained model);
    0 keeps none (the initial weights, times weight decay's shrinkage)."""
    out = {}
    for name, chosen in [*((n, [n]) for n in LAYERS), ("all", LAYERS)]:
        with form.restricted(chosen, stop):
            out.update({names.restricted_accuracy(name, t.index, prefix): accuracy(trained.model, t)
                        for t in trained.tasks})
    return out
