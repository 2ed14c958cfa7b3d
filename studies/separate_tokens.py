"""Study `separate-tokens`: x and y in separate tokens, a softmax layer then an LSA layer (Prop. 3).

Trains two-layer models (first layer softmax attention with 1, 2 and 4 heads, second layer LSA) on linear
regression in the layout x_1, (0, y_1), ..., x_N, (0, y_N), x_q with concatenated sinusoidal positions, and
compares them on fixed test tasks with one and two GD steps (tuned on held-out tasks) and with the Prop. 3
construction. The copy analysis differentiates the first layer's update at token k with respect to input tokens
k, k+1 and all others (k+1 excluded), averaged over the context inputs x_i; the attention maps show where each
token of the first layer looks. The first entry of ``heads`` gives the un-suffixed metrics; every head count also
gets ``*_h{H}`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from constructions.prop3 import prop3_model, score_gap
from icl_gd.baselines import GDPredictor, ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints, setting
from icl_gd.evaluation import alignment_metrics
from icl_gd.gd import tune_gd
from icl_gd.plotting import attention_figure, gradient_map_figure, heads_figure, loss_curves_figure
from icl_gd.separate_tokens import (SeparateModelConfig, SeparateTokenModel, SeparateTokenTask, SinusoidalPositions,
                                    copy_analysis)
from icl_gd.study import HeadsModelConfig, QuickRegressionConfig, RegressionRun, RunContext, Study, relative_gap

COPY_COLUMNS = ("own", "next", "other", "other_per_token", "own_with_residual")


@dataclass(frozen=True)
class SeparateModelPart(HeadsModelConfig):
    n_frequencies: int | None = setting(None, "frequencies of the sinusoidal positions (none: N)")
    layers = 2  # a softmax layer then an LSA layer: the depth TrainingConfig resolves for
    recurrent = False

    def __post_init__(self) -> None:
        super().__post_init__()
        SinusoidalPositions(n_frequencies=self.n_frequencies)


@dataclass(frozen=True)
class SeparateTokensConfig(QuickRegressionConfig):
    model: SeparateModelPart = setting(doc="the models", factory=SeparateModelPart)
    n_copy: int = setting(64, "test tasks of the copy analysis and attention maps")
    construction_beta: float = setting(20.0, "inverse temperature β of the Prop. 3 copy layer")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_copy")
        require_positive("construction_beta", self.construction_beta)


def run(config: SeparateTokensConfig, ctx: RunContext) -> dict[str, Any]:
    token_task = SeparateTokenTask(config.task.build(), SinusoidalPositions(n_frequencies=config.model.n_frequencies))
    run = RegressionRun(config, ctx, token_task)
    layout, tune = run.layout, run.tune_batch()
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query)
    eta_1, eta_2 = tune_gd(*args, 1).etas, tune_gd(*args, 2, shared=False).etas
    gd1 = run.add_reference("gd", GDPredictor(layout, eta_1), curve="1 GD step")
    gd2 = run.add_reference("gd_2steps", GDPredictor(layout, eta_2), curve="2 GD steps")
    constructed = prop3_model(layout, eta_1[0], config.construction_beta, torch.float32).to(run.device)
    common = {"loss_gd": gd1.loss, "loss_gd_2steps": gd2.loss, "lr_gd": eta_1[0], "lr_gd_2steps": list(eta_2),
              "loss_zero": run.score(ZeroPredictor(layout)).loss, "loss_prop3_construction": run.score(constructed).loss,
              "construction_beta": config.construction_beta, "construction_score_gap": score_gap(layout)}
    copy_tokens = run.test.tokens[: config.n_copy]
    first = {}  # heads -> (model, copy analysis) of the first seed, for the figures
    for heads in config.model.heads:
        label = config.model.label(heads)
        models = run.train_seeds(f"heads{heads}", lambda seed: SeparateTokenModel(
            layout, SeparateModelConfig(n_heads=heads, init_scale=config.model.init_scale), seed=seed),
            lambda m, step, seed: run.eval_rows(step, seed, label, m))
        for seed, model in models.items():
            analysis = copy_analysis(model.copy, copy_tokens)
            first.setdefault(heads, (model, analysis))
            values = head_metrics(run, model, analysis)
            primary = values if heads == config.model.heads[0] else {}
            run.record(seed, {**common, **primary, **{f"{k}_h{heads}": v for k, v in values.items()}})
            run.add_rows("copy_analysis", copy_rows(layout, analysis), seed=seed, heads=heads)
    return run.finish(lambda mean: figures(run, first, copy_tokens, common))


def head_metrics(run: RegressionRun, model: SeparateTokenModel, analysis: Any) -> dict[str, float]:
    gd1, gd2 = run.references["gd"], run.references["gd_2steps"]
    trained, x_pos = run.score(model), run.layout.x_positions
    return {
        "loss_trained": trained.loss,
        "loss_rel_gap_trained_vs_gd": relative_gap(trained.loss, gd1.loss),
        "loss_rel_gap_trained_vs_gd_2steps": relative_gap(trained.loss, gd2.loss),
        **{f"copy_{name}": float(getattr(analysis, name)[x_pos].mean()) for name in COPY_COLUMNS},
        **alignment_metrics("", trained, gd1),
        **alignment_metrics("vs_gd_2steps_", trained, gd2),
    }


def copy_rows(layout: Any, analysis: Any) -> list[dict[str, Any]]:
    """One row per token: its kind (x, y, query) and the copy analysis' gradient norms."""
    last = layout.n_tokens - 1
    return [{"token": k, "kind": "query" if k == last else ("x" if k % 2 == 0 else "y"),
             **{name: float(getattr(analysis, name)[k]) for name in COPY_COLUMNS}} for k in range(layout.n_tokens)]


def figures(run: RegressionRun, first: dict[int, tuple[SeparateTokenModel, Any]], copy_tokens: torch.Tensor,
            common: dict[str, Any]):
    for heads, (model, analysis) in first.items():
        label = HeadsModelConfig.label(heads)
        with torch.no_grad():
            yield f"attention_h{heads}", attention_figure(model.copy.attention_map(copy_tokens).mean(0), label)
        yield f"copy_gradients_h{heads}", gradient_map_figure(analysis.norms, label)
    yield "loss_curves", loss_curves_figure(run.tables["curves"], {"zero predictor": common["loss_zero"]})
    yield "heads", heads_figure(run.per_seed, run.config.model.heads,
                                {"1 GD step": common["loss_gd"], "2 GD steps": common["loss_gd_2steps"]})


STUDY = Study(
    name="separate-tokens",
    summary="separate x/y tokens: softmax copy layer + LSA layer vs one and two GD steps, copy analysis (Prop. 3)",
    default_config=SeparateTokensConfig,
    run=run,
    default_threads=1,
)
