"""Figures of the dual-form study: per setting (top training images, attention per class and over time) and a
summary over settings (vote accuracy table, verification errors). Written by ``plotting.save_figure``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..plotting import plt, save_figure
from .analysis import Analysis
from .classifier import ClassificationTask
from .training import LAYERS


def setting_figures(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask]) -> None:
    """``top_training_images_<setting>``, ``class_attention_<setting>``, ``attention_over_time_<setting>``."""
    top_training_images(out, setting, analysis, tasks)
    class_attention(out, setting, analysis)
    attention_over_time(out, setting, analysis)


def top_training_images(out: Path, setting: str, analysis: Analysis, tasks: Sequence[ClassificationTask]) -> None:
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
    save_figure(fig, out, f"top_training_images_{setting}")


def class_attention(out: Path, setting: str, analysis: Analysis) -> None:
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
    save_figure(fig, out, f"class_attention_{setting}")


def attention_over_time(out: Path, setting: str, analysis: Analysis) -> None:
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
    save_figure(fig, out, f"attention_over_time_{setting}")


def summary_figures(out: Path, vote_rows: Sequence[dict], verify_rows: Sequence[dict]) -> None:
    """``vote_accuracy`` (a table of ``analysis.vote_table``) and ``verification_errors`` (bars of
    ``analysis.verification_table``, log scale)."""
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(vote_rows) + 0.8))
    ax.axis("off")
    columns = ["setting", "layer", "vote = prediction", "vote = label", "effective keys"]
    cells = [[r["setting"], r["layer"], f"{r['vote_agrees_with_prediction']:.3f}", f"{r['vote_agrees_with_label']:.3f}",
              f"{r['effective_keys']:.0f}"] for r in vote_rows]
    ax.table(cellText=cells, colLabels=columns, loc="center")
    ax.set_title("vote accuracy (class with the most attention), mean over seeds", fontsize=8)
    save_figure(fig, out, "vote_accuracy")

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
    save_figure(fig, out, "verification_errors")
