"""Figures of the sequence study: loss per position of every model and referee, the probes' R² per layer and
position, and the order sensitivity at the last position."""

from __future__ import annotations

from typing import Any

from icl_gd.regression.sequence.probes import TARGETS

PROBED = {"next_token": "next token s_{t+1}", "preconditioned": "preconditioned input (G_t + λI)⁻¹ s_t"}
LABELS = {"ridge": "ridge λ = 0.001 (mesa, closed form)", "least_squares": "least squares",
          "bayes": "ridge λ = σ²/Var(W_ij) (Bayes for Gaussian W)", "gd": "1 GD step from learned W0 (tuned)",
          "gd_k": "K GD steps (tuned)", "online_gd": "online GD (tuned)",
          "zero": "zero predictor", "mesa": "mesa layer (trained)", "softmax": "softmax Transformer (trained)"}


def position_figure(rows: list[dict[str, Any]]):
    import pandas as pd

    from icl_gd.core.plotting import legend_outside, plt

    table = pd.DataFrame(rows).groupby(["model", "kind", "position"], sort=False)["loss"].mean()
    fig, ax = plt.subplots(figsize=(8.2, 4.2))
    counts = {"trained": 0, "referee": 0}
    for (model, kind), part in table.groupby(level=[0, 1], sort=False):
        values = part.droplevel([0, 1])
        trained = kind == "trained"
        k = counts["trained" if trained else "referee"]
        counts["trained" if trained else "referee"] += 1
        # trained models solid in tab10's colours, referees dashed in Dark2's: no two curves share colour and style
        color = plt.cm.tab10(k % 10) if trained else plt.cm.Dark2(k % 8)
        label = LABELS.get(model, f"{model} (trained)" if trained else model)
        style = "-" if trained else "--"
        if label == "zero predictor":  # the ceiling, apart from every learner
            color, style = "black", ":"
        ax.plot(values.index, values.values, style, color=color, lw=1.5, label=label)
    ax.set(xlabel="position t (tokens seen)", ylabel="next-token loss ½‖ŝ(t+1) - s(t+1)‖²", yscale="log",
           title="loss per position: trained models (solid) against the referees (dashed)")
    legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig


def order_figure(rows: list[dict[str, Any]]):
    """Each model's and referee's order sensitivity at the last position (mean over seeds), on a log scale: a batch
    fit's is round-off."""
    import pandas as pd

    from icl_gd.core.plotting import plt

    table = pd.DataFrame(rows).groupby(["model", "kind"], sort=False)["order_sensitivity"].mean()
    fig, ax = plt.subplots(figsize=(7.2, 3.4))
    colors = ["C0" if kind == "trained" else "C7" for _, kind in table.index]
    ax.bar(range(len(table)), table.clip(lower=1e-17).values, color=colors)
    ax.set_xticks(range(len(table)), [LABELS.get(m, m) if k == "referee" else m for m, k in table.index],
                  rotation=30, ha="right", fontsize=7)
    ax.set(yscale="log", ylabel="mean |ŝ(pairs permuted) - ŝ| / mean |ŝ|",
           title="order sensitivity at the last position (trained blue, referees grey)")
    fig.tight_layout()
    return fig


def probe_figure(rows: list[dict[str, Any]]):
    """R² of the probes against position, one line per layer of the deepest stack, one panel per target."""
    import pandas as pd

    from icl_gd.core.plotting import plt

    table = pd.DataFrame(rows)
    deepest = max(table["model"].unique(), key=lambda m: table.loc[table["model"] == m, "layer"].max())
    table = table[table["model"] == deepest].groupby(["target", "layer", "position"])["r2"].mean()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6), sharey=True)
    for ax, target in zip(axes, TARGETS):
        for layer, part in table.loc[target].groupby(level=0):
            values = part.droplevel(0)
            ax.plot(values.index, values.values, "-", color=f"C{layer}", label=f"layer {layer}")
        ax.set(xlabel="position t", title=f"{deepest}: probe of the {PROBED[target]}")
    axes[0].set(ylabel="R² on test sequences", ylim=(-0.05, 1.02))
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
