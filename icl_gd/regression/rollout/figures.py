"""The roll-out's figures: a trained layer applied past its training depth beside GD (``depth.csv``), and where
the damped roll-out turns unstable across λ (``rollout_draws.csv``, ``rollout_tasks.csv``)."""

from __future__ import annotations

from icl_gd.core.plotting import plt, sns
from icl_gd.regression.figures import OVERFLOW, with_model_names, model_name, rows_frame
from icl_gd.regression.rollout.depth import divergence_shares


def depth_figure(depth_rows, dampings, trained_depth: int) -> "plt.Figure":
    """Loss against layer applications / steps far past the training depth, one panel per damping. A curve whose
    loss overflows (``OVERFLOW`` or not finite, kept in depth.csv) ends in a marked ✕ at its last finite point."""
    import numpy as np

    from icl_gd.core.plotting import legend_outside, mark_overflow

    df = with_model_names(rows_frame(depth_rows))
    overflowed = ~np.isfinite(df.loss) | (df.loss >= OVERFLOW)
    fig, axes = plt.subplots(1, len(dampings), figsize=(4.2 * len(dampings) + 1.8, 3.3), squeeze=False)
    for ax, damping in zip(axes.flat, dampings):
        here = df[(df.damping == damping) & ~overflowed]
        sns.lineplot(data=here, x="applications", y="loss", hue="model", style="model", markers=True, dashes=True,
                     markevery=max(1, here.applications.nunique() // 10), errorbar=("pi", 100), ax=ax,
                     legend=ax is axes.flat[-1])
        for name in dict.fromkeys(df[df.damping == damping].model):
            bad = df[(df.damping == damping) & (df.model == name) & overflowed]
            if len(bad):
                first = bad.applications.min()
                finite = here[(here.model == name) & (here.applications < first)]
                last = finite.groupby("applications").loss.mean()
                x, y = (last.index[-1], last.iloc[-1]) if len(last) else (first, OVERFLOW)
                mark_overflow(ax, x, y, f"{name}: overflows at {first}")
        ax.axvline(trained_depth, color="#999999", lw=1.0, ls=":", label=f"training depth ({trained_depth})")
        ax.set(yscale="log", title=f"damping λ = {damping}", xlabel="layer applications / GD steps",
               ylabel="test loss, ½·MSE")
    legend_outside(axes.flat[-1], title="model")
    fig.suptitle("a trained layer applied past its training depth, beside GD for as many steps")
    fig.tight_layout()
    return fig


def damping_scan_figure(draw_rows, task_rows) -> "plt.Figure":
    """Where the damped roll-out turns unstable, per damping λ over the independent test draws of
    ``rollout_draws.csv`` (rows {draw, damping, applications, model, loss}): left, the share of draws on which the
    trained layer's and GD's curves diverge (``depth.diverges``) beside the share of draws holding a task beyond GD's
    stability bound 2N/(λη) (``rollout_tasks.csv`` rows {draw, damping, beyond_count}), the bound's prediction for
    GD; right, the loss after the last application, median over the draws with the interquartile range."""
    import numpy as np

    from icl_gd.core.plotting import legend_outside

    shares = divergence_shares(draw_rows)
    dampings = sorted({d for d, _ in shares})
    beyond: dict[float, dict[int, bool]] = {}
    for row in task_rows:
        beyond.setdefault(float(row["damping"]), {})[int(row.get("draw") or 0)] = int(row["beyond_count"]) > 0
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
    for i, model in enumerate(("trained", "gd")):
        label = model_name(model)
        counts = [shares.get((d, model), (0, 0)) for d in dampings]
        left.plot(dampings, [b / t if t else np.nan for b, t in counts], "o-", color=f"C{i}", label=label)
    left.plot(dampings, [np.mean(list(beyond[d].values())) if beyond.get(d) else np.nan for d in dampings], "k--",
              lw=1.0, label="draws with a task beyond 2N/(λη)")
    draws = len({(str(r.get("draw") or 0)) for r in draw_rows})
    seeds = len({(str(r.get("seed") or 0)) for r in draw_rows})
    left.set(xlabel="damping λ", ylabel="share of curves diverging", ylim=(-0.03, 1.03),
             title=f"divergence within the roll-out ({draws} test draws per λ"
                   + (f", {seeds} trained seeds)" if seeds > 1 else ")"))
    df = with_model_names(rows_frame(draw_rows))
    last = df[df.applications == df.applications.max()]
    for i, (name, part) in enumerate(last.groupby("model", sort=False)):
        by_damping = part.replace([np.inf], np.nan).groupby("damping").loss
        q = by_damping.quantile([0.25, 0.5, 0.75]).unstack()
        right.errorbar(q.index, q[0.5], yerr=[q[0.5] - q[0.25], q[0.75] - q[0.5]], fmt="o-", capsize=3,
                       color=f"C{i}", label=name)
    right.set(yscale="log", xlabel="damping λ", ylabel="test loss after the last application",
              title="median over draws (bars: quartiles)")
    legend_outside(right, title="model")
    left.legend(fontsize=8, loc="upper left")
    fig.suptitle("the damped roll-out across λ: where repeated steps turn unstable")
    fig.tight_layout()
    return fig
