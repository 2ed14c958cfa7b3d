"""Study `multi-layer`: K-layer LSA models against K steps of GD and of GD++ (von Oswald et al. 2023, §4).

Trains K-layer LSA models (``--set layers=K``, tied with ``--set recurrent=true``), all seeds as one batched model,
with the authors' settings for the depth, and compares them on fixed test tasks with GD and GD++ tuned on held-out
tasks (one (η, γ) for a tied stack, per-step (η_k, γ_k) otherwise): per-layer losses, alignment with both over
training, the (η_k, γ_k) read off each trained layer, OOD sweeps, and (tied stacks) the trained layer applied far
past its training depth, with damping, against GD and GD++ run as long.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from constructions.gdpp import gdpp_model
from icl_gd.baselines import GDPPPredictor, GDPredictor, ZeroPredictor
from icl_gd.config import require_positive_ints, setting
from icl_gd.errors import ConfigError
from icl_gd.evaluation import Scored, alignment_metrics
from icl_gd.gd import GDPPParams, gdpp_params_from_weights, tune_gd, tune_gdpp
from icl_gd.lsa import LSAModel
from icl_gd.metrics import regression_loss
from icl_gd.plotting import (alignment_curves_figure, depth_figure, effective_params_figure, loss_curves_figure,
                             ood_figure, per_layer_loss_figure, reference_cosines_figure)
from icl_gd.results import write_json
from icl_gd.study import (EvaluationConfig, LSAStackConfig, RegressionConfig, RegressionRun, RunContext, Study,
                          parts, relative_gap)
from icl_gd.tokens import ConcatTokenTask


@dataclass(frozen=True)
class MultiLayerConfig(RegressionConfig):
    model: LSAStackConfig = parts(LSAStackConfig, "the model", layers=2)
    evaluation: EvaluationConfig = parts(EvaluationConfig, "seeds and test sets", seeds=3)
    batched_seeds: bool = setting(True, "train all seeds as one batched model (each seed equals its lone run)")
    n_ood: int = setting(2_000, "tasks per point of each out-of-distribution sweep (ood.csv)")
    max_applications: int = setting(50, "tied stacks: apply the trained layer up to this many times (depth.csv)")
    dampings: tuple[float, ...] = setting((1.0, 0.75, 0.5), "tied stacks: update scalings λ in (0, 1] for the "
                                                            "runs past the training depth")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_ood", "max_applications")
        if not self.dampings or any(not 0 < g <= 1 for g in self.dampings):
            raise ConfigError(f"dampings must be values in (0, 1], got {self.dampings!r}")


def run(config: MultiLayerConfig, ctx: RunContext) -> dict[str, Any]:
    run = RegressionRun(config, ctx, ConcatTokenTask(config.task.build()))
    layout, shared = run.layout, config.model.shared_steps
    tune = run.tune_batch()
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, config.model.layers)
    gd = tune_gd(*args, shared=shared)
    gdpp = tune_gdpp(*args, shared=shared, start=gd)
    references = {"gd": GDPredictor(layout, gd.etas), "gdpp": GDPPPredictor(layout, gdpp)}
    for name, predictor in references.items():
        run.add_reference(name, predictor)
    constructed = gdpp_model(layout.d_x, layout.d_y, config.task.n_context, gdpp.etas, gdpp.gammas,
                             recurrent=shared, dtype=torch.float32).to(run.device)
    common = {"loss_zero": run.score(ZeroPredictor(layout)).loss, "loss_gdpp_constructed": run.score(constructed).loss,
              "loss_gd_per_step": per_step_losses(run, gd), "loss_gdpp_per_step": per_step_losses(run, gdpp),
              "gd_eta": _scalar_if(shared, gd.etas), "gdpp_eta": _scalar_if(shared, gdpp.etas),
              "gdpp_gamma": _scalar_if(shared, gdpp.gammas)}

    def model(seed: int) -> LSAModel:
        return LSAModel(config.model.lsa_config(layout), seed=seed)

    models = run.train_seeds("trained", model, lambda m, step, seed: run.eval_rows(step, seed, "trained", m),
                             batched=config.batched_seeds)
    depth_refs = depth_reference_rows(run, gd, gdpp) if config.model.recurrent else []
    for seed, trained in models.items():
        run.record(seed, {**seed_metrics(run, seed, trained, model(seed).to(run.device)), **common})
        run.add_ood(seed, {"trained": trained, **references}, config.n_ood)
        if config.model.recurrent:
            run.add_rows("depth", trained_depth_rows(run, trained) + depth_refs, seed=seed)
    write_json(ctx.out / "weights.json", {seed: [dataclasses.asdict(w) for w in m.weights()]
                                          for seed, m in models.items()})
    return run.finish(lambda mean: figures(run, mean))


def per_step_losses(run: RegressionRun, params: GDPPParams) -> list[float]:
    """Test loss after each of the K steps (step 1 first), in float64 like every reference."""
    predictions = GDPPPredictor(run.layout, params).predictions_per_step(run.test.tokens.double())
    return [regression_loss(p, run.test.targets.double()) for p in predictions[1:]]


def per_layer_losses(run: RegressionRun, model: LSAModel) -> list[float]:
    """Test loss of the prediction read after each layer (layer 1 first)."""
    with torch.no_grad():
        _, states = model(run.test.tokens, return_tokens=True)
    return [regression_loss(run.layout.prediction(s), run.test.targets) for s in states[1:]]


def seed_metrics(run: RegressionRun, seed: int, model: LSAModel, untrained: LSAModel) -> dict[str, Any]:
    config, layout = run.config, run.layout
    K, recurrent = config.model.layers, config.model.recurrent
    gd, gdpp = run.references["gd"], run.references["gdpp"]
    trained = run.score(model)
    read = [gdpp_params_from_weights(w, layout.d_x, layout.d_y, config.task.n_context) for w in model.weights()]
    repeat = K if recurrent else 1
    read_off = GDPPParams(tuple(e for e, _ in read) * repeat, tuple(g for _, g in read) * repeat)
    return {
        "loss_trained": trained.loss,
        "loss_gd": gd.loss,
        "loss_gdpp": gdpp.loss,
        "loss_trained_per_layer": per_layer_losses(run, model),
        "loss_rel_gap_trained_vs_gd": relative_gap(trained.loss, gd.loss),
        "loss_rel_gap_trained_vs_gdpp": relative_gap(trained.loss, gdpp.loss),
        "trained_eta": _scalar_if(recurrent, [e for e, _ in read]),
        "trained_gamma": _scalar_if(recurrent, [g for _, g in read]),
        # GD++ run with the (η, γ) read off the trained layers: splits the gap to tuned GD++ into "which
        # (η, γ) training settled on" and "how far the rest of the weights are from a GD++ layer".
        "loss_gdpp_at_trained_params": run.score(GDPPPredictor(layout, read_off)).loss,
        **_suffixed(trained, gd, "_gd"),
        **_suffixed(trained, gdpp, "_gdpp"),
        **_suffixed(run.score(untrained), gdpp, "_gdpp", prefix="untrained_"),
        **_suffixed(gd, gdpp, "_gdpp", prefix="gd_"),
        **alignment_peak(run.tables["curves"], seed),
    }


def depth_reference_rows(run: RegressionRun, gd: GDPPParams, gdpp: GDPPParams) -> list[dict[str, Any]]:
    """GD and GD++ with damping λ (λη, λγ) run n = 1..max_applications steps: rows {damping, applications,
    model, loss}. They do not depend on the training seed, so they are computed once."""
    n, tokens, rows = run.config.max_applications, run.test.tokens.double(), []
    for damping in run.config.dampings:
        params = {"gd": GDPPParams((damping * gd.etas[0],) * n, (0.0,) * n),
                  "gdpp": GDPPParams((damping * gdpp.etas[0],) * n, (damping * gdpp.gammas[0],) * n)}
        curves = {name: GDPPPredictor(run.layout, p).predictions_per_step(tokens)[1:] for name, p in params.items()}
        rows += _depth_rows(run, curves, damping)
    return rows


def trained_depth_rows(run: RegressionRun, model: LSAModel) -> list[dict[str, Any]]:
    """The trained tied layer applied n = 1..max_applications times with its update scaled by λ."""
    rows = []
    for damping in run.config.dampings:
        config = dataclasses.replace(run.config.model.lsa_config(run.layout), damping=damping, clip_activations=None)
        damped = LSAModel(config).to(run.device).load_weights(model.weights())
        with torch.no_grad():
            _, states = damped(run.test.tokens, return_tokens=True, n_applications=run.config.max_applications)
        rows += _depth_rows(run, {"trained": [run.layout.prediction(s) for s in states[1:]]}, damping)
    return rows


def _depth_rows(run: RegressionRun, curves: dict[str, Any], damping: float) -> list[dict[str, Any]]:
    rows = []
    for name, predictions in curves.items():
        for n, prediction in enumerate(predictions, start=1):
            loss = regression_loss(prediction, run.test.targets)
            rows.append({"damping": damping, "applications": n, "model": name,
                         "loss": loss if loss == loss else float("inf")})  # NaN only after overflow
    return rows


def alignment_peak(curves: list[dict[str, Any]], seed: int) -> dict[str, float]:
    """The highest sensitivity cosine against GD over training and the step it was reached (the model aligns
    with GD first, then moves on to GD++), and the cosine against GD++ at that step."""
    rows = [r for r in curves if r["seed"] == seed and r["model"] == "trained"]
    vs_gd = {r["step"]: r["value"] for r in rows if r["metric"] == "cos_sensitivity_vs_gd"}
    vs_gdpp = {r["step"]: r["value"] for r in rows if r["metric"] == "cos_sensitivity_vs_gdpp"}
    step = max(vs_gd, key=lambda k: (vs_gd[k], -k))
    return {"cos_sensitivity_gd_peak": vs_gd[step], "cos_sensitivity_gd_peak_step": float(step),
            "cos_sensitivity_gdpp_at_gd_peak": vs_gdpp[step]}


def _suffixed(scored: Scored, reference: Scored, suffix: str, prefix: str = "") -> dict[str, float]:
    return {f"{prefix}{k}{suffix}": v for k, v in alignment_metrics("", scored, reference).items()}


def _scalar_if(shared: bool, values) -> Any:
    values = [float(v) for v in values]
    return values[0] if shared else values


def figures(run: RegressionRun, mean: dict[str, Any]):
    config, curves = run.config, run.tables["curves"]
    trained = [r for r in curves if r["model"] == "trained"]
    yield "loss_curves", loss_curves_figure(curves, {"zero predictor": mean["loss_zero"]})
    for ref in ("gd", "gdpp"):
        yield f"alignment_vs_{ref}", alignment_curves_figure(trained, reference=ref)
    yield "ood", ood_figure(run.tables["ood"])
    yield "cosine_gd_then_gdpp", reference_cosines_figure(trained)
    title = f"K={config.model.layers} {'recurrent' if config.model.recurrent else 'separate layers'}"
    yield "per_layer_loss", per_layer_loss_figure(run.per_seed, mean, title)
    yield "effective_params", effective_params_figure(run.per_seed, mean)
    if run.tables.get("depth"):
        yield "past_training_depth", depth_figure(run.tables["depth"], config.dampings, config.model.layers)


STUDY = Study(
    name="multi-layer",
    summary="K-layer LSA (tied or not) vs K steps of tuned GD and GD++: per-layer loss, alignment, OOD, depth",
    default_config=MultiLayerConfig,
    run=run,
    default_threads=1,
)
