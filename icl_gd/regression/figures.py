"""Figures that several regression studies draw: curves over training, OOD sweeps, head counts (the roll-out's:
``icl_gd.regression.rollout.figures``).

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


MODEL_NAMES = {"trained": "trained model", "gd": "GD (tuned η)", "gdpp": "GD++ (tuned)", "interpolated":
               "interpolated weights", "zero": "zero predictor"}
METRIC_NAMES = {"pred_diff": "prediction difference ‖ŷ − ŷ_ref‖", "cos_sensitivity": "cosine of sensitivities ∂ŷ/∂x",
                "sensitivity_diff": "sensitivity difference ‖∂ŷ/∂x − ∂ŷ_ref/∂x‖"}
REFERENCE_NAMES = {"gd": "GD", "gdpp": "GD++", "gd_2steps": "2 GD steps",
                   "prop2_own_features": "Prop. 2 on the model's own features"}
# The OOD sweeps of ``icl_gd.regression.ood.default_sweeps``: panel title and x-axis label, in words.
SWEEP_NAMES = {
    "input_scale": ("inputs scaled: x ~ U(−α/2, α/2)", "input scale α (trained at α = 1)"),
    "weight_scale": ("task weights scaled: w ~ α·N(0, I)", "weight scale α (trained at α = 1)"),
    "input_law_exponential": ("inputs from an exponential law", "context norm α (x normalised)"),
    "input_law_normal": ("inputs from a normal law", "context norm α (x normalised)"),
    "input_law_laplace": ("inputs from a Laplace law", "context norm α (x normalised)"),
    "input_law_mixture": ("inputs from a per-task mix of the three laws", "context norm α (x normalised)"),
    "distractors": ("distractor tokens in the context", "distractor tokens (count)"),
}
DASH_CYCLE = (":", (0, (6, 2)), "-.")
EXACT_COLORS = ("#8c564b", "#e377c2")  # closed-form references: hues 6 and 7, clear of the models' (the first)
OVERFLOW = 1e6  # a loss at or above this (or not finite) has overflowed


def model_name(name: str) -> str:
    return MODEL_NAMES.get(name, name)


def with_model_names(df: "pd.DataFrame") -> "pd.DataFrame":
    return df.assign(model=df.model.map(model_name))


def loss_curves_figure(curves, references: dict[str, float] | None = None, log_y: bool = True,
                       gap_to: str | None = None, exact: dict[str, float] | None = None) -> "plt.Figure":
    """Test loss over training, one line per model, mean and min-max band over seeds; references as dotted lines,
    ``exact`` ones (losses in closed form over the task distribution, not sampled) as dashed lines. With ``gap_to``
    (a model in the curves, e.g. ``gd``), a second panel shows every other model's relative gap to it,
    (L − L_ref) / L_ref: the quantity a "matches GD" claim is about, invisible on the loss panel's log axis; the
    exact references' gaps to it are dashed lines there too."""
    from icl_gd.core.plotting import legend_outside

    df = rows_frame(curves)
    df = df[df.metric == "loss"]
    gap = gap_to is not None and gap_to in set(df.model) and df.model.nunique() > 1
    fig, axes = plt.subplots(1, 2 if gap else 1, figsize=(10.5 if gap else 6.0, 3.4), squeeze=False)
    ax = axes.flat[0]
    sns.lineplot(data=with_model_names(df), x="step", y="value", hue="model", style="model", markers=True, dashes=True,
                 markevery=max(1, df.step.nunique() // 12), errorbar=("pi", 100), ax=ax)
    for i, (name, value) in enumerate((references or {}).items()):
        ax.axhline(value, ls=":", lw=1.2, color="#999999" if i == 0 else "#000000", label=name)
    for i, (name, value) in enumerate((exact or {}).items()):
        # behind the curves: a sampled reference within a few % of it stays visible on top
        ax.axhline(value, ls="--", lw=1.0, alpha=0.8, zorder=1, color=EXACT_COLORS[i % len(EXACT_COLORS)], label=name)
    if log_y:
        ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="test loss, ½·mean squared error", title="test loss over training")
    legend_outside(ax, title="model (band: min–max over seeds)" if df.seed.nunique() > 1 else "model")
    if gap:
        ref = df[df.model == gap_to].set_index(["step", "seed"]).value
        rows = df[df.model != gap_to].copy()
        rows["gap"] = (rows.value.to_numpy() - ref.reindex(list(zip(rows.step, rows.seed))).to_numpy()) / \
            ref.reindex(list(zip(rows.step, rows.seed))).to_numpy()
        ax = axes.flat[1]
        sns.lineplot(data=with_model_names(rows), x="step", y="gap", hue="model", style="model", markers=True, dashes=True,
                     markevery=max(1, rows.step.nunique() // 12), errorbar=("pi", 100), ax=ax)
        ax.axhline(0.0, color="black", lw=0.8)
        reference = ref.groupby(level="step").mean().iloc[-1]  # at the last step (a reference's: at every step)
        for i, (name, value) in enumerate((exact or {}).items()):
            ax.axhline((value - reference) / reference, ls="--", lw=1.2, color=EXACT_COLORS[i % len(EXACT_COLORS)],
                       label=name)
        ax.set_yscale("symlog", linthresh=0.01)  # linear within ±1 %, log beyond: the early gap and the last
        ax.set(xlabel="training step", ylabel=f"relative gap (L − L_{REFERENCE_NAMES.get(gap_to, gap_to)}) / "
                                              f"L_{REFERENCE_NAMES.get(gap_to, gap_to)}",
               title=f"gap to {model_name(gap_to)} (0: equal loss)")
        legend_outside(ax, title="model")
    fig.tight_layout()
    return fig


def alignment_curves_figure(curves, reference: str = "gd",
                            controls: dict[str, dict[str, float]] | None = None) -> "plt.Figure":
    """Prediction difference, sensitivity cosine and sensitivity difference against ``reference`` over training.
    ``controls`` (name -> {metric: value}, e.g. GD with η doubled against tuned GD) are drawn as horizontal lines:
    how far a model that is not the reference lies, so that "aligned" can be read against it."""
    from icl_gd.core.plotting import legend_outside

    df = rows_frame(curves)
    ref = REFERENCE_NAMES.get(reference, reference)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    for ax, metric in zip(axes, METRIC_NAMES):
        sub = df[df.metric == f"{metric}_vs_{reference}"]
        sns.lineplot(data=with_model_names(sub), x="step", y="value", hue="model", style="model", markers=True, dashes=True,
                     markevery=max(1, sub.step.nunique() // 12), errorbar=("pi", 100), ax=ax, legend=ax is axes[-1])
        for i, (name, values) in enumerate((controls or {}).items()):
            if metric in values:
                ax.axhline(values[metric], color="#999999" if i == 0 else "#000000", lw=1.0, ls=DASH_CYCLE[i],
                           label=f"control: {name}")
        ax.set(xlabel="training step", ylabel=METRIC_NAMES[metric].replace("ref", ref), title=f"against {ref}")
    axes[1].set_ylim(-0.05, 1.05)
    legend_outside(axes[-1], title="model")
    fig.suptitle(f"alignment with {ref} over training (1 on the cosine, 0 on the differences: the same function)")
    fig.tight_layout()
    return fig


def ood_figure(ood_rows, log_y: bool = True) -> "plt.Figure":
    """One panel per OOD sweep: loss against the shift for every model (mean and band over seeds)."""
    from icl_gd.core.plotting import legend_outside

    df = with_model_names(rows_frame(ood_rows))
    sweeps = list(dict.fromkeys(df.sweep))
    cols = min(3, len(sweeps))
    rows = (len(sweeps) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols + 1.8, 3.2 * rows), squeeze=False)
    for ax, sweep in zip(axes.flat, sweeps):
        # Models that coincide (the point of most sweeps) stay visible through distinct dashes and markers.
        sns.lineplot(data=df[df.sweep == sweep], x="value", y="loss", hue="model", style="model", markers=True,
                     dashes=True, errorbar=("pi", 100), ax=ax, alpha=0.85, legend=ax is axes.flat[0])
        title, xlabel = SWEEP_NAMES.get(sweep, (sweep.replace("_", " "), "shift"))
        ax.set(title=title, xlabel=xlabel, ylabel="test loss, ½·MSE")
        if log_y:
            ax.set_yscale("log")
    legend_outside(axes.flat[0], title="model")
    for ax in list(axes.flat)[len(sweeps):]:
        ax.axis("off")
    fig.suptitle("out-of-distribution test tasks: loss against the shift (curves on top of each other: "
                 "the same loss)")
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
                     label="trained model" if i == 0 else None)
        if cosine:
            axes.flat[1].plot(heads, [m[f"cos_sensitivity_h{h}"] for h in heads], "o-", color="C0")
    for i, (name, value) in enumerate(references.items()):
        loss_ax.axhline(value, ls=(0, (4, 1 + i)), color=f"C{i + 1}", label=name)
    loss_ax.set(xlabel="attention heads (count)", ylabel="final test loss, ½·MSE", xticks=heads,
                title="final test loss (one line per seed)")
    if cosine:
        axes.flat[1].set(xlabel="attention heads (count)", ylabel="cosine of sensitivities with GD", xticks=heads,
                         ylim=(-0.05, 1.05), title="alignment with one GD step")
    handles, labels = loss_ax.get_legend_handles_labels()
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False)
    return fig
