"""Study `plateaus` (beyond the papers): merged against separate key and query weights trained from small
initialisation, beside the closed-form plateau levels of in-context principal-component regression (Zhang, Singh,
Latham & Saxe, ICML 2025).

Per seed, both layers of ``icl_gd.regression.theory.heads`` (H merged heads; H rank-one heads with separate key and
query) are trained by full-batch gradient descent on the same fixed training tasks of the law of Zhang et al.'s
repository (eigenvalues ∝ 1..d with trace 1 in a random basis), and the exact expected loss R(Γ) of their weights
is read every ``eval_every`` steps; the plateaus of each curve are found by ``rule`` from the curve alone, then each
is read as the closed-form level L_m = ½ [tr Λ - Σ_{k≤m} λ_k² γ_k] nearest to it (``plateaus.plateau_levels``):

- ``metrics.json``: per layer, the plateaus read as some L_m and those read as none, the worst relative error of a
  read plateau against its L_m, whether the read levels increase, whether they are L_0, ..., L_d one each (the
  separate layer's prediction), whether they are L_0 and L_d only (one drop: the merged layer's prediction), the
  final R(Γ) and the sampled loss on fresh test tasks; R(Γ*) = L_d;
- ``curves.csv`` (R(Γ) per step), ``plateaus.csv`` (every plateau found), ``levels.csv`` (L_0..L_d);
- ``figures/plateaus.png``: both layers' curves, every seed, with the levels drawn.

The default is the law the project's theory page uses (d = 5, N = 20); ``full`` is the authors' figure (d = 4,
N = 31, 8 merged heads, 5 rank-one heads, 80 000 training tasks: their ``plot_loss.ipynb`` and README command).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icl_gd.core.config import check_settings, positive_int, require_non_negative, setting
from icl_gd.core.plotting import plt, series_style
from icl_gd.core.progress import tick
from icl_gd.core.study import RunContext, Study, StudyRun
from icl_gd.regression import metric_names as names
from icl_gd.regression.theory.heads import (HeadsRun, PlateauConfig, every_level, increasing, single_drop,
                                            train_heads)

LAYERS = ("merged", "separate")


@dataclass(frozen=True)
class PlateausConfig(PlateauConfig):
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ... (each: initial weights, training and test tasks)",
                        check=require_non_negative)
    seeds: int = positive_int(2, "seeds")

    def __post_init__(self) -> None:
        check_settings(self)
        super().__post_init__()


def layer_metrics(layer: str, run: HeadsRun, d: int) -> dict[str, float]:
    """One layer's readings of its plateaus (``metric_names``' plateau builders), its final R(Γ) and test loss."""
    read = [p for p in run.plateaus if p.m is not None]
    return {names.plateau_count(layer): float(len(read)),
            names.plateau_unread(layer): float(len(run.plateaus) - len(read)),
            names.plateau_worst_error(layer): max((abs(p.relative_error) for p in read), default=float("nan")),
            names.plateaus_increasing(layer): float(increasing(run.plateaus)),
            names.plateaus_every_level(layer): float(every_level(run.plateaus, d)),
            names.plateaus_single_drop(layer): float(single_drop(run.plateaus, d)),
            names.final_risk(layer): run.curve.loss[-1],
            names.loss(layer): run.test_loss}


def run(config: PlateausConfig, ctx: RunContext) -> dict[str, Any]:
    run = StudyRun(ctx, range(config.seed, config.seed + config.seeds))
    levels = config.levels().tolist()
    run.add_rows("levels", [{"m": m, "level": level} for m, level in enumerate(levels)])
    results: dict[tuple[str, int], HeadsRun] = {}
    for seed in run.seeds:
        metrics: dict[str, float] = {"risk_zero": levels[0], "risk_gamma_star": levels[-1]}
        for layer in LAYERS:
            trained = results[layer, seed] = train_heads(config, layer, seed, ctx.device)
            tick(f"{layer} heads trained")
            metrics.update(layer_metrics(layer, trained, config.d))
            run.add_rows("curves", [{"step": step, "seed": seed, "model": layer, "metric": "risk", "value": value}
                                    for step, value in zip(trained.curve.steps, trained.curve.loss)])
            run.add_rows("plateaus", [{"start": p.start, "end": p.end, "level": p.level, "m": p.m,
                                       "nearest": p.nearest, "closed": p.closed, "relative_error": p.relative_error}
                                      for p in trained.plateaus], seed=seed, model=layer)
        run.record(seed, metrics)
    return run.finish(lambda mean: [("plateaus", plateaus_figure(results, levels))])


def plateaus_figure(results: dict[tuple[str, int], HeadsRun], levels: list[float]) -> Any:
    """One panel per layer: R(Γ) against the training step for every seed (a log step axis, so that the short early
    plateaus show; Zhang et al.'s Fig. 3 is linear), the first seed's plateaus shaded, the levels L_0..L_d dotted."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    first = min(seed for _, seed in results)
    for ax, layer in zip(axes, LAYERS):
        for m, level in enumerate(levels):
            ax.axhline(level, color="0.6", linestyle=":", linewidth=1)
            ax.annotate(f"$L_{m}$", (1.0, level), xycoords=("axes fraction", "data"), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=8, color="0.35")
        own = [(seed, trained) for (name, seed), trained in results.items() if name == layer]
        for k, (seed, trained) in enumerate(own):
            steps, loss = zip(*[(s, v) for s, v in zip(trained.curve.steps, trained.curve.loss) if s > 0])
            read = sum(p.m is not None for p in trained.plateaus)
            ax.plot(steps, loss, color=series_style(k)["color"], linewidth=1, label=f"seed {seed}: {read} at some L_m")
            if seed == first:
                for p in trained.plateaus:
                    ax.fill_between([max(p.start, steps[0]), p.end], 0.97 * p.level, 1.03 * p.level,
                                    color=series_style(k)["color"], alpha=0.25, linewidth=0)
        ax.set(xscale="log", xlabel="gradient step", ylim=(0, 1.08 * levels[0]),
               title=f"{layer} key and query (shaded: seed {first}'s plateaus)")
        outside = layer == LAYERS[-1]
        ax.legend(fontsize=7, title="plateaus found", title_fontsize=7, frameon=False,
                  loc="upper left" if outside else "lower left", bbox_to_anchor=(1.06, 1.0) if outside else (0, 0))
    axes[0].set_ylabel("expected loss R(Γ) = E ½(ŷ - y)²")
    fig.tight_layout()
    return fig


def full_config() -> PlateausConfig:
    """Zhang et al.'s figure: d = 4, N = 31 (sequences of 32 tokens), 8 merged heads, 5 rank-one heads, 80 000
    training tasks (their ``--trainset_size`` of the rank-one run), ten seeds."""
    return PlateausConfig(d=4, n_context=31, merged_heads=8, separate_heads=5, train_tasks=80_000, steps=10_000,
                          seeds=10)


STUDY = Study(
    name="plateaus",
    summary="merged vs separate key and query weights from small initialisation: one drop against a plateau per "
            "principal component, beside the closed-form levels (beyond the papers)",
    default_config=PlateausConfig,
    run=run,
    default_threads=1,
    presets={"full": full_config},
    headline=tuple(key for layer in LAYERS for key in (names.plateau_count(layer), names.final_risk(layer)))
    + (names.plateau_worst_error("separate"), "risk_gamma_star"),
    tiny=("steps=40", "eval_every=10", "train_tasks=256", "n_test=64", "seeds=1"),
)
