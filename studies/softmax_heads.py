"""Study `softmax-heads`: one softmax-attention layer (1, 2, 4 heads) on the concatenated layout vs one GD step.

The authors note that softmax attention needs at least two heads to match GD: a head's softmax-normalised output
carries a term ∝ the context's mean value that a second head can cancel, leaving the (linearised) GD update.
Trains a single softmax layer per head count on the default regression task and compares it on fixed test
tasks with one GD step (η tuned on held-out tasks): loss and the alignment metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icl_gd.regression.baselines import GDPredictor, ZeroPredictor
from icl_gd.core.config import setting
from icl_gd.regression import metric_names as names
from icl_gd.regression.evaluation import alignment_metrics
from icl_gd.regression.tuning import tune_gd
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.regression.figures import heads_figure, loss_curves_figure
from icl_gd.core.study import RunContext, TrainingWork
from icl_gd.regression.study import (
    EvaluationConfig, HeadsModelConfig, QuickRegressionConfig, RegressionRun, TrainingConfig, parts, regression_work,
    relative_gap,
)
from icl_gd.regression.study_spec import regression_study
from icl_gd.regression.tokens import ConcatTokenTask


@dataclass(frozen=True)
class SoftmaxModelConfig(HeadsModelConfig):
    scaled_logits: bool = setting(False, "divide the logits by sqrt(key size), as the authors' attention does")
    layers = 1  # one softmax layer: the depth TrainingConfig resolves for
    recurrent = False

    def lsa_config(self, layout: Any, heads: int) -> LSAConfig:
        return LSAConfig(d_model=layout.d_model, d_y=layout.d_y, n_heads=heads, softmax=True,
                         scaled_logits=self.scaled_logits, init_scale=self.init_scale)


@dataclass(frozen=True)
class SoftmaxHeadsConfig(QuickRegressionConfig):
    model: SoftmaxModelConfig = parts(SoftmaxModelConfig, "the models")
    training: TrainingConfig = parts(TrainingConfig, "optimisation", steps=3000, batch_size=512, lr=3e-3,
                                     grad_clip=0.0)


def training_work(config: SoftmaxHeadsConfig) -> list[TrainingWork]:
    """What ``run`` trains per seed: one softmax-attention layer per head count, with the resolved settings."""
    task = ConcatTokenTask(config.task.build())
    return [regression_work(f"heads{heads}", task, lambda seed, heads=heads: LSAModel(
        config.model.lsa_config(task.layout, heads), seed=seed), config.train_config())
        for heads in config.model.heads]


def run(config: SoftmaxHeadsConfig, ctx: RunContext) -> dict[str, Any]:
    run = RegressionRun(config, ctx, ConcatTokenTask(config.task.build()))
    tune = run.tune_batch()
    etas = tune_gd(tune.x_context, tune.y_context, tune.x_query, tune.y_query, 1).etas
    gd = run.add_reference("gd", GDPredictor(run.layout, etas), curve="1 GD step")
    common = {names.loss("gd"): gd.loss, "lr_gd": etas[0],
              names.loss("zero"): run.score(ZeroPredictor(run.layout)).loss}
    for heads in config.model.heads:
        label = f"softmax, {config.model.label(heads)}"
        models = run.train_seeds(f"heads{heads}", lambda seed: LSAModel(config.model.lsa_config(run.layout, heads),
                                                                         seed=seed),
                                 lambda m, step, seed: run.eval_rows(step, seed, label, m))
        for seed, model in models.items():
            trained = run.score(model)
            values = {names.loss("trained"): trained.loss,
                      names.rel_gap("trained", "gd"): relative_gap(trained.loss, gd.loss),
                      **alignment_metrics("", trained, gd)}
            run.record(seed, {**common, **{names.with_heads(k, heads): v for k, v in values.items()}})
    return run.finish(lambda mean: [
        ("loss_curves", loss_curves_figure(run.tables["curves"], {"zero predictor": common["loss_zero"]})),
        ("heads", heads_figure(run.per_seed, config.model.heads, {"1 GD step": gd.loss}, cosine=True))])


def paper_config() -> SoftmaxHeadsConfig:
    """The authors' single-layer budget with their softmax: logits / sqrt(key size), 5000 steps of 2048 tasks,
    AdamW 1e-3 (0.9, 0.98), clip 1e-3 (the authors' for one layer), 10 000 test tasks."""
    return SoftmaxHeadsConfig(
        model=SoftmaxModelConfig(scaled_logits=True),
        training=TrainingConfig(steps=5000, batch_size=2048),
        evaluation=EvaluationConfig(n_test=10_000, n_tune=10_000, eval_every=250))


STUDY = regression_study(
    name="softmax-heads",
    summary="one softmax-attention layer with 1, 2, 4 heads vs one GD step (concatenated tokens)",
    default_config=SoftmaxHeadsConfig,
    run=run,
    presets={"paper": paper_config},
    training_work=training_work,
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6"),
)
