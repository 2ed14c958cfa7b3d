"""Figures of the multi-layer study that it alone draws: cosines with the references over training, per-layer
losses against GD / GD++ steps, the read-off step sizes and curvature factors, and the condition number per step."""

from __future__ import annotations

from icl_gd.core.plotting import plt, sns
from icl_gd.regression.figures import rows_frame


def reference_cosines_figure(curves) -> "plt.Figure":
    """The trained model's sensitivity cosine against each reference over training (``cos_sensitivity_vs_*`` rows):
    a deep model aligns with GD first, then moves on to GD++."""
    df = rows_frame(r for r in curves if r["metric"].startswith("cos_sensitivity"))
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


def condition_figure(rows) -> "plt.Figure":
    """log10 κ(X Xᵀ) of the context inputs (mean over test tasks) after k = 0..K input transforms, one line per
    source (rows {seed, source, transforms, log10_mean}; min-max band over seeds)."""
    df = rows_frame(rows)
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    sns.lineplot(data=df, x="transforms", y="log10_mean", hue="source", style="source", markers=True,
                 errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="input transforms applied (layers / steps)", ylabel="mean log10 condition number of X Xᵀ",
           xticks=sorted(df.transforms.unique()))
    ax.legend(fontsize=7)
    return fig
