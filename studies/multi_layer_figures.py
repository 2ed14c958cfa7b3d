"""Figures of the multi-layer study that it alone draws: cosines with the references over training, per-layer
losses against GD / GD++ steps, the read-off step sizes and curvature factors, and the condition number per step."""

from __future__ import annotations

from icl_gd.core.plotting import legend_outside, plt, sns
from icl_gd.regression.figures import REFERENCE_NAMES, rows_frame


def reference_cosines_figure(curves) -> "plt.Figure":
    """The trained model's sensitivity cosine against each reference over training (``cos_sensitivity_vs_*`` rows):
    a deep model aligns with GD first, then moves on to GD++."""
    df = rows_frame(r for r in curves if r["metric"].startswith("cos_sensitivity"))
    df["reference"] = df.metric.str.replace("cos_sensitivity_vs_", "", regex=False).map(
        lambda r: REFERENCE_NAMES.get(r, r))
    fig, ax = plt.subplots(figsize=(5.8, 3.4))
    sns.lineplot(data=df, x="step", y="value", hue="reference", style="reference", markers=True, dashes=True,
                 markevery=max(1, df.step.nunique() // 12), errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="training step", ylabel="cosine of sensitivities ∂ŷ/∂x", ylim=(0.8, 1.005),
           title="the trained model's alignment with each reference")
    legend_outside(ax, title="against")
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
    ax.set(yscale="log", xlabel="after layer k / GD step k", ylabel="test loss, ½·MSE", xticks=layers,
           title=f"loss after each layer ({title})")
    legend_outside(ax)
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
        ax.set(xlabel="layer k", ylabel={"trained_eta": "step size η_k", "trained_gamma": "curvature factor γ_k"}[key],
               xticks=xs)
    legend_outside(axes[-1])
    fig.suptitle("GD++ parameters read off the trained layers, beside tuned GD++")
    fig.tight_layout()
    return fig


def condition_figure(rows) -> "plt.Figure":
    """log10 κ(X Xᵀ) of the context inputs (mean over test tasks) after k = 0..K input transforms, one line per
    source (rows {seed, source, transforms, log10_mean}; min-max band over seeds)."""
    df = rows_frame(rows)
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    sns.lineplot(data=df, x="transforms", y="log10_mean", hue="source", style="source", markers=True,
                 errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="input transforms applied (layers / steps)", ylabel="mean log₁₀ condition number κ(X Xᵀ)",
           xticks=sorted(df.transforms.unique()), title="conditioning of the context inputs")
    legend_outside(ax, title="transform")
    return fig
