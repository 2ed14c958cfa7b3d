"""Figure helpers shared by every study: a headless backend, one style, PNG + PDF written atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # headless: studies run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from icl_gd.core.results import atomic_write_bytes  # noqa: E402

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


def reference_cosines_figure(curves) -> "plt.Figure":
    """The trained model's sensitivity cosine against each reference over training (``cos_sensitivity_vs_*`` rows):
    a deep model aligns with GD first, then moves on to GD++."""
    df = _frame(r for r in curves if r["metric"].startswith("cos_sensitivity"))
    df["reference"] = df.metric.str.replace("cos_sensitivity_vs_", "", regex=False)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    sns.lineplot(data=df, x="step", y="value", hue="reference", errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="training step", ylabel="sensitivity cosine of the trained model", ylim=(0.8, 1.005))
    return fig


def _as_list(value) -> list[float]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def per_layer_loss_figure(per_seed, mean, title: str) -> "plt.Figure":
    """Test loss after each layer of every seed's model, beside K-step GD and GD++ after each step."""
    K = len(mean["loss_gd_per_step"])
    layers = list(range(1, K + 1))
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for i, m in enumerate(per_seed.values()):
        ax.plot(layers, m["loss_trained_per_layer"], "o-", color="C0", alpha=0.6,
                label="trained (per seed)" if i == 0 else None)
    ax.plot(layers, mean["loss_gd_per_step"], "s--", color="C1", label=f"GD ({K} steps, tuned)")
    ax.plot(layers, mean["loss_gdpp_per_step"], "^--", color="C2", label=f"GD++ ({K} steps, tuned)")
    ax.set(yscale="log", xlabel="layer / step", ylabel="test loss", xticks=layers, title=title)
    ax.legend(fontsize=7)
    return fig


def effective_params_figure(per_seed, mean) -> "plt.Figure":
    """The (η_k, γ_k) read off each trained layer (per seed) against tuned GD++'s."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, key, ref in ((axes[0], "trained_eta", "gdpp_eta"), (axes[1], "trained_gamma", "gdpp_gamma")):
        n_distinct = len(_as_list(mean[key]))
        xs = list(range(1, n_distinct + 1))
        for i, m in enumerate(per_seed.values()):
            ax.plot(xs, _as_list(m[key]), "o", color="C0", alpha=0.6,
                    label="trained (read off weights)" if i == 0 else None)
        ax.plot(xs, _as_list(mean[ref])[:n_distinct], "x", ms=10, color="C2", label="GD++ tuned")
        ax.set(xlabel="layer", ylabel=key.split("_")[1], xticks=xs)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def depth_figure(depth_rows, dampings, trained_depth: int) -> "plt.Figure":
    """Loss against layer applications / steps far past the training depth, one panel per damping."""
    df = _frame(depth_rows)
    df = df[df.loss < 1e6]  # overflowed runs are in depth.csv; the figure shows the finite part
    fig, axes = plt.subplots(1, len(dampings), figsize=(4.2 * len(dampings), 3.3), squeeze=False)
    for ax, damping in zip(axes.flat, dampings):
        sns.lineplot(data=df[df.damping == damping], x="applications", y="loss", hue="model", style="model",
                     errorbar=("pi", 100), ax=ax)
        ax.axvline(trained_depth, color="grey", lw=0.8, ls=":")
        ax.set(yscale="log", title=f"damping {damping}", xlabel="layer applications / steps")
    fig.tight_layout()
    return fig


def functions_figure(rows) -> "plt.Figure":
    """Predicted functions against the truth, one panel per test task, its context points marked (rows of one
    seed: task, model, x, y, kind = curve | context)."""
    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks), 3.0), squeeze=False, sharey=True)
    styles = {"truth": dict(color="black", lw=2, ls="-"), "mlp+lsa (trained)": dict(color="C0", lw=1.5),
              "meta-learned mlp + 1 GD step": dict(color="C1", lw=1.5, ls="--"),
              "prop2 on trained kernel": dict(color="C2", lw=1.0, ls=":")}
    for ax, task in zip(axes.flat, tasks):
        for name, style in styles.items():
            points = [(r["x"], r["y"]) for r in rows if r["task"] == task and r["model"] == name]
            if points:
                ax.plot(*zip(*points), label=name, **style)
        context = [(r["x"], r["y"]) for r in rows if r["task"] == task and r["kind"] == "context"]
        ax.scatter(*zip(*context), color="black", marker="o", s=18, zorder=5, label="context")
        ax.set(title=f"test task {task}", xlabel="x")
    axes.flat[0].set_ylabel("y")
    axes.flat[0].legend(fontsize=6)
    fig.tight_layout()
    return fig


def attention_figure(attention: "torch.Tensor", label: str) -> "plt.Figure":
    """Mean attention (token × context token) of a layer, one panel per head; ``attention`` (H, T, N)."""
    H = attention.shape[0]
    fig, axes = plt.subplots(1, H, figsize=(3.6 * H, 3.4), squeeze=False)
    for h, ax in enumerate(axes.flat):
        sns.heatmap(attention[h].cpu().numpy(), ax=ax, cmap="viridis", vmin=0, square=True, cbar=True)
        ax.set(title=f"{label}: head {h + 1}", xlabel="context token s", ylabel="token t")
    fig.tight_layout()
    return fig


def gradient_map_figure(norms: "torch.Tensor", label: str) -> "plt.Figure":
    """‖∂u_k/∂e_j‖_F of a layer's update (output token k × input token j), ``norms`` (T, T)."""
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    sns.heatmap(norms.cpu().numpy(), ax=ax, cmap="magma", square=True, cbar=True)
    ax.set(title=f"first-layer gradient norms ({label})", xlabel="input token j", ylabel="output token k")
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


def condition_figure(rows) -> "plt.Figure":
    """log10 κ(X Xᵀ) of the context inputs (mean over test tasks) after k = 0..K input transforms, one line per
    source (rows {seed, source, transforms, log10_mean}; min-max band over seeds)."""
    df = _frame(rows)
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    sns.lineplot(data=df, x="transforms", y="log10_mean", hue="source", style="source", markers=True,
                 errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="input transforms applied (layers / steps)", ylabel="mean log10 condition number of X Xᵀ",
           xticks=sorted(df.transforms.unique()))
    ax.legend(fontsize=7)
    return fig
