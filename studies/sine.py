"""Study `sine`: non-linear regression through learned features (von Oswald et al. 2023, Prop. 2).

Trains (1) an embedding + MLP on each token's x followed by one LSA layer, and (2) the baseline, a meta-learned
MLP whose read-out takes one GD step on the context, on sine tasks y = a sin(x + φ). Both are compared on fixed
test tasks with the zero predictor and with the Prop. 2 construction on the trained model's own features:
(a) the Prop. 1 layer on m(x) (kernel m(x)ᵀm(x')) and (b) with the kernel the trained layer actually uses,
m(x)ᵀ S m(x') with S the PSD part of its read-out block, both from the trained model's initial read-out W₀ and
with η tuned on held-out tasks. The trained model's query token starts at -W₀ m(x_q) (``initial_readout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from constructions.prop2 import TunedReadout, prop2_on_features, psd_part, trained_readout_kernel, tuned_readout_eta
from icl_gd.baselines import ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints, setting
from icl_gd.evaluation import alignment_metrics
from icl_gd.feature_models import FeatureLSAModel, FeatureMapConfig, MetaLearnedReadout, feature_lsa_model
from icl_gd.plotting import alignment_curves_figure, functions_figure, loss_curves_figure
from icl_gd.sine import SineTask, SineTokenTask
from icl_gd.study import QuickRegressionConfig, RegressionRun, RunContext, Study, TrainingConfig, parts, relative_gap
from icl_gd.tasks import Stream


@dataclass(frozen=True)
class SineTaskConfig:
    n_context: int = setting(10, "context pairs per task, N")
    input_range: float = setting(10.0, "inputs x ~ U(-r/2, r/2) with r = input_range (the authors': [-5, 5])")
    correlated: bool = setting(False, "the authors' law: amplitude and phase from one uniform number per task")

    def __post_init__(self) -> None:
        self.build()

    def build(self) -> SineTask:
        return SineTask(n_context=self.n_context, input_range=self.input_range, correlated=self.correlated)


@dataclass(frozen=True)
class SineModelConfig:
    d_features: int = setting(40, "width of the feature map m(x) (the LSA layer is d_features + 1 wide)")
    hidden: int = setting(160, "hidden width of the residual MLP (0: the linear embedding alone)")
    activation: Literal["relu", "gelu", "tanh"] = setting("gelu", "the MLP's non-linearity")
    initial_readout: bool = setting(True, "the query starts at -W₀ m(x_q) with W₀ trained (from zero)")
    lsa_init_scale: float = setting(0.2, "LSA init variance scale (the authors' 0.002 stalls at ~2.8x the "
                                         "baseline's loss here)")
    layers = 1  # one LSA layer: the depth TrainingConfig resolves for
    recurrent = False

    def __post_init__(self) -> None:
        require_positive("lsa_init_scale", self.lsa_init_scale)
        self.features()

    def features(self) -> FeatureMapConfig:
        return FeatureMapConfig(d_x=1, d_features=self.d_features, hidden=self.hidden, activation=self.activation)


@dataclass(frozen=True)
class SineConfig(QuickRegressionConfig):
    task: SineTaskConfig = setting(doc="the tasks", factory=SineTaskConfig)
    model: SineModelConfig = setting(doc="the model", factory=SineModelConfig)
    training: TrainingConfig = parts(TrainingConfig, "optimisation", steps=4000, batch_size=512, lr=1e-3,
                                     grad_clip=0.0)
    n_function_tasks: int = setting(4, "test tasks whose predicted functions are drawn (functions.csv)")
    grid_points: int = setting(200, "query points per drawn function")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_function_tasks", "grid_points")


def run(config: SineConfig, ctx: RunContext) -> dict[str, Any]:
    run = RegressionRun(config, ctx, SineTokenTask(config.task.build()))
    tune = run.tune_tokens()
    loss_zero = run.score(ZeroPredictor(run.layout)).loss

    def evaluate_lsa(model: FeatureLSAModel, step: int, seed: int) -> list[dict[str, Any]]:
        own = run.score(prop2_on_features(model, *tune)[0])
        rows = run.eval_rows(step, seed, "mlp+lsa", model, against={"prop2_own_features": own})
        return rows + run.eval_rows(step, seed, "prop2_own_features", own, against={})

    def evaluate_meta(model: MetaLearnedReadout, step: int, seed: int) -> list[dict[str, Any]]:
        return run.eval_rows(step, seed, "meta-learned mlp + 1 GD step", model, against={})

    m = config.model
    lsa_models = run.train_seeds("lsa", lambda seed: feature_lsa_model(
        m.features(), seed=seed, init_scale=m.lsa_init_scale, initial_readout=m.initial_readout), evaluate_lsa)
    baselines = run.train_seeds("meta", lambda seed: MetaLearnedReadout(m.features(), seed=seed), evaluate_meta)
    for seed in run.seeds:
        metrics, predictors = seed_metrics(run, lsa_models[seed], baselines[seed], tune)
        run.record(seed, {**metrics, "loss_zero": loss_zero})
        run.add_rows("functions", predicted_functions(run, predictors), seed=seed)
    return run.finish(lambda mean: figures(run, loss_zero))


def seed_metrics(run: RegressionRun, model: FeatureLSAModel, baseline: MetaLearnedReadout,
                 tune: tuple[torch.Tensor, torch.Tensor]) -> tuple[dict[str, Any], dict[str, nn.Module]]:
    own, eta_own = prop2_on_features(model, *tune)
    metric, lost = psd_part(trained_readout_kernel(model))
    own_kernel, eta_kernel = prop2_on_features(model, *tune, metric=metric.to(run.test.tokens))
    eta_meta = tuned_readout_eta(baseline, *tune)
    meta = TunedReadout(baseline, eta_meta)
    trained, meta_tuned = run.score(model), run.score(meta)
    own_scored, kernel_scored = run.score(own), run.score(own_kernel)
    out: dict[str, Any] = {
        "loss_trained": trained.loss,
        "loss_meta_learned": run.score(baseline).loss,
        "loss_meta_learned_tuned_eta": meta_tuned.loss,
        "loss_prop2_own_features": own_scored.loss,
        "loss_prop2_trained_kernel": kernel_scored.loss,
        "loss_rel_gap_trained_vs_meta": relative_gap(trained.loss, meta_tuned.loss),
        "eta_meta_learned": float(baseline.eta.detach()),
        "eta_meta_tuned": eta_meta,
        "eta_prop2_own_features": eta_own,
        "eta_prop2_trained_kernel": eta_kernel,
        "trained_kernel_negative_mass": lost,
        **alignment_metrics("", trained, kernel_scored),
        **alignment_metrics("vs_prop2_own_", trained, own_scored),
        **alignment_metrics("vs_meta_", trained, meta_tuned),
    }
    predictors = {"mlp+lsa (trained)": model, "meta-learned mlp + 1 GD step": meta,
                  "prop2 on trained kernel": own_kernel}
    return out, predictors


def predicted_functions(run: RegressionRun, predictors: dict[str, nn.Module]) -> list[dict[str, Any]]:
    """Each predictor's ŷ(x) on a grid of queries for a few test tasks (their contexts fixed), and the truth."""
    config, device = run.config, run.device
    K, G = config.n_function_tasks, config.grid_points
    batch = config.task.build().sample(K, config.evaluation.test_seed, 1, Stream.TEST, device)
    grid = torch.linspace(-config.task.input_range / 2, config.task.input_range / 2, G, device=device)
    context = torch.cat([batch.x_context, batch.y_context], dim=-1)  # (K, N, 2)
    queries = torch.stack([grid, torch.zeros_like(grid)], dim=-1)  # (G, 2)
    tokens = torch.cat([context[:, None].expand(K, G, *context.shape[1:]),
                        queries[None, :, None].expand(K, G, 1, 2)], dim=2).reshape(K * G, -1, 2)
    curves = {"truth": batch.function(grid[None].expand(K, G))}
    with torch.no_grad():
        curves.update({name: p(tokens)[:, 0].reshape(K, G) for name, p in predictors.items()})
    rows = []
    for task in range(K):
        for name, values in curves.items():
            rows += [{"task": task, "model": name, "x": float(x), "y": float(v), "kind": "curve"}
                     for x, v in zip(grid.tolist(), values[task].tolist())]
        rows += [{"task": task, "model": "context", "x": float(x), "y": float(v), "kind": "context"}
                 for x, v in zip(batch.x_context[task, :, 0].tolist(), batch.y_context[task, :, 0].tolist())]
    return rows


def figures(run: RegressionRun, loss_zero: float):
    curves = run.tables["curves"]
    yield "loss_curves", loss_curves_figure([r for r in curves if r["metric"] == "loss"],
                                            {"zero predictor": loss_zero}, log_y=True)
    yield "alignment_curves", alignment_curves_figure([r for r in curves if r["model"] == "mlp+lsa"],
                                                      "prop2_own_features")
    yield "functions", functions_figure([r for r in run.tables["functions"] if r["seed"] == run.seeds[0]])


STUDY = Study(
    name="sine",
    summary="MLP features + one LSA layer vs a meta-learned MLP taking one GD step, on sine tasks (Prop. 2)",
    default_config=SineConfig,
    run=run,
    default_threads=1,
)
