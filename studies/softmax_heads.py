"""Study `softmax-heads`: one softmax-attention layer (1, 2, 4 heads) on the concatenated layout vs one GD step.

The authors note that softmax attention needs at least two heads to match GD: a head's softmax-normalised output
carries a term ∝ the context's mean value that a second head can cancel, leaving the (linearised) GD update.
Trains a single softmax layer per head count on the default regression task and compares it on a fixed test
set with one tuned GD step (η tuned on held-out tasks): loss and the alignment metrics.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import torch

from icl_gd.baselines import GDPredictor, ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints
from icl_gd.errors import ConfigError
from icl_gd.evaluation import EvalSet, alignment_metrics, score, scored_rows
from icl_gd.gd import tune_gd_etas
from icl_gd.lsa import LSAConfig, LSAModel
from icl_gd.plotting import loss_curves_figure, plt, save_figure
from icl_gd.results import write_csv, write_metrics
from icl_gd.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.tokens import ConcatTokenTask
from icl_gd.training import TrainConfig, config_fingerprint, train

from icl_gd.study import RunContext, Study


@dataclass(frozen=True)
class SoftmaxHeadsConfig:
    """Every setting of the study (``--set KEY=VALUE``); ``heads`` is a comma-separated list."""

    d: int = 10
    n_context: int = 10
    input_range: float = 1.0
    heads: tuple[int, ...] = (1, 2, 4)
    steps: int = 3000
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

    def __post_init__(self) -> None:
        require_positive_ints(
            self, "d", "n_context", "steps", "batch_size", "eval_every", "checkpoint_every", "seeds", "n_test", "n_tune")
        if not self.heads or any(h <= 0 for h in self.heads):
            raise ConfigError(f"heads must be a non-empty list of positive integers, got {self.heads!r}")
        for name in ("input_range", "lr", "init_scale"):
            require_positive(name, getattr(self, name))
        if self.seed < 0 or self.test_seed < 0:
            raise ConfigError(f"seeds must be non-negative, got seed={self.seed}, test_seed={self.test_seed}")

    @property
    def task(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=UniformInputs(self.input_range))

    @property
    def training(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr, grad_clip=self.grad_clip,
                           eval_every=self.eval_every, checkpoint_every=self.checkpoint_every)

    def model(self, heads: int) -> LSAConfig:
        return LSAConfig(d_model=self.d + 1, n_heads=heads, softmax=True, init_scale=self.init_scale)


def run(config: SoftmaxHeadsConfig, ctx: RunContext) -> dict[str, Any]:
    device = ctx.device
    token_task = ConcatTokenTask(config.task)
    layout = token_task.layout
    batch, tokens = token_task.batch_tokens(config.n_test, config.test_seed, 0, Stream.TEST, device)
    test = EvalSet(tokens, batch.y_query, config.d)
    tune = config.task.sample(config.n_tune, config.test_seed, 0, Stream.TUNE, device, torch.float64)
    etas = tune_gd_etas(tune.x_context, tune.y_context, tune.x_query, tune.y_query, 1)
    gd = score(GDPredictor(layout, etas), test)
    common = {"loss_gd": gd.loss, "lr_gd": etas[0], "loss_zero": score(ZeroPredictor(layout), test).loss}

    curves: list[dict[str, Any]] = []
    per_seed: dict[int, dict[str, Any]] = {}
    seeds = [config.seed + i for i in range(config.seeds)]
    for seed in seeds:
        metrics: dict[str, Any] = dict(common)
        for heads in config.heads:
            model = LSAModel(config.model(heads), seed=seed).to(device)
            label = f"softmax, {heads} head{'s' if heads > 1 else ''}"

            def evaluate(m: torch.nn.Module, step: int, seed: int = seed, label: str = label) -> list[dict[str, Any]]:
                rows = scored_rows(step, seed, label, score(m, test), {"gd": gd})
                rows.append({"step": step, "seed": seed, "model": "1 GD step", "metric": "loss", "value": gd.loss})
                return rows

            fingerprint = config_fingerprint(config.task, config.model(heads), config.training)
            state = train(model, token_task, config.training, seed, device=device, evaluate=evaluate,
                          checkpoint_path=ctx.out / "checkpoints" / f"heads{heads}_seed{seed}.pt",
                          fingerprint=fingerprint, progress=ctx.progress, description=f"{label}, seed {seed}")
            curves.extend(state.history)
            trained = score(model, test)
            values = {"loss_trained": trained.loss, "loss_rel_gap_trained_vs_gd": (trained.loss - gd.loss) / gd.loss,
                      **alignment_metrics("", trained, gd)}
            metrics.update({f"{k}_h{heads}": v for k, v in values.items()})
        per_seed[seed] = metrics

    mean = {k: statistics.fmean([m[k] for m in per_seed.values()]) for k in per_seed[seeds[0]]}
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    save_figure(loss_curves_figure(curves, {"zero predictor": common["loss_zero"]}), ctx.out, "loss_curves")
    save_figure(heads_figure(per_seed, config.heads, common), ctx.out, "heads")
    write_metrics(ctx.out, mean, per_seed)
    return mean


def heads_figure(per_seed: dict[int, dict[str, Any]], heads: tuple[int, ...], common: dict[str, Any]) -> "plt.Figure":
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for seed, m in per_seed.items():
        first = seed == min(per_seed)
        axes[0].plot(list(heads), [m[f"loss_trained_h{h}"] for h in heads], "o-", color="C0",
                     label="trained softmax layer" if first else None)
        axes[1].plot(list(heads), [m[f"cos_sensitivity_h{h}"] for h in heads], "o-", color="C0")
    axes[0].axhline(common["loss_gd"], ls="--", color="C1", label="1 GD step")
    axes[0].set(xlabel="heads", ylabel="test loss", xticks=list(heads))
    axes[0].legend(fontsize=7)
    axes[1].set(xlabel="heads", ylabel="sensitivity cosine vs GD", xticks=list(heads), ylim=(-0.05, 1.05))
    fig.tight_layout()
    return fig


STUDY = Study(
    name="softmax-heads",
    summary="one softmax-attention layer with 1, 2, 4 heads vs one GD step (concatenated tokens)",
    default_config=SoftmaxHeadsConfig,
    run=run,
    default_threads=1,
)
