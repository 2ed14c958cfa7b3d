"""Study `online-layers` (beyond the papers): fast-weight layers that learn while they read, trained on in-context
linear regression, against the online and batch learners they could be running (docs/online-layers.md).

Trains four single layers with learned projections (``icl_gd.regression.online.learned``) on Gaussian tasks with
label noise, on the query's loss: the delta rule with a learned step size, its pair-normalised form (normalised
LMS's write), its gated form (a learned decay) and the mesa layer with a learned regulariser. Each is compared with
references tuned on held-out tasks (online GD, normalised LMS, ridge, one batch GD step, least squares): loss,
prediction difference, cosine of ∂ŷ/∂x_q, the loss along the line to its construction, the loss after every prefix
(with online GD's and one GD step's population losses) and the order sensitivity (``icl_gd.regression.online.order``).
Writes ``comparison.csv``, ``per_position.csv``, ``order.csv``, ``interpolation.csv``, ``curves.csv``,
``metrics.json`` and four figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from icl_gd.constructions.delta_rule import online_gd_weights
from icl_gd.constructions.mesa import ridge_weights
from icl_gd.core.config import (check_settings, positive_int, require_open_unit, require_positive,
                                require_scale, setting)
from icl_gd.core.study import RunContext, TrainingWork
from icl_gd.regression import metric_names as names
from icl_gd.regression.evaluation import Scored, alignment_metrics
from icl_gd.regression.memory import fast_weight_memory
from icl_gd.regression.metrics import regression_loss
from icl_gd.regression.online.delta_rule import DeltaRuleLayer
from icl_gd.regression.online.interpolation import interpolate_delta_rule, interpolate_mesa
from icl_gd.regression.online.kinds import LayerKind, widths
from icl_gd.regression.online.learned import LearnedDeltaRule, LearnedGatedDeltaRule, LearnedMesa
from icl_gd.regression.online.mesa import MesaLayer
from icl_gd.regression.online.order import order_sensitivity
from icl_gd.regression.online.references import REFERENCE, REFERENCES, loss_per_position, tuned_parameters
from icl_gd.regression.population.online import population_nlms_of_task, population_online_gd_of_task
from icl_gd.regression.population.one_step import population_one_step_gd_of_task
from icl_gd.regression.study import (EvaluationConfig, RegressionConfig, RegressionRun, TrainingConfig, parts,
                                     regression_work, relative_gap)
from icl_gd.regression.study_spec import regression_study
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask

MIXING = (0.0, 0.25, 0.5, 0.75, 1.0)  # the interpolation's α: 0 the trained layer (gauge-fixed), 1 its construction


@dataclass(frozen=True)
class OnlineTaskConfig:
    """y = w·x + ε with x ~ N(0, I_d), w ~ N(0, I_d) and ε ~ N(0, τ²) on every label, N context pairs and a query."""

    d: int = positive_int(5, "input dimension d")
    n_context: int = positive_int(20, "context pairs per task, N")
    label_noise: float = setting(0.5, "std τ of the label noise (τ > 0: ridge and least squares are not exact)")

    def __post_init__(self) -> None:
        check_settings(self)
        self.build()

    def build(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=NormalInputs(),
                                    label_noise=self.label_noise)


@dataclass(frozen=True)
class OnlineLayersModelConfig:
    """The trained layers' initialisation: keys of width d, projections N(0, init_scale² / D)."""

    init_scale: float = setting(1.0, "scale of the initial projections", check=require_scale)
    beta: float = setting(0.1, "initial step size β of the delta rules (> 0)", check=require_positive)
    decay: float = setting(0.95, "initial decay α of the gated delta rule, in (0, 1)", check=require_open_unit)
    lam: float = setting(1.0, "initial regulariser λ of the mesa layer (> 0)", check=require_positive)

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def layers(self) -> int:  # what RegressionConfig.train_config reads: one layer each
        return 1

    @property
    def recurrent(self) -> bool:
        return False


@dataclass(frozen=True)
class OrderConfig:
    """The permutations of the order sensitivity."""

    permutations: int = positive_int(4, "random orders of each test context")
    permutation_seed: int = setting(0, "seed the permutations are drawn from")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class OnlineLayersConfig(RegressionConfig):
    task: OnlineTaskConfig = parts(OnlineTaskConfig, "the tasks")
    model: OnlineLayersModelConfig = parts(OnlineLayersModelConfig, "the trained layers")
    training: TrainingConfig = parts(TrainingConfig, "optimisation (AdamW on the query's loss)", steps=2000,
                                     batch_size=512, lr=3e-3, grad_clip=0.0, warmup=0.05)
    evaluation: EvaluationConfig = parts(EvaluationConfig, "seeds and test sets", n_test=4096, n_tune=4096,
                                         eval_every=500)
    order: OrderConfig = parts(OrderConfig, "order sensitivity")


def full() -> OnlineLayersConfig:
    """The claims' budget: 8000 steps of 1024 tasks, 3 seeds, 10 000 test and tuning tasks."""
    return OnlineLayersConfig(training=TrainingConfig(steps=8000, batch_size=1024, lr=3e-3, grad_clip=0.0,
                                                      warmup=0.05),
                              evaluation=EvaluationConfig(seeds=3, n_test=10_000, n_tune=10_000, eval_every=1000))


# ---------------------------------------------------------------------------------------------------- the layers
# One entry a kind (``LayerKind``); the constructions are icl_gd.constructions', so the table is the study's.
KINDS = (
    LayerKind(name="delta_rule", label="delta rule", algorithm="online_gd",
              trained=lambda m, layout, seed: LearnedDeltaRule(*widths(layout), seed, beta=m.beta,
                                                               init_scale=m.init_scale),
              construction=lambda layout, eta: online_gd_weights(layout.d_x, layout.d_y, eta),
              layer=DeltaRuleLayer, interpolate=interpolate_delta_rule),
    LayerKind(name="delta_rule_nlms", label="delta rule, (k, v)/‖k‖", algorithm="nlms",
              trained=lambda m, layout, seed: LearnedDeltaRule(*widths(layout), seed, "pair", beta=m.beta,
                                                               init_scale=m.init_scale),
              construction=lambda layout, eta: online_gd_weights(layout.d_x, layout.d_y, eta, normalise="pair"),
              layer=DeltaRuleLayer, interpolate=interpolate_delta_rule),
    LayerKind(name="gated_delta_rule", label="gated delta rule", algorithm="online_gd",
              trained=lambda m, layout, seed: LearnedGatedDeltaRule(*widths(layout), seed, beta=m.beta,
                                                                    alpha=m.decay, init_scale=m.init_scale),
              construction=lambda layout, eta: online_gd_weights(layout.d_x, layout.d_y, eta),  # decay 1
              layer=DeltaRuleLayer, interpolate=interpolate_delta_rule),
    LayerKind(name="mesa", label="mesa layer", algorithm="ridge",
              trained=lambda m, layout, seed: LearnedMesa(*widths(layout), seed, lam=m.lam, init_scale=m.init_scale),
              construction=lambda layout, lam: ridge_weights(layout.d_x, layout.d_y, lam),
              layer=MesaLayer, interpolate=interpolate_mesa),
)


def training_work(config: OnlineLayersConfig) -> list[TrainingWork]:
    task = ConcatTokenTask(config.task.build())
    return [regression_work(kind.name, task, lambda seed, kind=kind: kind.trained(config.model, task.layout, seed),
                            config.train_config()) for kind in KINDS]


# ---------------------------------------------------------------------------------------------------- the run
def run(config: OnlineLayersConfig, ctx: RunContext) -> dict[str, Any]:
    task = config.task.build()
    run = RegressionRun(config, ctx, ConcatTokenTask(task))
    layout: ConcatLayout = run.layout
    batch = run.tune_batch()
    tuned = tuned_parameters(batch.x_context, batch.y_context, batch.x_query, batch.y_query)
    references = {r.name: r.predictor(layout, tuned.get(r.name)) for r in REFERENCES}
    for r in REFERENCES:
        run.add_reference(r.name, references[r.name], curve=r.label)
    tokens, targets = run.test.tokens.double(), run.test.targets.double()
    order = config.order
    reference_metrics: dict[str, Any] = {r.parameter: tuned[r.name] for r in REFERENCES if r.parameter is not None}
    reference_positions, reference_order = {}, {}
    for name, predictor in references.items():
        reference_metrics[names.loss(name)] = run.references[name].loss
        reference_order[name] = order_sensitivity(predictor, tokens, order.permutations, order.permutation_seed)
        reference_metrics[names.order_sensitivity(name)] = reference_order[name]
        reference_positions[name] = loss_per_position(predictor, tokens, targets)
    online_population, nlms, one_step = (population_online_gd_of_task(task), population_nlms_of_task(task),
                                         population_one_step_gd_of_task(task))
    reference_metrics.update({"eta_online_gd_population": online_population.eta, "eta_nlms_population": nlms.eta,
                              **{names.loss(f"{k}_population"): p.loss for k, p in
                                 (("online_gd", online_population), ("nlms", nlms), ("gd", one_step))}})
    curves = {"online_gd_population": online_population.loss_per_position(tuned["online_gd"])[1:],
              "nlms_population": nlms.loss_per_position(tuned["nlms"])[1:],
              "gd_population": [population_one_step_gd_of_task(replace(task, n_context=t)).loss_at(tuned["gd"])
                                for t in range(1, task.n_context + 1)]}
    population_rows = [{"model": k, "kind": "population", "position": t + 1, "loss": v}
                       for k, losses in curves.items() for t, v in enumerate(losses)]

    trained: dict[str, dict[int, nn.Module]] = {}
    for kind in KINDS:
        trained[kind.name] = run.train_seeds(
            kind.name, lambda seed, kind=kind: kind.trained(config.model, layout, seed),
            lambda m, step, seed, name=kind.name: run.eval_rows(step, seed, name, m))
    for seed in run.seeds:
        run.record(seed, reference_metrics)
        run.add_rows("per_position", population_rows, seed=seed)
        run.add_rows("per_position", [{"model": name, "kind": "reference", "position": t + 1, "loss": v}
                                      for name, losses in reference_positions.items() for t, v in enumerate(losses)],
                     seed=seed)
        run.add_rows("order", [{"model": name, "kind": "reference", "order_sensitivity": v, "algorithm": "",
                                "ratio_to_algorithm": None} for name, v in reference_order.items()], seed=seed)
        for kind in KINDS:
            model = trained[kind.name][seed].double().eval()
            scored = run.score(model)
            run.record(seed, model_metrics(run, kind, model, scored, tuned, reference_order, tokens, targets, seed))
    return run.finish(lambda mean: figures(run.tables, run.seeds))


def model_metrics(run: RegressionRun, kind: LayerKind, model: nn.Module, scored: Scored, tuned: dict[str, float],
                  reference_order: dict[str, float], tokens: torch.Tensor, targets: torch.Tensor, seed: int
                  ) -> dict[str, Any]:
    """One trained layer's metrics (and its rows of every table): its loss, its gap and alignment to every
    reference, its order sensitivity and ratio to its algorithm's, its loss per position and along the line to
    its construction."""
    config: OnlineLayersConfig = run.config  # type: ignore[assignment]
    name, algorithm = kind.name, kind.algorithm
    metrics: dict[str, Any] = {names.loss(name): scored.loss}
    rows = []
    for ref, ref_scored in run.references.items():
        aligned = alignment_metrics(f"{name}_vs_{ref}_", scored, ref_scored)
        gap = relative_gap(scored.loss, ref_scored.loss)
        metrics.update(aligned)
        metrics[names.rel_gap(name, ref)] = gap
        rows.append({"model": name, "reference": ref, "loss": scored.loss, "loss_reference": ref_scored.loss,
                     "rel_gap": gap, **{k.removeprefix(f"{name}_vs_{ref}_"): v for k, v in aligned.items()}})
    run.add_rows("comparison", rows, seed=seed)
    sensitivity = order_sensitivity(model, tokens, config.order.permutations, config.order.permutation_seed)
    metrics[names.order_sensitivity(name)] = sensitivity
    # a ratio only to an online learner's: a batch learner's (ridge) is round-off, 0 up to 1e-15
    ratio = sensitivity / reference_order[algorithm] if REFERENCE[algorithm].online else None
    if ratio is not None:
        metrics[names.order_log2_ratio(name, algorithm)] = math.log2(ratio)
    run.add_rows("order", [{"model": name, "kind": "trained", "order_sensitivity": sensitivity,
                            "algorithm": algorithm, "ratio_to_algorithm": ratio}], seed=seed)
    positions = loss_per_position(model, tokens, targets)
    run.add_rows("per_position", [{"model": name, "kind": "trained", "position": t + 1, "loss": v}
                                  for t, v in enumerate(positions)], seed=seed)
    constructed = kind.construction(run.layout, tuned[algorithm])
    losses = []
    with torch.no_grad():
        for alpha in MIXING:
            losses.append(regression_loss(kind.between(model, constructed, alpha)(tokens), targets))
    run.add_rows("interpolation", [{"model": name, "construction": algorithm, "alpha": a, "loss": v}
                                   for a, v in zip(MIXING, losses)], seed=seed)
    metrics[f"interpolation_excess_{name}"] = (max(losses) - max(losses[0], losses[-1])) / losses[-1]
    metrics[f"loss_{name}_at_construction"] = losses[-1]
    return metrics


# ---------------------------------------------------------------------------------------------------- figures
def figures(tables: dict[str, list[dict[str, Any]]], seeds: list[int]) -> list[tuple[str, Any]]:
    import pandas as pd

    from icl_gd.core.plotting import plt

    out = []
    positions = pd.DataFrame(tables["per_position"]).groupby(["model", "kind", "position"], sort=False)["loss"].mean()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, kind in enumerate(KINDS):
        part = positions.loc[kind.name, "trained"]
        ax.plot(part.index, part.values, "-", color=f"C{i}", lw=1.8, label=kind.label + " (trained)")
    for j, ref in enumerate(REFERENCES):
        part = positions.loc[ref.name, "reference"]
        ax.plot(part.index, part.values, "--", color=f"C{j + len(KINDS)}", lw=1.2, label=ref.label)
    for name, style, label in (("online_gd_population", "k-", "online GD, population (η tuned)"),
                               ("nlms_population", "k-.", "normalised LMS, population (η tuned)"),
                               ("gd_population", "k:", "one GD step, population (η tuned)")):
        part = positions.loc[name, "population"]
        ax.plot(part.index, part.values, style, lw=0.8, label=label)
    ax.set(xlabel="context tokens t", ylabel="query loss after t tokens", yscale="log",
           title="loss per position in the context")
    # least squares' loss explodes where t = d (the interpolation threshold): the axis stops at 4x the first loss
    ax.set_ylim(top=4 * positions.loc["online_gd_population", "population"].iloc[0])
    ax.legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    out.append(("per_position", fig))

    comparison = pd.DataFrame(tables["comparison"]).groupby(["model", "reference"], sort=False).mean(numeric_only=True)
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.6))
    width = 0.8 / len(REFERENCES)
    for j, ref in enumerate(REFERENCES):
        for ax, column in zip(axes, ("rel_gap", "cos_sensitivity")):
            values = [comparison.loc[(kind.name, ref.name), column] for kind in KINDS]
            ax.bar([i + j * width for i in range(len(KINDS))], values, width, color=f"C{j + len(KINDS)}",
                   label=ref.label)
    for ax, title in zip(axes, ("(L_trained - L_ref) / L_ref", "cosine of ∂ŷ/∂x_q with the reference's")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(KINDS))], [k.label for k in KINDS], fontsize=7)
        ax.set_title(title)
    axes[1].set_ylim(min(0.8, float(comparison["cos_sensitivity"].min()) - 0.02), 1.005)
    axes[0].axhline(0, color="k", lw=0.6)
    axes[0].set_yscale("symlog", linthresh=0.01)
    axes[1].legend(fontsize=6.5, loc="lower left")
    fig.tight_layout()
    out.append(("comparison", fig))

    order = pd.DataFrame(tables["order"]).groupby("model", sort=False)["order_sensitivity"].mean()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    shown = [*KINDS, *REFERENCES]
    ax.bar(range(len(shown)), [order[m.name] for m in shown], color=[f"C{i}" for i in range(len(shown))])
    ax.set_xticks(range(len(shown)), [m.label for m in shown], rotation=35, ha="right", fontsize=7)
    ax.set(ylabel="mean |ŷ(permuted) - ŷ| / mean |ŷ|", title="order sensitivity (batch learners: 0)")
    fig.tight_layout()
    out.append(("order", fig))

    line = pd.DataFrame(tables["interpolation"]).groupby(["model", "alpha"], sort=False)["loss"].mean()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, kind in enumerate(KINDS):
        part = line.loc[kind.name]
        ax.plot(part.index, part.values, "o-", color=f"C{i}", label=f"{kind.label} → {REFERENCE[kind.algorithm].label}")
    ax.set(xlabel="α (0: trained, gauge-fixed; 1: construction)", ylabel="test loss",
           title="from the trained layer to its construction")
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    out.append(("interpolation", fig))
    return out


STUDY = regression_study(
    name="online-layers", summary="beyond the papers: trained delta-rule and mesa layers against online GD, "
                                  "normalised LMS, ridge and batch GD",
    default_config=OnlineLayersConfig, run=run, training_work=training_work, presets={"full": full},
    memory=fast_weight_memory,  # regression_memory sizes LSA stacks; this, fast-weight layers and their references
    headline=("loss_delta_rule", "loss_online_gd", "loss_mesa", "loss_ridge", "loss_gd",
              "order_sensitivity_delta_rule", "order_sensitivity_online_gd"),
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=20", "batch_size=32", "n_test=128", "n_tune=128", "eval_every=10", "n_context=6"),
)
