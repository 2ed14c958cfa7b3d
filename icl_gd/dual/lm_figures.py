"""Figures of the dual-form-lm study, one panel per recorded layer: sorted attention curves, attention over training
steps, and key removal (top-k vs random). Written by ``plotting.save_figure``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from icl_gd.core.plotting import plt, save_figure
from icl_gd.dual.lm_analysis import LayerAnalysis


def lm_figures(out: Path, layers: Sequence[LayerAnalysis], n_steps: int, prefix: str = "") -> None:
    """``{prefix}sorted_attention``, ``{prefix}attention_over_training`` and ``{prefix}key_removal``."""
    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 3), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], layers):
        for i, curve in enumerate(a.scores.curves):
            ax.loglog(a.scores.curve_rank, np.maximum(curve, 1e-30), lw=1, label=f"query {i + 1}")
        ax.set_title(f"{a.name} ({a.scores.n_keys} keys)", fontsize=8)
        ax.set_xlabel("rank of key")
    axes[0, 0].set_ylabel("share of the query's attention")
    axes[0, -1].legend(fontsize=6)
    fig.suptitle("sorted attention scores |k·q + 1| per query", fontsize=9)
    save_figure(fig, out, f"{prefix}sorted_attention")

    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 3), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], layers):
        share = a.scores.attention_by_bin / a.scores.attention_total[:, None]
        bins = share.shape[1]
        centres = (np.arange(bins) + 0.5) * n_steps / bins
        ax.plot(centres, share.mean(0), marker="o", ms=3)
        ax.axhline(1.0 / bins, color="grey", lw=0.8, ls="--")
        ax.set_title(a.name, fontsize=8)
        ax.set_xlabel("training step of the key")
    axes[0, 0].set_ylabel("share of attention (mean over queries)")
    fig.suptitle("attention mass over training time (dashed: uniform)", fontsize=9)
    save_figure(fig, out, f"{prefix}attention_over_training")

    fig, ax = plt.subplots(figsize=(1.6 * len(layers) + 2, 3))
    pos = np.arange(len(layers))
    ax.bar(pos - 0.2, [a.drop_top.mean() for a in layers], 0.4, label="top-k keys by attention")
    ax.bar(pos + 0.2, [a.drop_random.mean() for a in layers], 0.4, label="k random keys")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(pos, [a.name for a in layers])
    ax.set_ylabel("drop of p(predicted word)")
    ax.legend(fontsize=7)
    ax.set_title("removing keys from the dual sum", fontsize=9)
    save_figure(fig, out, f"{prefix}key_removal")
