"""Figure helpers shared by every study: a headless backend, one style, PNG + PDF written atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # headless: studies run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from .results import atomic_write_bytes  # noqa: E402

if TYPE_CHECKING:
    import torch

sns.set_theme(context="paper", style="whitegrid")


def save_figure(fig: "plt.Figure", out: Path, name: str) -> list[Path]:
    """Write ``out/figures/name.png`` and ``.pdf`` atomically, close ``fig``, return the paths."""
    paths = []
    for fmt in ("png", "pdf"):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
        path = Path(out) / "figures" / f"{name}.{fmt}"
        atomic_write_bytes(path, buffer.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


# ------------------------------------------------------------------------------------------ regression figures
def _frame(rows):
    import pandas as pd

    return pd.DataFrame(list(rows))


def loss_curves_figure(curves, references: dict[str, float] | None = None, log_y: bool = True) -> "plt.Figure":
    """Test loss over training, one line per model, mean and min-max band over seeds; references as lines."""
    df = _frame(curves)
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
    df = _frame(curves)
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
    df = _frame(ood_rows)
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


def interpolation_figure(rows, references: dict[str, float]) -> "plt.Figure":
    """Loss of the interpolated model against the mixing weight α (0 = trained, 1 = constructed)."""
    df = _frame(rows)
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    sns.lineplot(data=df, x="alpha", y="loss", marker="o", errorbar=("pi", 100), ax=ax, label="interpolated")
    for i, (name, value) in enumerate(references.items()):
        ax.axhline(value, ls="--", lw=1, color=f"C{i + 1}", label=name)
    ax.set(xlabel="mixing weight α (0 = trained, 1 = constructed)", ylabel="test loss")
    ax.legend(fontsize=7)
    return fig


def weight_products_figure(panels: dict[str, "torch.Tensor"]) -> "plt.Figure":
    """Heat-maps of (D, D) matrices side by side (e.g. trained and constructed QK and PV), shared colour scale
    per column pair."""
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.0), squeeze=False)
    for ax, (title, matrix) in zip(axes.flat, panels.items()):
        m = matrix.detach().cpu().double().numpy()
        bound = max(abs(m).max(), 1e-12)
        sns.heatmap(m, ax=ax, cmap="RdBu_r", vmin=-bound, vmax=bound, square=True, cbar=True,
                    xticklabels=False, yticklabels=False)
        ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig
