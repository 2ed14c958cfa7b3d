"""Figures of the dual-form study: per setting, the authors' per-query views as their ``plot_attention.py`` draws
them (``query_attention``: for each figure query and layer, the top-3 training units, the sorted scores of each
training class, and each class's total score; ``sorted_scores``: the sorted scores of every figure query side by
side), and ours (top training images summed over steps, attention per class and over time, attention mass over the
last training steps); a summary over settings (vote accuracy table, verification errors). Written by
``plotting.save_figure``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from icl_gd.core.plotting import plt, save_figure
from icl_gd.dual.analysis import Analysis, FigureQuery, Spotlight
from icl_gd.dual.classifier import ClassificationTask
from icl_gd.dual.settings import LAYERS


def setting_figures(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask], label: str = "") -> None:
    """``query_attention_<setting>_task<t>_<correct|misclassified>_<j>`` (one per figure query),
    ``sorted_scores_<setting>``, ``top_training_images_<setting>``, ``class_attention_<setting>``,
    ``attention_over_time_<setting>``, ``recent_attention_<setting>``."""
    class_attention(out, setting, analysis, label)
    attention_over_time(out, setting, analysis, label)
    if len(analysis.figure_queries) and analysis.spotlights:  # n_figure_queries=0: no per-query figures
        query_attention(out, setting, analysis, tasks, label)
        top_training_images(out, setting, analysis, tasks, label)
        sorted_scores(out, setting, analysis, tasks, label)
        recent_attention(out, setting, analysis, tasks, label)


def class_name(c: int, tasks: Sequence[ClassificationTask]) -> str:
    """Class ``c`` of the output layer as a reader knows it: the number on a head the tasks share, else the
    class within its task and the task's dataset."""
    if len({t.label_offset for t in tasks}) == 1:
        return str(c)
    owner = [t for t in tasks if t.label_offset <= c < t.label_offset + t.n_classes]
    return f"{c - owner[0].label_offset} ({owner[0].data.name})" if owner else str(c)


def describe_query(query: FigureQuery, tasks: Sequence[ClassificationTask]) -> str:
    return (f"{tasks[query.task].data.name} test query ({query.kind}): target {class_name(query.label, tasks)}, "
            f"output {class_name(query.prediction, tasks)}")


def draw_sorted_scores(ax, spot: Spotlight, i: int, tasks: Sequence[ClassificationTask], legend: bool,
                       labels: bool = True) -> None:
    """Their ``magic_class_plot`` for figure query ``i``: along x, each task's training classes in turn, each
    class's largest scores |a_u| sorted in decreasing order (one line per task, a gap between classes, a grey
    line where a class ends); ticks name the class within its task (``labels``; every layer and query has the
    same x layout, so a column of panels needs them once: ticks are most of a figure's drawing time)."""
    _, n_tasks, n_classes, n = spot.sorted_scores.shape
    x0, ticks, names, ends = 0, [], [], []
    for t in range(n_tasks):
        xs, ys = [], []
        for c in range(n_classes):
            scores = spot.sorted_scores[i, t, c]
            scores = scores[np.isfinite(scores)]
            if not len(scores):
                continue
            xs += [*range(x0, x0 + len(scores)), np.nan]  # NaN breaks the line between classes
            ys += [*scores, np.nan]
            ticks.append(x0 + (len(scores) - 1) / 2)
            names.append(str(c - tasks[t].label_offset))
            ends.append(x0 + len(scores))
            x0 += len(scores) + 1
        if xs:
            ax.plot(xs, ys, marker="o", ms=1, lw=0.8, label=tasks[t].data.name)
    ax.grid(False, axis="x")  # the grey class boundaries below are the only vertical lines
    for end in ends[:-1]:
        ax.axvline(end, color="gray", lw=0.6, alpha=0.3, zorder=0)
    ax.set_xticks(ticks if labels else [], names if labels else [], fontsize=5)  # ticks cost most of the drawing
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    if legend and n_tasks > 1:
        ax.legend(fontsize=5)


def draw_class_totals(ax, spot: Spotlight, i: int, tasks: Sequence[ClassificationTask], legend: bool,
                      labels: bool = True) -> None:
    """Their ``total_score_per_class`` for figure query ``i``: Σ |a_u| over every unit of each (task, class), one
    bar per class that has units, one colour per task; ``labels``: name the classes under the bars."""
    x0, ticks, names = 0, [], []
    for t in range(spot.class_totals.shape[1]):
        classes = np.flatnonzero(spot.class_units[t] > 0)
        if not len(classes):
            continue
        pos = np.arange(x0, x0 + len(classes))
        ax.bar(pos, spot.class_totals[i, t, classes], label=tasks[t].data.name)
        ticks += pos.tolist()
        names += [str(c - tasks[t].label_offset) for c in classes]
        x0 += len(classes)
    ax.set_xticks(ticks if labels else [], names if labels else [], fontsize=5)
    ax.grid(False, axis="x")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    if legend and spot.class_totals.shape[1] > 1:
        ax.legend(fontsize=5)


def query_attention(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask], label: str = "") -> None:
    """The authors' per-query figure (``paper/ff_as_attention/plot_attention.py``), one file per figure query: one
    row per layer with the query, its three top-scoring training units (an example at a step: their
    ``closest_training_<i>``), the sorted scores of each training class (``draw_sorted_scores``) and each class's
    total score (``draw_class_totals``)."""
    if not analysis.figure_query_info:  # a result saved before the figure queries were recorded
        return
    shape = tasks[0].data.image_shape
    train_x = np.concatenate([t.data.train_x for t in tasks])  # indexed by example id
    seen: dict[tuple[int, str], int] = {}
    for i, query in enumerate(analysis.figure_query_info):
        j = seen[query.task, query.kind] = seen.get((query.task, query.kind), -1) + 1
        fig = plt.figure(figsize=(13, 1.7 * len(LAYERS) + 0.4))
        grid = fig.add_gridspec(len(LAYERS), 3, width_ratios=[4, 4.5, 3], wspace=0.2, hspace=0.45)
        for row, (name, spot) in enumerate(zip(LAYERS, analysis.spotlights)):
            # The query and its top-3 units side by side in one image (one axes, not four: axes cost most of
            # the drawing time), separated by blank columns.
            images = [analysis.figure_queries[i].reshape(shape)]
            images += [train_x[e].reshape(shape) for e in spot.top_unit_example[i, :3]]
            gap = np.full((shape[0], max(1, shape[1] // 4)), np.nan)
            montage = np.concatenate([part for image in images for part in (image, gap)][:-1], axis=1)
            ax = fig.add_subplot(grid[row, 0])
            ax.imshow(montage, cmap="gray_r")
            ax.set_xticks([(k + 0.5) * (shape[1] + gap.shape[1]) - gap.shape[1] / 2 - 0.5 for k in range(len(images))],
                          ["query", *(f"top {k + 1}: step {s}" for k, s in enumerate(spot.top_unit_step[i, :3]))],
                          fontsize=5)
            ax.set_yticks([])
            ax.grid(False)
            ax.set_ylabel(name, fontsize=8)
            last = row == len(LAYERS) - 1
            draw_sorted_scores(fig.add_subplot(grid[row, 1]), spot, i, tasks, legend=row == 0, labels=last)
            draw_class_totals(fig.add_subplot(grid[row, 2]), spot, i, tasks, legend=row == 0, labels=last)
            if row == 0:
                fig.axes[-2].set_title(f"largest {spot.sorted_scores.shape[-1]} scores |k·q + 1| of each training "
                                       f"class, sorted", fontsize=7)
                fig.axes[-1].set_title("total score of each training class", fontsize=7)
        fig.suptitle(f"{setting}: {describe_query(query, tasks)}", fontsize=8)
        save_figure(fig, out, f"query_attention_{setting}_task{query.task}_{query.kind}_{j}", label)


def sorted_scores(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask], label: str = "") -> None:
    """The authors' sorted-score plot of every figure query side by side: one row per figure query, one column per
    layer (``draw_sorted_scores``)."""
    nf = len(analysis.figure_queries)
    if not nf:
        return
    fig, axes = plt.subplots(nf, len(LAYERS), figsize=(4.2 * len(LAYERS), 2.2 * nf), squeeze=False)
    info = analysis.figure_query_info
    for j, (name, spot) in enumerate(zip(LAYERS, analysis.spotlights)):
        for i in range(nf):
            draw_sorted_scores(axes[i, j], spot, i, tasks, legend=i == 0 and j == 0, labels=i == nf - 1)
            if i == 0:
                axes[i, j].set_title(name, fontsize=8)
            if j == 0 and info:
                axes[i, j].set_ylabel(describe_query(info[i], tasks).replace(": ", ":\n"), fontsize=5)
    axes[-1, 0].set_xlabel("training class (per task), then its keys by decreasing score", fontsize=7)
    n = analysis.spotlights[0].sorted_scores.shape[-1]
    fig.suptitle(f"{setting}: the {n} largest attention scores |k·q + 1| of each training class, per query", fontsize=8)
    save_figure(fig, out, f"sorted_scores_{setting}", label)


def recent_attention(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask], label: str = "") -> None:
    """Per layer: the share of attention on each of the last training steps' keys, split by task, mean over the
    figure queries."""
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3), sharey=True)
    for ax, name, spot in zip(axes, LAYERS, analysis.spotlights):
        mass = spot.step_mass.mean(0)  # (S, T)
        for t in range(mass.shape[1]):
            if mass[:, t].sum() > 0:  # steps without the task's keys (continual) are gaps, not zeros
                ax.plot(spot.recent_steps, np.where(mass[:, t] > 0, mass[:, t], np.nan), lw=0.8,
                        label=tasks[t].data.name)
        ax.set_title(name)
        ax.set_xlabel("training step")
    axes[0].set_ylabel("share of attention")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"{setting}: attention mass on each of the last {len(analysis.spotlights[0].recent_steps)} "
                 f"training steps, mean over {len(analysis.figure_queries)} queries", fontsize=8)
    save_figure(fig, out, f"recent_attention_{setting}", label)


def top_training_images(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask], label: str = "") -> None:
    """One row per (figure query, layer): the query, then the training images it attends to most."""
    shape = tasks[0].data.image_shape
    train_x = np.concatenate([t.data.train_x for t in tasks])  # indexed by example id
    nf, k = analysis.figure_top_examples[0].shape
    fig, axes = plt.subplots(nf * len(LAYERS), k + 1, figsize=(1.1 * (k + 1), 1.15 * nf * len(LAYERS)))
    axes = np.atleast_2d(axes)
    for i in range(nf):
        for j, name in enumerate(LAYERS):
            row = axes[i * len(LAYERS) + j]
            row[0].imshow(analysis.figure_queries[i].reshape(shape), cmap="gray_r")
            row[0].set_ylabel(name, fontsize=7)
            for c, example in enumerate(analysis.figure_top_examples[j][i]):
                row[c + 1].imshow(train_x[example].reshape(shape), cmap="gray_r")
            for ax in row:
                ax.set_xticks([])
                ax.set_yticks([])
    axes[0, 0].set_title("query", fontsize=7)
    for c in range(k):
        axes[0, c + 1].set_title(f"top {c + 1}", fontsize=7)
    fig.suptitle(f"{setting}: training images with most attention, per layer", fontsize=8)
    save_figure(fig, out, f"top_training_images_{setting}", label)


def class_attention(out: Path, setting: str, analysis: Analysis, label: str = "") -> None:
    """Per layer: the share of attention on each training class, averaged over queries of one predicted class."""
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3), sharey=True)
    for ax, name, share in zip(axes, LAYERS, analysis.class_attention):
        for c in np.unique(analysis.query_prediction):
            mask = analysis.query_prediction == c
            ax.plot(np.arange(share.shape[1]), share[mask].mean(0), marker=".", lw=1, label=f"pred {c}")
        ax.set_title(name)
        ax.set_xlabel("training class")
    axes[0].set_ylabel("share of attention")
    axes[-1].legend(fontsize=5, ncol=2)
    fig.suptitle(f"{setting}: attention per training class, by the query's predicted class", fontsize=8)
    save_figure(fig, out, f"class_attention_{setting}", label)


def attention_over_time(out: Path, setting: str, analysis: Analysis, label: str = "") -> None:
    """Per layer: the share of attention on each epoch's keys, one line per task."""
    fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3), sharey=True)
    for ax, name, mass in zip(axes, LAYERS, analysis.epoch_attention):
        for t in range(mass.shape[0]):
            if mass[t].sum() > 0:
                ax.plot(np.arange(mass.shape[1]), mass[t], marker="o", label=f"task {t}")
        ax.set_title(name)
        ax.set_xlabel("epoch")
    axes[0].set_ylabel("share of attention")
    axes[-1].legend(fontsize=7)
    fig.suptitle(f"{setting}: attention mass over training time, split by task", fontsize=8)
    save_figure(fig, out, f"attention_over_time_{setting}", label)


def summary_figures(out: Path, vote_rows: Sequence[dict], verify_rows: Sequence[dict], label: str = "") -> None:
    """``vote_accuracy`` (a table of ``analysis.vote_table``) and ``verification_errors`` (bars of
    ``analysis.verification_table``, log scale)."""
    fig, ax = plt.subplots(figsize=(11, 0.35 * len(vote_rows) + 0.9))
    ax.axis("off")
    columns = ["setting", "layer", "vote = prediction", "vote = label", "correct: vote = label",
               "misclassified: vote = label", "misclassified: vote = prediction", "effective keys"]

    def pm(r: dict, key: str) -> str:
        if not np.isfinite(r[key]):
            return "no query"
        return f"{r[key]:.3f} ± {r[key + '_std']:.3f}" if np.isfinite(r[key + "_std"]) else f"{r[key]:.3f}"

    cells = [[r["setting"], r["layer"], f"{r['vote_agrees_with_prediction']:.3f}", f"{r['vote_agrees_with_label']:.3f}",
              pm(r, "vote_agrees_with_label_correct"), pm(r, "vote_agrees_with_label_misclassified"),
              pm(r, "vote_agrees_with_prediction_misclassified"), f"{r['effective_keys']:.0f}"] for r in vote_rows]
    table = ax.table(cellText=cells, colLabels=columns, loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(6)
    runs = sorted({r["n_runs"] for r in vote_rows})
    ax.set_title(f"vote (class with the most attention): mean over seeds, split columns mean ± std over "
                 f"{'/'.join(map(str, runs))} seeds", fontsize=8)
    save_figure(fig, out, "vote_accuracy", label)

    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [f"{r['setting']}\n{r['layer']}" for r in verify_rows]
    pos = np.arange(len(verify_rows))
    floor = 1e-18  # exact zeros cannot sit on a log axis
    ax.bar(pos - 0.2, [max(r["weight_max_rel_error"], floor) for r in verify_rows], 0.4, label="weights")
    ax.bar(pos + 0.2, [max(r["output_max_rel_error"], floor) for r in verify_rows], 0.4, label="dual outputs")
    ax.set_yscale("log")
    ax.set_xticks(pos, labels, fontsize=6)
    ax.set_ylabel("max relative error")
    ax.legend(fontsize=7)
    ax.set_title("dual form vs trained network (float64 rebuild), max over seeds", fontsize=8)
    save_figure(fig, out, "verification_errors", label)
