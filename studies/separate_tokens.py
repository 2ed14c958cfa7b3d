"""Study `separate-tokens`: x and y in separate tokens, a softmax layer then an LSA layer (Prop. 3).

Trains two-layer models (first layer softmax attention with 1, 2 and 4 heads, second layer LSA) on linear
regression in the layout x_1, (0, y_1), ..., x_N, (0, y_N), x_q with concatenated sinusoidal positions, and
compares them on fixed test tasks with one and two GD steps (tuned on held-out tasks) and with the Prop. 3
construction. The copy analysis differentiates the first layer's update at token k with respect to input tokens
k, k+1 and all others (k+1 excluded), averaged over the context inputs x_i; the attention maps show where each
token of the first layer looks. The first entry of ``heads`` gives the un-suffixed metrics; every head count also
gets ``*_h{H}`` metrics. Beside ours, the authors' copy analysis (``copy_authors_*``: norms of the task-mean
gradient of token k's summed output, "others" without k+1; ``..._with_next_bug`` as their code sums it).

``--preset paper`` is the authors' set-up (``layout=authors``): x_i and (0, …, 0, y_i) share the data slots,
standard sinusoidal positions of size 10 concatenated, one head, logits / sqrt(20), ŷ from the query's last
coordinate. The Prop. 3 construction needs the label in a slot of its own, so it is scored in our layout only
(``constructions/prop3.py`` verifies it in the authors' layout with that one change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from icl_gd.constructions.prop3 import prop3_model, score_gap
from icl_gd.regression.baselines import GDPredictor, ZeroPredictor
from icl_gd.core.config import require_positive, require_positive_ints, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression import metric_names as names
from icl_gd.regression.evaluation import alignment_metrics
from icl_gd.regression.tuning import tune_gd
from icl_gd.core.plotting import plt, sns
from icl_gd.regression.figures import heads_figure, loss_curves_figure
from icl_gd.regression.separate.model import (SeparateModelConfig, SeparateTokenModel, authors_copy_analysis,
                                              copy_analysis)
from icl_gd.regression.separate.tokens import (AuthorsSeparateTokenTask, SeparateLayout, SeparateTokenTask,
                                               SinusoidalPositions, StandardPositions)
from icl_gd.core.study import RunContext, TrainingWork
from icl_gd.regression.study import (
    EvaluationConfig, HeadsModelConfig, QuickRegressionConfig, RegressionRun, TrainingConfig, regression_work,
    relative_gap,
)
from icl_gd.regression.study_spec import regression_study

COPY_COLUMNS = ("own", "next", "other", "other_per_token", "own_with_residual")


@dataclass(frozen=True)
class SeparateModelPart(HeadsModelConfig):
    n_frequencies: int | None = setting(None, "frequencies of the cyclic positions (none: N; layout ours)")
    layout: Literal["ours", "authors"] = setting(
        "ours", "ours: tokens [x | y | cyclic positions], ŷ from the query's y slot; authors: x_i and (0,…,0,y_i) "
                "share the data slots, standard sinusoidal positions concatenated, ŷ from the query's last "
                "(positional) coordinate")
    position_size: int = setting(10, "size of the standard sinusoidal positions (layout authors)")
    scaled_logits: bool = setting(False, "divide the softmax layer's logits by sqrt(key size) (the authors')")
    key_size: int | None = setting(None, "key size of the softmax layer (none: the token width; the linear layer's "
                                         "is the token width)")
    layers = 2  # a softmax layer then an LSA layer: the depth TrainingConfig resolves for
    recurrent = False

    def __post_init__(self) -> None:
        super().__post_init__()
        SinusoidalPositions(n_frequencies=self.n_frequencies)
        StandardPositions(self.position_size)
        if self.layout not in ("ours", "authors"):
            raise ConfigError(f"layout must be 'ours' or 'authors', got {self.layout!r}")
        if self.key_size is not None and (not isinstance(self.key_size, int) or self.key_size <= 0):
            raise ConfigError(f"key_size must be a positive integer, got {self.key_size!r}")

    def token_task(self, task: Any) -> Any:
        if self.layout == "authors":
            return AuthorsSeparateTokenTask(task, StandardPositions(self.position_size))
        return SeparateTokenTask(task, SinusoidalPositions(n_frequencies=self.n_frequencies))

    def separate_model(self, heads: int) -> SeparateModelConfig:
        return SeparateModelConfig(n_heads=heads, key_size=self.key_size, init_scale=self.init_scale,
                                   scaled_logits=self.scaled_logits)


@dataclass(frozen=True)
class SeparateTokensConfig(QuickRegressionConfig):
    model: SeparateModelPart = setting(doc="the models", factory=SeparateModelPart)
    n_copy: int = setting(64, "test tasks of the copy analysis and attention maps")
    construction_beta: float = setting(20.0, "inverse temperature β of the Prop. 3 copy layer")

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_copy")
        require_positive("construction_beta", self.construction_beta)


def training_work(config: SeparateTokensConfig) -> list[TrainingWork]:
    """What ``run`` trains per seed: one copy-layer + LSA model per head count, with the resolved settings."""
    task = config.model.token_task(config.task.build())
    return [regression_work(f"heads{heads}", task, lambda seed, heads=heads: SeparateTokenModel(
        task.layout, config.model.separate_model(heads), seed=seed), config.train_config())
        for heads in config.model.heads]


def run(config: SeparateTokensConfig, ctx: RunContext) -> dict[str, Any]:
    run = RegressionRun(config, ctx, config.model.token_task(config.task.build()))
    layout, tune = run.layout, run.tune_batch()
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query)
    eta_1, eta_2 = tune_gd(*args, 1).etas, tune_gd(*args, 2, shared=False).etas
    gd1 = run.add_reference("gd", GDPredictor(layout, eta_1), curve="1 GD step")
    gd2 = run.add_reference("gd_2steps", GDPredictor(layout, eta_2), curve="2 GD steps")
    common = {names.loss("gd"): gd1.loss, names.loss("gd_2steps"): gd2.loss, "lr_gd": eta_1[0],
              "lr_gd_2steps": list(eta_2), names.loss("zero"): run.score(ZeroPredictor(layout)).loss}
    if isinstance(layout, SeparateLayout):  # Prop. 3 needs the label in a slot of its own: our layout, not theirs
        constructed = prop3_model(layout, eta_1[0], config.construction_beta, torch.float32).to(run.device)
        common.update({"loss_prop3_construction": run.score(constructed).loss,
                       "construction_beta": config.construction_beta, "construction_score_gap": score_gap(layout)})
    copy_tokens = run.test.tokens[: config.n_copy]
    first = {}  # heads -> (model, copy analysis) of the first seed, for the figures
    for heads in config.model.heads:
        label = config.model.label(heads)
        models = run.train_seeds(f"heads{heads}", lambda seed: SeparateTokenModel(
            layout, config.model.separate_model(heads), seed=seed),
            lambda m, step, seed: run.eval_rows(step, seed, label, m))
        for seed, model in models.items():
            analysis = copy_analysis(model.copy, copy_tokens)
            first.setdefault(heads, (model, analysis))
            values = {**head_metrics(run, model, analysis), **authors_copy_metrics(model, run.test.tokens)}
            primary = values if heads == config.model.heads[0] else {}
            run.record(seed, {**common, **primary, **{names.with_heads(k, heads): v for k, v in values.items()}})
            run.add_rows("copy_analysis", copy_rows(layout, analysis), seed=seed, heads=heads)
    return run.finish(lambda mean: figures(run, first, copy_tokens, common))


def head_metrics(run: RegressionRun, model: SeparateTokenModel, analysis: Any) -> dict[str, float]:
    gd1, gd2 = run.references["gd"], run.references["gd_2steps"]
    trained, x_pos = run.score(model), run.layout.x_positions
    return {
        names.loss("trained"): trained.loss,
        names.rel_gap("trained", "gd"): relative_gap(trained.loss, gd1.loss),
        names.rel_gap("trained", "gd_2steps"): relative_gap(trained.loss, gd2.loss),
        **{names.copy(name): float(getattr(analysis, name)[x_pos].mean()) for name in COPY_COLUMNS},
        **alignment_metrics("", trained, gd1),
        **alignment_metrics(names.vs("gd_2steps"), trained, gd2),
    }


def authors_copy_metrics(model: SeparateTokenModel, tokens: torch.Tensor) -> dict[str, float]:
    """The authors' copy analysis of the first layer on every test task, as theirs (their definition, "others"
    without k+1; and with it, as their code has it), differentiating the data coordinates only: the authors add
    positions inside the model, so they are no input."""
    a = authors_copy_analysis(model.copy, tokens, model.layout.data_slot)
    return {names.copy_authors("own"): a.own, names.copy_authors("next"): a.next,
            names.copy_authors("other"): a.other, names.copy_authors("other_with_next_bug"): a.other_with_next}


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


def attention_figure(attention: "torch.Tensor", label: str) -> "plt.Figure":
    """Mean attention (token × context token) of a layer, one panel per head; ``attention`` (H, T, N)."""
    H = attention.shape[0]
    fig, axes = plt.subplots(1, H, figsize=(3.6 * H, 3.4), squeeze=False)
    for h, ax in enumerate(axes.flat):
        sns.heatmap(attention[h].cpu().numpy(), ax=ax, cmap="viridis", vmin=0, square=True, cbar=True)
        ax.set(title=f"{label}: head {h + 1}", xlabel="context token s (attended to)", ylabel="token t (attending)")
    fig.suptitle("mean attention weights of the first layer (colour: weight)")
    fig.tight_layout()
    return fig


def gradient_map_figure(norms: "torch.Tensor", label: str) -> "plt.Figure":
    """‖∂u_k/∂e_j‖_F of a layer's update (output token k × input token j), ``norms`` (T, T)."""
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    sns.heatmap(norms.cpu().numpy(), ax=ax, cmap="magma", square=True, cbar=True)
    ax.set(title=f"first-layer gradient norms ‖∂u_k/∂e_j‖ ({label})", xlabel="input token j",
           ylabel="output token k")
    fig.tight_layout()
    return fig


def paper_config() -> SeparateTokensConfig:
    """The authors' set-up (normal_token_construct.ipynb): 21 tokens, standard positions of size 10 concatenated
    (width 20), a softmax layer (logits / sqrt(20)) then a linear layer, one head, ŷ from the last positional
    coordinate; 10 000 steps of 2048 tasks, AdamW 1e-3 (0.9, 0.98), clip 10, init variance 0.01 / fan_in
    (init_scale 0.02 over the model's 2 layers); 10 000 test tasks."""
    return SeparateTokensConfig(
        model=SeparateModelPart(heads=(1,), init_scale=0.02, layout="authors", position_size=10,
                                scaled_logits=True, key_size=20),
        training=TrainingConfig(steps=10_000, batch_size=2048, lr=1e-3, grad_clip=10.0),
        evaluation=EvaluationConfig(n_test=10_000, n_tune=10_000, eval_every=500))


STUDY = regression_study(
    name="separate-tokens",
    summary="separate x/y tokens: softmax copy layer + LSA layer vs one and two GD steps, copy analysis (Prop. 3)",
    default_config=SeparateTokensConfig,
    run=run,
    presets={"paper": paper_config},
    training_work=training_work,
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6", "n_copy=16"),
)
