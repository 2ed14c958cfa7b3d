"""Figures that several regression studies draw: curves over training, OOD sweeps, depth sweeps, head counts.

Each takes rows of a study's tables (``curves.csv``, ``ood.csv``, ``depth.csv``) or its per-seed metrics and
returns a figure; ``icl_gd.core.plotting.save_figure`` writes it. A figure that one study alone draws lives in that
study."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icl_gd.core.plotting import plt, sns

if TYPE_CHECKING:
    import pandas as pd


def rows_frame(rows) -> "pd.DataFrame":
    """Rows (dicts with the same keys) as a DataFrame, the form seaborn plots."""
    import pandas as pd  # on first use, with the plotting stack (studies are imported to read their configs)

    return pd.DataFrame(list(rows))


def loss_curves_figure(curves, references: dict[str, float] | None = None, log_y: bool = True) -> "plt.Figure":
    """Test loss over training, one line per model, mean and min-max band over seeds; references as lines."""
    df = rows_frame(curves)
    df = df[df.metric == "loss"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    sns.lineplot(data=df, x="step", y="value", hue="model", style="model", errorbar=("pi", 100), ax=ax)
    for i, (name, value) in enumerate((references or {}).items()):
        ax.axhline(value, ls="--", lw=1, color=f"C{i + 4}", label=name)
    if log_y:
        ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="test loss (0.5·MSE)")
    ax.legend(fontsize=7)
    return fig


def alignment_curves_figure(curves, reference: str = "gd") -> "plt.Figure":
    """Prediction difference, sensitivity cosine and sensitivity difference against ``reference`` over training."""
    df = rows_frame(curves)
    metrics = ("pred_diff", "cos_sensitivity", "sensitivity_diff")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, metric in zip(axes, metrics):
        sub = df[df.metric == f"{metric}_vs_{reference}"]
        sns.lineplot(data=sub, x="step", y="value", hue="model", errorbar=("pi", 100), ax=ax)
        ax.set(xlabel="training step", ylabel=f"{metric} vs {reference}")
    axes[1].set_ylim(-0.05, 1.05)
    return fig


def ood_figure(ood_rows, log_y: bool = True) -> "plt.Figure":
    """One panel per OOD sweep: loss against the shift for every model (mean and band over seeds)."""
    df = rows_frame(ood_rows)
    sweeps = list(dict.fromkeys(df.sweep))
    cols = min(3, len(sweeps))
    rows = (len(sweeps) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, sweep in zip(axes.flat, sweeps):
        # Models that coincide (the point of most sweeps) stay visible through distinct dashes and markers.
        sns.lineplot(data=df[df.sweep == sweep], x="value", y="loss", hue="model", style="model", markers=True,
                     dashes=True, errorbar=("pi", 100), ax=ax, alpha=0.85)
        ax.set(title=sweep, xlabel="shift", ylabel="test loss")
        if log_y:
            ax.set_yscale("log")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(sweeps):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def depth_figure(depth_rows, dampings, trained_depth: int) -> "plt.Figure":
    """Loss against layer applications / steps far past the training depth, one panel per damping."""
    df = rows_frame(depth_rows)
    df = df[df.loss < 1e6]  # overflowed runs are in depth.csv; the figure shows the finite part
    fig, axes = plt.subplots(1, len(dampings), figsize=(4.2 * len(dampings), 3.3), squeeze=False)
    for ax, damping in zip(axes.flat, dampings):
        sns.lineplot(data=df[df.damping == damping], x="applications", y="loss", hue="model", style="model",
                     errorbar=("pi", 100), ax=ax)
        ax.axvline(trained_depth, color="grey", lw=0.8, ls=":")
        ax.set(yscale="log", title=f"damping {damping}", xlabel="layer applications / steps")
    fig.tight_layout()
    return fig


def heads_figure(per_seed, heads, references: dict[str, float], cosine: bool = False) -> "plt.Figure":
    """Final test loss (and, with ``cosine``, the sensitivity cosine vs GD) against the number of heads, per seed,
    with references as horizontal lines; metrics ``loss_trained_h{H}`` and ``cos_sensitivity_h{H}``."""
    heads = list(heads)
    fig, axes = plt.subplots(1, 2 if cosine else 1, figsize=(8 if cosine else 4.2, 3.2), squeeze=False)
    loss_ax = axes.flat[0]
    for i, m in enumerate(per_seed.values()):
        loss_ax.plot(heads, [m[f"loss_trained_h{h}"] for h in heads], "o-", color="C0",
                     label="trained" if i == 0 else None)
        if cosine:
            axes.flat[1].plot(heads, [m[f"cos_sensitivity_h{h}"] for h in heads], "o-", color="C0")
    for i, (name, value) in enumerate(references.items()):
        loss_ax.axhline(value, ls="--", color=f"C{i + 1}", label=name)
    loss_ax.set(xlabel="heads", ylabel="test loss", xticks=heads)
    loss_ax.legend(fontsize=7)
    if cosine:
        axes.flat[1].set(xlabel="heads", ylabel="sensitivity cosine vs GD", xticks=heads, ylim=(-0.05, 1.05))
    fig.tight_layout()
    return fig
