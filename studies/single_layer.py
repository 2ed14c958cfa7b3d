"""Study `single-layer`: a trained LSA layer against one tuned GD step (von Oswald et al. 2023, §3).

Trains LSA models on fresh regression tasks (one or more seeds), and compares them on a fixed test set with GD
whose η was tuned on separate held-out tasks: losses, alignment (against GD and two controls), the effective η,
the interpolation sweep towards the Prop. 1 weights, and OOD sweeps. ``--set layers=K`` compares K layers with K
GD steps (one η if recurrent, per-step η otherwise).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from constructions.gd import gd_model, gd_step_weights
from icl_gd.baselines import GDPredictor, LeastSquaresPredictor, ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints
from icl_gd.errors import ConfigError
from icl_gd.evaluation import Scored, EvalSet, alignment_metrics, score, scored_rows
from icl_gd.gd import tune_gd_etas
from icl_gd.interpolation import gauge_fixed_products, interpolate_models
from icl_gd.lsa import LSAConfig, LSAModel
from icl_gd.metrics import effective_eta, regression_loss
from icl_gd.ood import default_sweeps, evaluate_sweeps
from icl_gd.plotting import (alignment_curves_figure, interpolation_figure, loss_curves_figure, ood_figure,
                             save_figure, weight_products_figure)
from icl_gd.results import mean_over_seeds, write_csv, write_metrics
from icl_gd.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.tokens import ConcatTokenTask
from icl_gd.training import TrainConfig, authors_train_config, config_fingerprint, train

from icl_gd.study import RunContext, Study


@dataclass(frozen=True)
class SingleLayerConfig:
    """Every setting of the study (``--set KEY=VALUE``); ``input_range`` is the width r of U(-r/2, r/2)."""

    d: int = 10
    n_context: int = 10
    input_range: float = 1.0
    weight_scale: float = 1.0
    label_noise: float = 0.0
    layers: int = 1
    recurrent: bool = False
    heads: int = 1
    steps: int = 5000
    batch_size: int = 2048
    lr: float = 1e-3
    grad_clip: float | None = None  # None: the authors' value for the depth
    eval_every: int = 100
    checkpoint_every: int = 1000
    seed: int = 0
    seeds: int = 1
    test_seed: int = 2023
    n_test: int = 10_000
    n_tune: int = 10_000
    n_ood: int = 2_000
    interpolation_points: int = 11

    def __post_init__(self) -> None:
        require_positive_ints(
            self, "d", "n_context", "layers", "heads", "steps", "batch_size", "eval_every", "checkpoint_every", "seeds",
            "n_test", "n_tune", "n_ood")
        for name in ("input_range", "weight_scale", "lr"):
            require_positive(name, getattr(self, name))
        if self.seed < 0 or self.test_seed < 0:
            raise ConfigError(f"seeds must be non-negative, got seed={self.seed}, test_seed={self.test_seed}")
        if self.interpolation_points < 2:
            raise ConfigError(f"interpolation_points must be at least 2, got {self.interpolation_points}")

    @property
    def task(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=UniformInputs(self.input_range),
                                    weight_scale=self.weight_scale, label_noise=self.label_noise)

    @property
    def model(self) -> LSAConfig:
        return LSAConfig(d_model=self.d + 1, n_layers=self.layers, recurrent=self.recurrent, n_heads=self.heads,
                         clip_activations=10.0 if self.layers > 3 else None)

    @property
    def training(self) -> TrainConfig:
        overrides: dict[str, Any] = {"steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                                     "eval_every": self.eval_every, "checkpoint_every": self.checkpoint_every}
        if self.grad_clip is not None:
            overrides["grad_clip"] = self.grad_clip
        return authors_train_config(self.layers, self.recurrent, **overrides)


def tuned_gd_etas(config: SingleLayerConfig, device: torch.device) -> list[float]:
    """GD step sizes tuned on held-out tasks (Stream.TUNE), never on the test tasks."""
    tune = config.task.sample(config.n_tune, config.test_seed, 0, Stream.TUNE, device, torch.float64)
    shared = config.recurrent or config.layers == 1
    return tune_gd_etas(tune.x_context, tune.y_context, tune.x_query, tune.y_query, config.layers, shared=shared)


def run(config: SingleLayerConfig, ctx: RunContext) -> dict[str, Any]:
    device, d, N = ctx.device, config.d, config.n_context
    token_task = ConcatTokenTask(config.task)
    layout = token_task.layout
    batch, tokens = token_task.batch_tokens(config.n_test, config.test_seed, 0, Stream.TEST, device)
    test = EvalSet(tokens, batch.y_query, d)

    etas = tuned_gd_etas(config, device)
    gd = GDPredictor(layout, etas)
    constructed = gd_model(d, 1, N, etas, recurrent=config.recurrent, dtype=torch.float32).to(device)
    if config.heads > 1:  # the constructed model has as many heads as the trained one, each doing η/H
        constructed = LSAModel(config.model).to(device).load_weights(
            [gd_step_weights(d, 1, N, eta, n_heads=config.heads, dtype=torch.float32).to(device)
             for eta in (etas[:1] if config.recurrent else etas)])
    gd_scored = score(gd, test)
    references = {"gd": gd_scored}
    controls = {"gd_eta_x2": GDPredictor(layout, [2 * e for e in etas]),
                "gd_eta_half": GDPredictor(layout, [0.5 * e for e in etas])}
    control_scores = {name: score(p, test) for name, p in controls.items()}
    loss_zero = score(ZeroPredictor(layout), test).loss
    loss_lstsq = regression_loss(LeastSquaresPredictor(layout)(test.tokens.double()), test.targets.double())

    curves: list[dict[str, Any]] = []
    ood_rows: list[dict[str, Any]] = []
    interp_rows: list[dict[str, Any]] = []
    per_seed: dict[int, dict[str, Any]] = {}
    final_models: dict[int, LSAModel] = {}
    seeds = [config.seed + i for i in range(config.seeds)]
    fingerprint = config_fingerprint(config.task, config.model, config.training)

    for seed in seeds:
        model = LSAModel(config.model, seed=seed).to(device)
        untrained = copy.deepcopy(model)

        def evaluate(m: torch.nn.Module, step: int, seed: int = seed) -> list[dict[str, Any]]:
            rows = scored_rows(step, seed, "trained", score(m, test), references)
            rows += scored_rows(step, seed, "interpolated",
                                score(interpolate_models(m, constructed, 0.5, d), test), references)
            for name, s in [("gd", gd_scored), *control_scores.items()]:
                rows.append({"step": step, "seed": seed, "model": name, "metric": "loss", "value": s.loss})
            return rows

        state = train(model, token_task, config.training, seed, device=device, evaluate=evaluate,
                      checkpoint_path=ctx.out / "checkpoints" / f"seed{seed}.pt", fingerprint=fingerprint,
                      progress=ctx.progress, description=f"seed {seed}")
        curves.extend(state.history)
        final_models[seed] = model
        per_seed[seed] = seed_metrics(config, model, untrained, constructed, test, gd_scored, control_scores, etas)
        per_seed[seed].update(loss_zero=loss_zero, loss_least_squares=loss_lstsq)

        for alpha in torch.linspace(0, 1, config.interpolation_points).tolist():
            loss = score(interpolate_models(model, constructed, alpha, d), test).loss
            interp_rows.append({"seed": seed, "alpha": alpha, "loss": loss})
        per_seed[seed]["interpolation_max_rel_gap"] = max(
            abs(r["loss"] - gd_scored.loss) / gd_scored.loss for r in interp_rows if r["seed"] == seed)

        predictors = {"trained": model, "gd": gd, "interpolated": interpolate_models(model, constructed, 0.5, d)}
        for row in evaluate_sweeps(config.task, predictors, default_sweeps(N), config.n_ood, config.test_seed,
                                   device):
            ood_rows.append({"seed": seed, **row})

    mean = mean_over_seeds(per_seed)
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    write_csv(ctx.out / "ood.csv", ood_rows, ["seed", "sweep", "value", "model", "loss"])
    write_csv(ctx.out / "interpolation.csv", interp_rows, ["seed", "alpha", "loss"])
    draw_figures(ctx, curves, ood_rows, interp_rows, final_models[seeds[0]], constructed, mean, d)
    write_metrics(ctx.out, mean, per_seed)
    return mean


def seed_metrics(config: SingleLayerConfig, model: LSAModel, untrained: LSAModel, constructed: LSAModel,
                 test: EvalSet, gd_scored: Scored, control_scores: dict[str, Scored],
                 etas: list[float]) -> dict[str, Any]:
    d, N = config.d, config.n_context
    trained = score(model, test)
    interpolated = score(interpolate_models(model, constructed, 0.5, d), test)
    eta_trained = [effective_eta(w, d, N) for w in model.weights()]
    out: dict[str, Any] = {
        "loss_trained": trained.loss,
        "loss_gd": gd_scored.loss,
        "lr_gd": etas[0] if len(set(etas)) == 1 else etas,
        "loss_interpolated": interpolated.loss,
        "loss_constructed": score(constructed, test).loss,
        "eta_trained": eta_trained[0] if len(eta_trained) == 1 else eta_trained,
        "loss_rel_gap_trained_vs_gd": (trained.loss - gd_scored.loss) / gd_scored.loss,
    }
    out.update(alignment_metrics("", trained, gd_scored))
    out.update(alignment_metrics("untrained_", score(untrained, test), gd_scored))
    for name, s in control_scores.items():
        out[f"loss_{name}"] = s.loss
        out.update(alignment_metrics(f"{name}_", s, gd_scored))  # controls against tuned GD
        out.update(alignment_metrics(f"trained_vs_{name}_", trained, s))
    return out


def draw_figures(ctx: RunContext, curves, ood_rows, interp_rows, model: LSAModel, constructed: LSAModel,
                 mean: dict[str, Any], d: int) -> None:
    refs = {"zero predictor": mean["loss_zero"]}
    loss_rows = [r for r in curves if r["model"] in ("trained", "gd", "interpolated")]
    save_figure(loss_curves_figure(loss_rows, refs), ctx.out, "loss_curves")
    save_figure(alignment_curves_figure([r for r in curves if r["model"] in ("trained", "interpolated")]),
                ctx.out, "alignment_curves")
    save_figure(ood_figure(ood_rows), ctx.out, "ood")
    save_figure(interpolation_figure(interp_rows, {"tuned GD": mean["loss_gd"], "trained": mean["loss_trained"]}),
                ctx.out, "interpolation")
    trained_w, constructed_w = model.weights()[0], constructed.weights()[0]
    QK_t, PV_t = gauge_fixed_products(trained_w, constructed_w, d)
    QK_c, PV_c = constructed_w.products()
    save_figure(weight_products_figure({"trained QK (gauge-fixed)": QK_t.sum(0), "constructed QK": QK_c.sum(0),
                                        "trained PV (gauge-fixed)": PV_t.sum(0), "constructed PV": PV_c.sum(0)}),
                ctx.out, "weights")


STUDY = Study(
    name="single-layer",
    summary="a trained LSA layer vs one tuned GD step: loss, alignment, interpolation, OOD (von Oswald et al.)",
    default_config=SingleLayerConfig,
    run=run,
    default_threads=1,
)
