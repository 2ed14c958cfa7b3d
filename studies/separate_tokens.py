"""Study `separate-tokens`: x and y in separate tokens, a softmax layer then an LSA layer (Prop. 3).

Trains two-layer models (first layer softmax attention with 1, 2 and 4 heads, second layer LSA) on linear
regression in the layout x_1, (0, y_1), ..., x_N, (0, y_N), x_q with concatenated sinusoidal positions, and
compares them on a fixed test set with one and two GD steps (η tuned on held-out tasks) and with the Prop. 3
construction. The copy analysis differentiates the first layer's update at token k with respect to input tokens
k, k+1 and all others (k+1 excluded) and averages over the context inputs x_i; the attention maps show where
each token of the first layer looks. The first entry of ``heads`` (1, the authors' choice) gives the
un-suffixed metrics; every head count also gets ``*_h{H}`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from constructions.prop3 import prop3_model, score_gap
from icl_gd.baselines import ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints
from icl_gd.errors import ConfigError
from icl_gd.evaluation import EvalSet, alignment_metrics, score, scored_rows
from icl_gd.gd import tune_gd_etas
from icl_gd.plotting import loss_curves_figure, plt, save_figure, sns
from icl_gd.results import mean_over_seeds, write_csv, write_metrics
from icl_gd.separate_tokens import (SeparateGDPredictor, SeparateModelConfig, SeparateTokenModel,
                                    SeparateTokenTask, SinusoidalPositions, copy_analysis)
from icl_gd.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.training import TrainConfig, config_fingerprint, train

from icl_gd.study import RunContext, Study


@dataclass(frozen=True)
class SeparateTokensConfig:
    """Every setting of the study (``--set KEY=VALUE``); ``heads`` is a comma-separated list (first = primary)."""

    d: int = 10
    n_context: int = 10
    input_range: float = 1.0
    n_frequencies: int | None = None  # None: N
    heads: tuple[int, ...] = (1, 2, 4)
    steps: int = 4000
    batch_size: int = 512
    lr: float = 3e-3
    grad_clip: float | None = None
    init_scale: float = 0.002
    eval_every: int = 250
    checkpoint_every: int = 1000
    seed: int = 0
    seeds: int = 1
    test_seed: int = 2023
    n_test: int = 4096
    n_tune: int = 4096
    n_copy: int = 64
    construction_beta: float = 20.0

    def __post_init__(self) -> None:
        require_positive_ints(
            self, "d", "n_context", "steps", "batch_size", "eval_every", "checkpoint_every", "seeds", "n_test", "n_tune",
            "n_copy")
        if not self.heads or any(h <= 0 for h in self.heads):
            raise ConfigError(f"heads must be a non-empty list of positive integers, got {self.heads!r}")
        for name in ("input_range", "lr", "init_scale", "construction_beta"):
            require_positive(name, getattr(self, name))
        if self.seed < 0 or self.test_seed < 0:
            raise ConfigError(f"seeds must be non-negative, got seed={self.seed}, test_seed={self.test_seed}")
        SinusoidalPositions(n_frequencies=self.n_frequencies)

    @property
    def task(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=UniformInputs(self.input_range))

    @property
    def token_task(self) -> SeparateTokenTask:
        return SeparateTokenTask(self.task, SinusoidalPositions(n_frequencies=self.n_frequencies))

    @property
    def training(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr, grad_clip=self.grad_clip,
                           eval_every=self.eval_every, checkpoint_every=self.checkpoint_every)

    def model(self, heads: int) -> SeparateModelConfig:
        return SeparateModelConfig(n_heads=heads, init_scale=self.init_scale)


def run(config: SeparateTokensConfig, ctx: RunContext) -> dict[str, Any]:
    device = ctx.device
    token_task = config.token_task
    layout = token_task.layout
    batch, tokens = token_task.batch_tokens(config.n_test, config.test_seed, 0, Stream.TEST, device)
    test = EvalSet(tokens, batch.y_query, config.d)
    tune = config.task.sample(config.n_tune, config.test_seed, 0, Stream.TUNE, device, torch.float64)
    eta_1 = tune_gd_etas(tune.x_context, tune.y_context, tune.x_query, tune.y_query, 1)
    eta_2 = tune_gd_etas(tune.x_context, tune.y_context, tune.x_query, tune.y_query, 2, shared=False)
    gd1 = score(SeparateGDPredictor(layout, eta_1), test)
    gd2 = score(SeparateGDPredictor(layout, eta_2), test)
    constructed = prop3_model(layout, eta_1[0], config.construction_beta, torch.float32).to(device)
    common = {
        "loss_gd": gd1.loss, "loss_gd_2steps": gd2.loss, "lr_gd": eta_1[0], "lr_gd_2steps": eta_2,
        "loss_zero": score(ZeroPredictor(layout), test).loss,
        "loss_prop3_construction": score(constructed, test).loss,
        "construction_beta": config.construction_beta, "construction_score_gap": score_gap(layout),
    }
    references = {"gd": gd1, "gd_2steps": gd2}

    curves: list[dict[str, Any]] = []
    copy_rows: list[dict[str, Any]] = []
    per_seed: dict[int, dict[str, Any]] = {}
    models: dict[int, SeparateTokenModel] = {}
    copy_tokens = tokens[: config.n_copy]
    seeds = [config.seed + i for i in range(config.seeds)]
    for seed in seeds:
        metrics: dict[str, Any] = dict(common)
        for heads in config.heads:
            model = SeparateTokenModel(layout, config.model(heads), seed=seed).to(device)
            label = f"{heads} head{'s' if heads > 1 else ''}"

            def evaluate(m: torch.nn.Module, step: int, seed: int = seed, label: str = label) -> list[dict[str, Any]]:
                rows = scored_rows(step, seed, label, score(m, test), references)
                rows += [{"step": step, "seed": seed, "model": name, "metric": "loss", "value": s.loss}
                         for name, s in (("1 GD step", gd1), ("2 GD steps", gd2))]
                return rows

            fingerprint = config_fingerprint(config.task, layout, config.model(heads), config.training)
            state = train(model, token_task, config.training, seed, device=device, evaluate=evaluate,
                          checkpoint_path=ctx.out / "checkpoints" / f"heads{heads}_seed{seed}.pt",
                          fingerprint=fingerprint, progress=ctx.progress, description=f"{label}, seed {seed}")
            curves.extend(state.history)
            trained = score(model, test)
            analysis = copy_analysis(model.copy, copy_tokens)
            x_pos = layout.x_positions
            values = {
                "loss_trained": trained.loss,
                "loss_rel_gap_trained_vs_gd": (trained.loss - gd1.loss) / gd1.loss,
                "loss_rel_gap_trained_vs_gd_2steps": (trained.loss - gd2.loss) / gd2.loss,
                "copy_own": float(analysis.own[x_pos].mean()),
                "copy_next": float(analysis.next[x_pos].mean()),
                "copy_other": float(analysis.other[x_pos].mean()),
                "copy_other_per_token": float(analysis.other_per_token[x_pos].mean()),
                "copy_own_with_residual": float(analysis.own_with_residual[x_pos].mean()),
                **alignment_metrics("", trained, gd1),
                **alignment_metrics("vs_gd_2steps_", trained, gd2),
            }
            suffix = f"_h{heads}"
            if heads == config.heads[0]:
                metrics.update(values)
                models[seed] = model
            metrics.update({k + suffix: v for k, v in values.items()})
            for k in range(layout.n_tokens):
                copy_rows.append({"seed": seed, "heads": heads, "token": k,
                                  "kind": "query" if k == layout.n_tokens - 1 else ("x" if k % 2 == 0 else "y"),
                                  "own": float(analysis.own[k]), "next": float(analysis.next[k]),
                                  "other": float(analysis.other[k]),
                                  "other_per_token": float(analysis.other_per_token[k]),
                                  "own_with_residual": float(analysis.own_with_residual[k])})
            if seed == seeds[0]:
                save_figure(attention_figure(model, copy_tokens, label), ctx.out, f"attention_h{heads}")
                save_figure(gradient_map_figure(analysis.norms, label), ctx.out, f"copy_gradients_h{heads}")
        per_seed[seed] = metrics

    mean = mean_over_seeds(per_seed)
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    write_csv(ctx.out / "copy_analysis.csv", copy_rows)
    save_figure(loss_curves_figure(curves, {"zero predictor": common["loss_zero"]}, log_y=True), ctx.out,
                "loss_curves")
    save_figure(heads_figure(per_seed, config.heads, common), ctx.out, "heads")
    write_metrics(ctx.out, mean, per_seed)
    return mean


def attention_figure(model: SeparateTokenModel, tokens: torch.Tensor, label: str) -> "plt.Figure":
    """Mean first-layer attention (query token × context token), one panel per head."""
    with torch.no_grad():
        attn = model.copy.attention_map(tokens).mean(0).cpu()  # (H, T, 2N)
    H = attn.shape[0]
    fig, axes = plt.subplots(1, H, figsize=(3.6 * H, 3.4), squeeze=False)
    for h, ax in enumerate(axes.flat):
        sns.heatmap(attn[h].numpy(), ax=ax, cmap="viridis", vmin=0, square=True, cbar=True)
        ax.set(title=f"{label}: head {h + 1}", xlabel="context token s", ylabel="token t")
    fig.tight_layout()
    return fig


def gradient_map_figure(norms: torch.Tensor, label: str) -> "plt.Figure":
    """‖∂u_k/∂e_j‖_F of the first layer's update (output token k × input token j)."""
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    sns.heatmap(norms.cpu().numpy(), ax=ax, cmap="magma", square=True, cbar=True)
    ax.set(title=f"first-layer gradient norms ({label})", xlabel="input token j", ylabel="output token k")
    fig.tight_layout()
    return fig


def heads_figure(per_seed: dict[int, dict[str, Any]], heads: tuple[int, ...], common: dict[str, Any]) -> "plt.Figure":
    """Final test loss against the number of first-layer heads, with one and two GD steps."""
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for seed, m in per_seed.items():
        ax.plot(list(heads), [m[f"loss_trained_h{h}"] for h in heads], "o-", color="C0",
                label="trained" if seed == min(per_seed) else None)
    ax.axhline(common["loss_gd"], ls="--", color="C1", label="1 GD step")
    ax.axhline(common["loss_gd_2steps"], ls="--", color="C2", label="2 GD steps")
    ax.set(xlabel="heads in the softmax layer", ylabel="test loss", xticks=list(heads))
    ax.legend(fontsize=7)
    return fig


STUDY = Study(
    name="separate-tokens",
    summary="separate x/y tokens: softmax copy layer + LSA layer vs one and two GD steps, copy analysis (Prop. 3)",
    default_config=SeparateTokensConfig,
    run=run,
    default_threads=1,
)
