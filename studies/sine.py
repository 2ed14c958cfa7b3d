"""Study `sine`: non-linear regression through learned features (von Oswald et al. 2023, Prop. 2).

Trains (1) an embedding + MLP on each token's x followed by one LSA layer, and (2) the baseline, a meta-learned
MLP whose read-out takes one GD step on the context, on sine tasks y = a sin(x + φ). Both are compared on fixed
test tasks with the zero predictor and with the Prop. 2 construction on the trained model's own features:
(a) the Prop. 1 layer on m(x) (kernel m(x)ᵀm(x')) and (b) with the kernel the trained layer actually uses,
m(x)ᵀ S m(x') with S the PSD part of its read-out block, both from the trained model's initial read-out W₀ and
with η tuned on held-out tasks. The trained model's query token starts at -W₀ m(x_q) (``initial_readout``).

``--preset paper`` (``architecture=tokens``) is the authors' set-up instead: an embedding + MLP of whole tokens
(y included), one LSA layer, ŷ = minus the last coordinate, against their baseline (the same embedding + MLP
meta-trained under the Prop. 1 layer frozen at η = 0.1) and ours (that baseline with η re-tuned on held-out tasks).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import nn

from icl_gd.constructions.prop2 import (TunedReadout, frozen_gd_baseline, prop2_on_features, psd_part, set_frozen_eta,
                                 trained_readout_kernel, tune_frozen_eta, tuned_readout_eta)
from icl_gd.regression.baselines import ZeroPredictor
from icl_gd.core.config import require_positive, require_positive_ints, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression import metric_names as names
from icl_gd.regression.evaluation import alignment_metrics, relative_prediction_rms
from icl_gd.regression.sine.features import (FeatureLSAModel, FeatureMapConfig, MetaLearnedReadout, embedded_token_lsa_model,
                                   feature_lsa_model)
from icl_gd.core.plotting import legend_outside, plt
from icl_gd.regression.figures import alignment_curves_figure, loss_curves_figure
from icl_gd.regression.sine.tasks import SineTaskConfig, SineTokenTask
from icl_gd.core.study import RunContext, TrainingWork
from icl_gd.regression.study import (
    EvaluationConfig, QuickRegressionConfig, RegressionRun, TrainingConfig, parts, regression_work, relative_gap,
)
from icl_gd.regression.study_spec import MemoryShape, regression_study
from icl_gd.regression.tasks import Stream


@dataclass(frozen=True)
class SineModelConfig:
    architecture: Literal["features", "tokens"] = setting(
        "features", "features: m(x) on each token's x, y kept apart (ours); tokens: the authors' embedding + MLP "
                    "of whole tokens (y included) into d_features, one LSA layer of that width, ŷ = minus the last "
                    "coordinate, baseline = the same with the Prop. 1 layer frozen at baseline_eta")
    d_features: int = setting(40, "width of the feature map m(x) (features: the LSA layer is d_features + 1 wide; "
                                  "tokens: the embedding and LSA width)")
    hidden: int = setting(160, "hidden width of the residual MLP (0: the linear embedding alone)")
    activation: Literal["relu", "gelu", "tanh"] = setting("gelu", "the MLP's non-linearity")
    initial_readout: bool = setting(True, "features: the query starts at -W₀ m(x_q) with W₀ trained (from zero)")
    lsa_init_scale: float = setting(0.2, "features: LSA init variance scale (the authors' 0.002 stalls at ~2.8x "
                                         "the baseline's loss here)")
    init_scale: float = setting(0.002, "tokens: init variance scale / fan_in of the embedding, MLP and LSA layer "
                                       "(the authors')")
    baseline_eta: float = setting(0.1, "tokens: the baseline's frozen Prop. 1 rate η (P = η/N; the authors' 0.1)")
    baseline_init: Literal["model", "authors"] = setting(
        "model", "tokens: the baseline's embedding + MLP init: model (as the trained model's) or authors (their "
                 "baseline's create_weights: plain normals, E and W₁ of variance 0.002/2, W₂ 0.002/40, zero biases)")
    baseline_lr: float | None = setting(None, "learning rate of the baseline's optimiser (none: the training lr)")
    baseline_beta2: float | None = setting(None, "beta2 of the baseline's optimiser (none: the training beta2)")
    layers = 1  # one LSA layer: the depth TrainingConfig resolves for
    recurrent = False

    def __post_init__(self) -> None:
        require_positive("lsa_init_scale", self.lsa_init_scale)
        require_positive("init_scale", self.init_scale)
        require_positive("baseline_eta", self.baseline_eta)
        if self.baseline_init not in ("model", "authors"):
            raise ConfigError(f"baseline_init must be 'model' or 'authors', got {self.baseline_init!r}")
        if self.architecture not in ("features", "tokens"):
            raise ConfigError(f"architecture must be 'features' or 'tokens', got {self.architecture!r}")
        if self.baseline_lr is not None:
            require_positive("baseline_lr", self.baseline_lr)
        if self.baseline_beta2 is not None and not 0 <= self.baseline_beta2 < 1:
            raise ConfigError(f"baseline_beta2 must be in [0, 1), got {self.baseline_beta2!r}")
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


def baseline_training(config: SineConfig) -> Any:
    """The baseline's optimiser settings: the training's, with the baseline's own lr and beta2 where given."""
    training, m = config.train_config(), config.model
    return replace(training, lr=m.baseline_lr or training.lr, beta2=training.beta2 if m.baseline_beta2 is None
                   else m.baseline_beta2)


def lsa_model(config: SineConfig, seed: int) -> FeatureLSAModel:
    """The trained model of ``architecture=features``: MLP features and one LSA layer."""
    m = config.model
    return feature_lsa_model(m.features(), seed=seed, init_scale=m.lsa_init_scale, initial_readout=m.initial_readout)


def meta_model(config: SineConfig, seed: int) -> MetaLearnedReadout:
    """The baseline of ``architecture=features``: the MLP meta-learned under one GD step on its features."""
    return MetaLearnedReadout(config.model.features(), seed=seed)


def tokens_lsa_model(config: SineConfig, seed: int) -> nn.Module:
    """The trained model of ``architecture=tokens``: the authors' embedding + MLP + LSA."""
    m = config.model
    return embedded_token_lsa_model(m.d_features, m.hidden, 2, m.activation, seed, m.init_scale)


def tokens_gd_model(config: SineConfig, seed: int) -> nn.Module:
    """The baseline of ``architecture=tokens``: the same embedding + MLP under the Prop. 1 layer frozen at η."""
    m = config.model
    return frozen_gd_baseline(m.d_features, m.hidden, config.task.n_context, m.baseline_eta, 2, m.activation, seed,
                              m.init_scale, authors_init=m.baseline_init == "authors")


def training_work(config: SineConfig) -> list[TrainingWork]:
    """A seed's two trainings: the model, then its baseline with the baseline's own optimiser settings."""
    task = SineTokenTask(config.task.build())
    tokens = config.model.architecture == "tokens"
    (model_label, model), (baseline_label, baseline) = (
        (("tokens_lsa", tokens_lsa_model), ("tokens_gd", tokens_gd_model)) if tokens
        else (("lsa", lsa_model), ("meta", meta_model)))
    return [regression_work(model_label, task, lambda seed: model(config, seed), config.train_config()),
            regression_work(baseline_label, task, lambda seed: baseline(config, seed), baseline_training(config))]


def run(config: SineConfig, ctx: RunContext) -> dict[str, Any]:
    run = RegressionRun(config, ctx, SineTokenTask(config.task.build()))
    tune = run.tune_tokens()
    loss_zero = run.score(ZeroPredictor(run.layout)).loss
    if config.model.architecture == "tokens":
        return run_tokens(run, config, tune, loss_zero)

    def evaluate_lsa(model: FeatureLSAModel, step: int, seed: int) -> list[dict[str, Any]]:
        own = run.score(prop2_on_features(model, *tune)[0])
        rows = run.eval_rows(step, seed, "mlp+lsa", model, against={"prop2_own_features": own})
        return rows + run.eval_rows(step, seed, "prop2_own_features", own, against={})

    def evaluate_meta(model: MetaLearnedReadout, step: int, seed: int) -> list[dict[str, Any]]:
        return run.eval_rows(step, seed, "meta-learned mlp + 1 GD step", model, against={})

    lsa_models = run.train_seeds("lsa", lambda seed: lsa_model(config, seed), evaluate_lsa)
    baselines = run.train_seeds("meta", lambda seed: meta_model(config, seed), evaluate_meta,
                                training=baseline_training(config))
    for seed in run.seeds:
        metrics, predictors = seed_metrics(run, lsa_models[seed], baselines[seed], tune)
        run.record(seed, {**metrics, names.loss("zero"): loss_zero})
        run.add_rows("functions", predicted_functions(run, predictors), seed=seed)
    return run.finish(lambda mean: figures(run, loss_zero))


def run_tokens(run: RegressionRun, config: SineConfig, tune: tuple[torch.Tensor, torch.Tensor],
               loss_zero: float) -> dict[str, Any]:
    """The authors' architecture: the trained embedding + MLP + LSA model, their baseline (the same embedding + MLP
    meta-trained under the Prop. 1 layer frozen at η = baseline_eta) and ours (that baseline's η re-tuned in
    closed form on held-out tasks)."""
    m, N = config.model, config.task.n_context
    trained_label, frozen_label = "embedding+mlp+lsa", f"embedding+mlp + GD layer (η={m.baseline_eta:g}, frozen)"
    models = run.train_seeds("tokens_lsa", lambda seed: tokens_lsa_model(config, seed),
                             lambda model, step, seed: run.eval_rows(step, seed, trained_label, model, against={}))
    baselines = run.train_seeds("tokens_gd", lambda seed: tokens_gd_model(config, seed),
                                lambda model, step, seed: run.eval_rows(step, seed, frozen_label, model, against={}),
                                training=baseline_training(config))
    for seed in run.seeds:
        model, baseline = models[seed], baselines[seed]
        eta = tune_frozen_eta(baseline, *tune)
        tuned = set_frozen_eta(copy.deepcopy(baseline), N, eta)
        trained, frozen, retuned = run.score(model), run.score(baseline), run.score(tuned)
        run.record(seed, {
            names.loss("trained"): trained.loss, names.loss("meta_learned"): frozen.loss,
            names.loss("meta_learned_tuned_eta"): retuned.loss,
            names.loss("zero"): loss_zero, "eta_meta_learned": m.baseline_eta, "eta_meta_tuned": eta,
            names.rel_gap("trained", "meta"): relative_gap(trained.loss, frozen.loss),
            names.rel_gap("trained", "meta_tuned_eta"): relative_gap(trained.loss, retuned.loss),
            **alignment_metrics(names.vs("meta"), trained, frozen),
            **alignment_metrics(names.vs("meta_tuned"), trained, retuned),
            # Fig. 4 (left): the learned function against the baselines', over the input range
            names.function_rel_rms(names.vs("meta")): relative_prediction_rms(trained, frozen),
            names.function_rel_rms(names.vs("meta_tuned")): relative_prediction_rms(trained, retuned)})
        predictors = {f"{trained_label} (trained)": model, frozen_label: baseline,
                      f"{frozen_label.split(' (')[0]}, η re-tuned": tuned}
        run.add_rows("functions", predicted_functions(run, predictors), seed=seed)

    def figures(mean: dict[str, Any]):
        curves = run.tables["curves"]
        yield "loss_curves", loss_curves_figure([r for r in curves if r["metric"] == "loss"], {
            "zero predictor": loss_zero, "baseline, η re-tuned": mean["loss_meta_learned_tuned_eta"]}, log_y=True)
        yield "functions", functions_figure([r for r in run.tables["functions"] if r["seed"] == run.seeds[0]])
    return run.finish(figures)


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
        names.loss("trained"): trained.loss,
        names.loss("meta_learned"): run.score(baseline).loss,
        names.loss("meta_learned_tuned_eta"): meta_tuned.loss,
        names.loss("prop2_own_features"): own_scored.loss,
        names.loss("prop2_trained_kernel"): kernel_scored.loss,
        names.rel_gap("trained", "meta"): relative_gap(trained.loss, meta_tuned.loss),
        "eta_meta_learned": float(baseline.eta.detach()),
        "eta_meta_tuned": eta_meta,
        "eta_prop2_own_features": eta_own,
        "eta_prop2_trained_kernel": eta_kernel,
        "trained_kernel_negative_mass": lost,
        **alignment_metrics("", trained, kernel_scored),
        **alignment_metrics(names.vs("prop2_own"), trained, own_scored),
        **alignment_metrics(names.vs("meta"), trained, meta_tuned),
        # Fig. 4 (left): the learned function (after the context) against the meta-learned MLP's, over the input range
        names.function_rel_rms(names.vs("meta")): relative_prediction_rms(trained, meta_tuned),
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


def functions_figure(rows) -> "plt.Figure":
    """Predicted functions against the truth, one panel per test task, its context points marked (rows of one
    seed: task, model, x, y, kind = curve | context)."""
    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.6 * len(tasks), 3.0), squeeze=False, sharey=True)
    styles = {"truth": dict(color="black", lw=2, ls="-"), "mlp+lsa (trained)": dict(color="C0", lw=1.5),
              "meta-learned mlp + 1 GD step": dict(color="C1", lw=1.5, ls="--"),
              "prop2 on trained kernel": dict(color="C2", lw=1.0, ls=":")}
    for ax, task in zip(axes.flat, tasks):
        for name, style in styles.items():
            points = [(r["x"], r["y"]) for r in rows if r["task"] == task and r["model"] == name]
            if points:
                ax.plot(*zip(*points), label=name, **style)
        context = [(r["x"], r["y"]) for r in rows if r["task"] == task and r["kind"] == "context"]
        ax.scatter(*zip(*context), color="black", marker="o", s=18, zorder=5, label="context")
        ax.set(title=f"test task {task}", xlabel="input x")
    axes.flat[0].set_ylabel("output y")
    legend_outside(axes.flat[-1])
    fig.suptitle("functions learned in context, against the true sine")
    fig.tight_layout()
    return fig


def paper_config() -> SineConfig:
    """The authors' set-up (non_linear_regression.ipynb): their correlated law; an embedding 2 -> 40 of whole tokens
    (no bias), a residual MLP 40 -> 160 GELU -> 40, one LSA layer (key size 40), ŷ = minus the last coordinate,
    init variance 0.002 / fan_in everywhere; 20 000 steps of 2048 tasks, AdamW 1e-3 (0.9, 0.98), clip 100; the
    baseline with the Prop. 1 layer frozen at η = 0.1, its embedding + MLP initialised as theirs, trained by Adam
    3e-4 (0.9, 0.999), 20 000 steps."""
    return SineConfig(
        task=SineTaskConfig(correlated=True),
        model=SineModelConfig(architecture="tokens", d_features=40, hidden=160, activation="gelu",
                              lsa_init_scale=0.002, init_scale=0.002, baseline_eta=0.1, baseline_init="authors",
                              baseline_lr=3e-4, baseline_beta2=0.999),
        training=TrainingConfig(steps=20_000, batch_size=2048, lr=1e-3, grad_clip=100.0),
        evaluation=EvaluationConfig(n_test=10_000, n_tune=10_000, eval_every=500))


def paper_text_law_config() -> SineConfig:
    """``paper`` with App. A.7's text's law instead of the authors' code's: a ~ U(0.1, 5) and ρ ~ U(0, π)
    independent."""
    paper = paper_config()
    return replace(paper, task=replace(paper.task, correlated=False, amplitude=(0.1, 5.0)))


STUDY = regression_study(
    name="sine",
    summary="MLP features + one LSA layer vs a meta-learned MLP taking one GD step, on sine tasks (Prop. 2)",
    default_config=SineConfig,
    run=run,
    presets={"paper": paper_config, "paper-text-law": paper_text_law_config},
    memory_shape=lambda config: MemoryShape(d=1, heads=1),  # x is a scalar; one head
    training_work=training_work,
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6"),
)
