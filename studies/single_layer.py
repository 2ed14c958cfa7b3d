"""Study `single-layer`: a trained LSA layer against one tuned GD step (von Oswald et al. 2023, §3).

Trains LSA models on fresh regression tasks and compares them on fixed test tasks with GD whose η was tuned on
held-out tasks: losses, alignment (against GD and two controls: GD with η doubled and halved), the η read off
the trained weights, the interpolation towards the Prop. 1 weights, and OOD sweeps. ``--set layers=K`` compares
K layers with K GD steps (one η if recurrent, per-step η otherwise). A single (or tied) trained layer is also
applied up to ``max_applications`` times with damping λ beside GD with step size λη run as long (``depth.csv``;
``iterate_update=y``, the authors' default, adds only the update's y slots), on the test set and on further
independent test draws of its size (``rollout_draws.csv``; ``rollout_tasks.csv`` names each draw's tasks beyond
GD's stability bound).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from icl_gd.constructions.prop1 import gd_step_weights
from icl_gd.regression.baselines import GDPredictor, LeastSquaresPredictor, ZeroPredictor
from icl_gd.core.config import require_positive_ints, setting
from icl_gd.core.errors import ConfigError, ICLGDNotice
from icl_gd.regression import metric_names as names
from icl_gd.regression.evaluation import Scored, alignment_metrics
from icl_gd.regression.rollout.depth import DepthSweep, PastTrainingDepth, past_training_depth
from icl_gd.regression.gd import gdpp_params_from_weights
from icl_gd.regression.interpolation import gauge_fixed_products, interpolate_models
from icl_gd.regression.population.one_step import PopulationOneStepGD, population_one_step_gd_of_task
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.regression.tuning import tune_gd
from icl_gd.regression.metrics import regression_loss
from icl_gd.core.plotting import legend_outside, plt, sns
from icl_gd.regression.figures import alignment_curves_figure, loss_curves_figure, ood_figure, rows_frame
from icl_gd.regression.rollout.figures import damping_scan_figure, depth_figure
from icl_gd.core.study import RunContext
from icl_gd.regression.study import RegressionConfig, RegressionRun, RegressionTaskConfig, concat_work, relative_gap
from icl_gd.regression.study_spec import regression_study
from icl_gd.regression.tokens import ConcatTokenTask

CONTROLS = {"gd_eta_x2": 2.0, "gd_eta_half": 0.5}  # GD with η off by these factors: what alignment must tell apart
POPULATION_LABEL = "GD, population optimum (closed form)"


@dataclass(frozen=True)
class SingleLayerConfig(RegressionConfig):
    batched_seeds: bool = setting(False, "train all seeds as one batched model (each seed equals its lone run; "
                                         "on a CPU about as fast per seed, see docs/performance.md)")
    n_ood: int = setting(2_000, "tasks per point of each out-of-distribution sweep (ood.csv)")
    interpolation_points: int = setting(11, "mixing weights α in [0, 1] from trained (0) to constructed (1)")
    max_applications: int = setting(50, "one distinct layer: apply the trained layer up to this many times, GD "
                                        "run as long (depth.csv)")
    dampings: tuple[float, ...] = setting((1.0, 0.75, 0.5), "update scalings λ in (0, 1] of the repeated "
                                                            "applications (GD's step λη); the authors show 0.75")
    iterate_update: str = setting("y", "repeated applications add y: only the update's y slots (the authors' "
                                       "y_update); all: the whole update")
    rollout_draws: int = setting(5, "independent test draws of n_test tasks the repeated applications are scored "
                                    "on (rollout_draws.csv): draw 0 is the test set, the others fresh draws")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_ood", "max_applications", "rollout_draws")
        if self.interpolation_points < 2:
            raise ConfigError(f"interpolation_points must be at least 2, got {self.interpolation_points}")
        self.depth_sweep()

    def depth_sweep(self) -> DepthSweep:
        return DepthSweep(self.max_applications, self.dampings, self.iterate_update)


def run(config: SingleLayerConfig, ctx: RunContext) -> dict[str, Any]:
    sweep, population = config.depth_sweep(), population_gd(config.task, config.model.layers)
    run = RegressionRun(config, ctx, ConcatTokenTask(config.task.build()))
    layout, K = run.layout, config.model.layers
    tune = run.tune_batch()
    etas = list(tune_gd(tune.x_context, tune.y_context, tune.x_query, tune.y_query, K,
                        shared=config.model.shared_steps).etas)
    gd = GDPredictor(layout, etas)
    controls = {name: GDPredictor(layout, [factor * e for e in etas]) for name, factor in CONTROLS.items()}
    zero, least_squares = ZeroPredictor(layout), LeastSquaresPredictor(layout)
    architecture = config.model.lsa_config(layout)  # the trained models' and the constructed one's
    constructed = constructed_model(architecture, layout, config.task.n_context, etas).to(run.device)
    run.add_reference("gd", gd)
    for name, control in controls.items():
        run.add_reference(name, control, align=False)
    for name, reference in (("zero", zero), ("constructed", constructed)):  # scored once, never drawn
        run.add_reference(name, reference, align=False, curve=None)
    common = {names.loss("zero"): run.references["zero"].loss,  # what every seed's metrics hold beside its own
              names.loss("least_squares"): regression_loss(least_squares(run.test.tokens.double()),
                                                           run.test.targets.double()),
              **population_gd_metrics(population, run.references["gd"].loss)}

    def evaluate(model: LSAModel, step: int, seed: int) -> list[dict[str, Any]]:
        interpolated = interpolate_models(model, constructed, 0.5)
        return run.eval_rows(step, seed, "trained", model) + run.eval_rows(step, seed, "interpolated", interpolated)

    untrained = {s: LSAModel(architecture, seed=s).to(run.device) for s in run.seeds}
    models = run.train_seeds("trained", lambda seed: copy.deepcopy(untrained[seed]), evaluate,
                             batched=config.batched_seeds)
    alphas = torch.linspace(0, 1, config.interpolation_points).tolist()
    past = PastTrainingDepth()  # nothing past the training depth, unless one distinct layer can be applied again
    if len(models[run.seeds[0]].layers) == 1:
        past = past_training_depth(run, sweep, etas[0], {s: m.layers[0] for s, m in models.items()},
                                   config.rollout_draws)
    common.update(past.common)
    for seed, model in models.items():
        interpolated = interpolate_models(model, constructed, 0.5)
        run.record(seed, {**seed_metrics(run, model, untrained[seed], interpolated, etas), **common})
        losses = [run.score(interpolate_models(model, constructed, alpha)).loss for alpha in alphas]
        run.add_rows("interpolation", [{"alpha": a, "loss": loss} for a, loss in zip(alphas, losses)], seed=seed)
        gap = max(abs(relative_gap(loss, run.references["gd"].loss)) for loss in losses)
        run.record(seed, {"interpolation_max_rel_gap": gap, **past.metrics.get(seed, {})})
        run.add_ood(seed, {"trained": model, "gd": gd, "interpolated": interpolated}, config.n_ood)
    for name, rows in past.tables.items():
        run.add_rows(name, rows)
    return run.finish(lambda mean: figures(run, models[run.seeds[0]], constructed, mean))


def constructed_model(architecture: LSAConfig, layout: Any, n_context: int, etas: list[float]) -> LSAModel:
    """Prop. 1 weights in the trained model's ``architecture``: one layer per distinct η (the first for a tied
    stack), each head doing η/H, on contexts of ``n_context`` pairs."""
    distinct = etas[:1] if architecture.recurrent else etas
    weights = [gd_step_weights(layout.d_x, layout.d_y, n_context, eta, n_heads=architecture.n_heads,
                               dtype=torch.float32) for eta in distinct]
    return LSAModel(architecture).load_weights(weights)


def population_gd(task: RegressionTaskConfig, steps: int) -> PopulationOneStepGD | None:
    """One GD step's population-optimal η* and expected loss E L(η*) over the tasks of ``task``, in closed form
    (``icl_gd.regression.population.one_step``, derived in docs/population-gd.md): the exact value of what tuning η on
    sampled held-out tasks and scoring on sampled test tasks estimates. None, with a notice, where the closed form
    does not cover the run: more than one GD step (``steps``, the layers compared), or a task law it has no form
    for."""
    if steps != 1:
        warnings.warn(f"no population one-step GD reference: the closed form is for one GD step, this run compares "
                      f"{steps}", ICLGDNotice, stacklevel=2)
        return None
    try:
        return population_one_step_gd_of_task(task)
    except ConfigError as exc:
        warnings.warn(f"no population one-step GD reference: {exc}", ICLGDNotice, stacklevel=2)
        return None


def population_gd_metrics(reference: PopulationOneStepGD | None, loss_gd: float) -> dict[str, float]:
    """``loss_gd_population`` = E L(η*), ``eta_gd_population`` = η* and the relative gap of the sampled tuned GD's
    test loss ``loss_gd`` to E L(η*); nothing without a reference (``population_gd``)."""
    if reference is None:
        return {}
    return {names.loss("gd_population"): reference.loss, names.eta("gd_population"): reference.eta,
            names.rel_gap("gd", "gd_population"): relative_gap(loss_gd, reference.loss)}


def seed_metrics(run: RegressionRun, model: LSAModel, untrained: LSAModel, interpolated: LSAModel,
                 etas: list[float]) -> dict[str, Any]:
    layout, N = run.layout, run.config.task.n_context
    gd = run.references["gd"]
    trained = run.score(model)
    eta_trained = [gdpp_params_from_weights(w, layout.d_x, layout.d_y, N)[0] for w in model.weights()]
    out: dict[str, Any] = {
        names.loss("trained"): trained.loss,
        names.loss("gd"): gd.loss,
        "lr_gd": etas[0] if len(set(etas)) == 1 else etas,
        names.loss("interpolated"): run.score(interpolated).loss,
        names.loss("constructed"): run.references["constructed"].loss,
        names.eta("trained"): eta_trained[0] if len(eta_trained) == 1 else eta_trained,
        names.rel_gap("trained", "gd"): relative_gap(trained.loss, gd.loss),
        **alignment_metrics("", trained, gd),
        **alignment_metrics(names.UNTRAINED, run.score(untrained), gd),
    }
    for name in CONTROLS:
        control: Scored = run.references[name]
        out[names.loss(name)] = control.loss
        out.update(alignment_metrics(f"{name}_", control, gd))  # controls against tuned GD
        out.update(alignment_metrics(names.trained_vs(name), trained, control))
    return out


def figures(run: RegressionRun, model: LSAModel, constructed: LSAModel, mean: dict[str, Any]):
    curves = run.tables["curves"]
    population = mean.get(names.loss("gd_population"))  # absent where the closed form does not cover the run
    yield "loss_curves", loss_curves_figure([r for r in curves if r["model"] in ("trained", "gd", "interpolated")],
                                            {"zero predictor": mean["loss_zero"]}, gap_to="gd",
                                            exact=None if population is None else {POPULATION_LABEL: population})
    controls = {f"GD with η × {factor:g}": {m: mean[f"{name}_{m}"] for m in ("pred_diff", "cos_sensitivity",
                                                                          "sensitivity_diff")}
                for name, factor in CONTROLS.items()}
    yield "alignment_curves", alignment_curves_figure([r for r in curves if r["model"] in ("trained", "interpolated")],
                                                      controls=controls)
    yield "ood", ood_figure(run.tables["ood"])
    if run.tables.get("depth"):
        yield "past_training_depth", depth_figure(run.tables["depth"], run.config.dampings, run.config.model.layers)
    if len(run.config.dampings) >= 3 and run.config.rollout_draws >= 2 and run.tables.get("rollout_draws"):
        yield "rollout_damping_scan", damping_scan_figure(run.tables["rollout_draws"], run.tables["rollout_tasks"])
    yield "interpolation", interpolation_figure(run.tables["interpolation"],
                                                {"tuned GD": mean["loss_gd"], "trained": mean["loss_trained"]})
    trained_w, constructed_w = model.weights()[0], constructed.weights()[0]
    QK_t, PV_t = gauge_fixed_products(trained_w, constructed_w, run.layout.d_x)
    QK_c, PV_c = constructed_w.products()
    yield "weights", weight_products_figure({"trained QK (gauge-fixed)": QK_t.sum(0), "constructed QK": QK_c.sum(0),
                                             "trained PV (gauge-fixed)": PV_t.sum(0), "constructed PV": PV_c.sum(0)})


def interpolation_figure(rows, references: dict[str, float]) -> "plt.Figure":
    """Loss of the interpolated model against the mixing weight α (0 = trained, 1 = constructed)."""
    df = rows_frame(rows)
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    sns.lineplot(data=df, x="alpha", y="loss", marker="o", errorbar=("pi", 100), ax=ax,
                 label="interpolated weights")
    for i, (name, value) in enumerate(references.items()):
        ax.axhline(value, ls=(":", "--", "-.")[i % 3], lw=1.2, color=f"C{i + 1}", label=name)
    ax.set(xlabel="mixing weight α (0 = trained, 1 = constructed)", ylabel="test loss, ½·MSE",
           title="loss along the line from trained to constructed weights")
    legend_outside(ax)
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
        ax.set(title=title, xlabel="token coordinate (input)", ylabel="token coordinate (output)")
    fig.suptitle("weight products summed over heads (colour: value; red > 0 > blue)")
    fig.tight_layout()
    return fig


def paper_config() -> SingleLayerConfig:
    """The authors' notebook (constructed_token_setup, one layer): 1000 tasks per OOD point and the trained layer
    iterated with damping 0.75 only; training and test settings are already theirs (5000 steps of 2048 tasks,
    10 000 test tasks, an evaluation every 100 steps, one seed)."""
    return SingleLayerConfig(n_ood=1000, dampings=(0.75,))


STUDY = regression_study(
    name="single-layer",
    summary="a trained LSA layer vs one tuned GD step: loss, alignment, interpolation, OOD (von Oswald et al.)",
    default_config=SingleLayerConfig,
    run=run,
    presets={"paper": paper_config},
    training_work=lambda config: concat_work(  # what ``run`` trains per seed (``untrained``)
        config, lambda layout, seed: LSAModel(config.model.lsa_config(layout), seed=seed)),
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6", "n_ood=32", "max_applications=3",
          "interpolation_points=3"),
)
