"""Study `which-algorithm` (beyond the papers): which algorithm does each layer of a deep trained model
run: GD, GD++, preconditioned GD or Iterative Newton?

Trains a K-layer stack (default: 8 tied LSA layers; ``--set recurrent=false`` separate, ``--set block=transformer``
transformer blocks) and, on fixed test contexts with M query points each, compares the prediction read after every
layer k with every algorithm after every step count on a grid, as Fu et al. (2023, arXiv 2310.17086) do: the
similarity of errors (SimE, mean cosine of the error vectors over the queries), the similarity of induced weights
(SimW, mean cosine of the least-squares weights explaining the predictions) and the matched step count (the
"exchange rate": the step count with the highest SimE). The algorithms (``icl_gd.regression.algorithms``):

- ``newton``: Iterative Newton, 0..``newton_steps`` iterations (no parameter).
- ``gd``: GD at one fixed step size, 1/L on the held-out tasks (Fu et al. also fix one step size), on a log grid of
  step counts up to thousands (closed form).
- ``gdpp``: GD++ with one (η, γ) tuned on held-out tasks for K steps, run for 1..``tuned_steps`` steps.
- ``pgd``: preconditioned GD with one P tuned on held-out tasks for K steps (Ahn et al. 2023), 1..``tuned_steps``.

``--set kappa=20`` draws anisotropic inputs (covariance condition number κ), where GD and GD++ part from Newton and
preconditioned GD. Writes ``layers.csv`` (every layer x algorithm x step count), ``metrics.json`` (per algorithm the
matched steps per layer, SimE and SimW there, the loss there) and two figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from icl_gd.core.config import require_positive_int, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.plotting import legend_outside, plt
from icl_gd.core.progress import phased
from icl_gd.core.study import RunContext
from icl_gd.regression import metric_names as names
from icl_gd.regression.algorithms import (AlgorithmRun, Probe, descent_step_size, errors_of, match_layers,
                                          probe_set, run_algorithms, tune_preconditioner)
from icl_gd.regression.conditioning import ConditionedTaskConfig
from icl_gd.regression.study import (EvaluationConfig, RegressionConfig, RegressionRun, TrainingConfig, concat_work,
                                     parts)
from icl_gd.regression.study_spec import MemoryShape, regression_study
from icl_gd.regression.tokens import ConcatTokenTask
from icl_gd.regression.transformer import BlockStackConfig
from icl_gd.regression.tuning import tune_gd, tune_gdpp

ALGORITHMS = ("newton", "gd", "gdpp", "pgd")
LABELS = {"newton": "Iterative Newton", "gd": "GD (fixed 1/L step)", "gdpp": "GD++ (tuned for K)",
          "pgd": "preconditioned GD (tuned for K)"}


def _gd_grid() -> tuple[int, ...]:
    return (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)


@dataclass(frozen=True)
class WhichAlgorithmConfig(RegressionConfig):
    task: ConditionedTaskConfig = parts(ConditionedTaskConfig, "the tasks")
    model: BlockStackConfig = parts(BlockStackConfig, "the model", layers=8, recurrent=True)
    # A short budget (the default run fits in 15 minutes on 2 cores): batches of 512 at lr 1e-3; the authors' clipping.
    training: TrainingConfig = parts(TrainingConfig, "optimisation", steps=3000, batch_size=512, lr=1e-3)
    evaluation: EvaluationConfig = parts(EvaluationConfig, "seeds and test sets", seeds=2, n_test=2000, n_tune=2048,
                                         eval_every=500)
    n_contexts: int = setting(1000, "test contexts of the per-layer comparison", check=require_positive_int)
    n_queries: int = setting(20, "query points per test context (errors and induced weights run over them; ≥ d)",
                             check=require_positive_int)
    newton_steps: int = setting(16, "Iterative Newton: iterations 0..this", check=require_positive_int)
    gd_steps: tuple[int, ...] = setting(_gd_grid(), "GD at the fixed 1/L step: step counts compared")
    tuned_steps: int = setting(16, "GD++ and preconditioned GD (tuned for K steps): run for 1..this steps",
                               check=require_positive_int)

    def __post_init__(self) -> None:
        if self.n_queries < self.task.d:
            raise ConfigError(f"n_queries must be at least d = {self.task.d} (induced weights), got {self.n_queries}")
        if not self.gd_steps or any(not isinstance(k, int) or k <= 0 for k in self.gd_steps):
            raise ConfigError(f"gd_steps must be positive integers, got {self.gd_steps!r}")


def algorithm_runs(probe: Probe, config: WhichAlgorithmConfig, gdpp: Any, pgd: Any, gd_eta: float
                   ) -> dict[str, AlgorithmRun]:
    """Every algorithm's weights at every step count of the config's grids."""
    return run_algorithms(probe, gdpp, pgd, gd_eta, config.newton_steps, config.gd_steps, config.tuned_steps)


@phased("reading the trained model per layer")
def model_per_layer(model: nn.Module, probe: Probe, layout: Any, chunk: int = 4000) -> torch.Tensor:
    """The model's predictions after each layer on the probe's queries, (K, B, M, d_y) float64."""
    B, M, _ = probe.queries.shape
    tokens = probe.tokens(layout, next(model.parameters()).dtype)
    per_chunk = []
    with torch.no_grad():
        for part in tokens.split(chunk):
            _, states = model(part, return_tokens=True)
            per_chunk.append(torch.stack([layout.prediction(s) for s in states[1:]]))
    return torch.cat(per_chunk, dim=1).double().reshape(len(per_chunk[0]), B, M, layout.d_y)


def compare_layers(predictions: torch.Tensor, probe: Probe, runs: dict[str, AlgorithmRun]
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``match_layers``'s per-seed metrics and rows, with the best algorithm per layer other than GD++, its margin
    over GD++ and the scalars the claims read (``growth_summaries``)."""
    metrics, rows = match_layers(predictions, probe, runs)
    sim_at_match = {name: metrics[f"sim_errors_{name}"] for name in runs}
    K = len(predictions)
    others = [n for n in runs if n != "gdpp"]
    best = [max(others, key=lambda n: sim_at_match[n][j]) for j in range(K)]
    metrics["best_algorithm_per_layer"] = ",".join(best)
    metrics["sim_errors_best"] = [sim_at_match[n][j] for j, n in enumerate(best)]
    metrics["sim_errors_margin_over_gdpp"] = [sim_at_match[n][j] - sim_at_match["gdpp"][j] for j, n in enumerate(best)]
    metrics.update(growth_summaries(metrics, K))
    return metrics, rows


def growth_summaries(metrics: dict[str, Any], K: int) -> dict[str, float | None]:
    """Scalars the claims read: the largest per-layer increase of matched Newton iterations, matched GD steps at
    the last layer over those at layer K/2, the smallest SimE margin of the best algorithm over GD++ at layers
    k ≥ 4, and SimE(preconditioned GD) - SimE(GD) at the last layer (None where K is too shallow)."""
    newton, gd = metrics.get("matched_steps_newton"), metrics.get("matched_steps_gd")
    pgd, margin = metrics.get("sim_errors_pgd"), metrics["sim_errors_margin_over_gdpp"]
    return {
        names.NEWTON_LARGEST_INCREMENT: (float(max(b - a for a, b in zip(newton, newton[1:])))
                                     if newton and K > 1 else None),
        names.GD_LAST_OVER_HALF: gd[-1] / gd[K // 2 - 1] if gd and K > 1 else None,
        names.SIM_ERRORS_MARGIN_FROM_LAYER4: min(margin[3:]) if K >= 4 else None,
        names.SIM_ERRORS_PGD_MINUS_GD_LAST: pgd[-1] - metrics["sim_errors_gd"][-1] if pgd and gd else None,
    }


def run(config: WhichAlgorithmConfig, ctx: RunContext) -> dict[str, Any]:
    task = config.task.build()
    run = RegressionRun(config, ctx, ConcatTokenTask(task))
    K, layout = config.model.layers, run.layout
    tune = run.tune_batch()
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, K)
    gd_k = tune_gd(*args, shared=True)
    # One (η, γ) and one P for every step, tuned for the model's K steps: the families then run for 1..tuned_steps
    # steps with them, as GD runs at its fixed step size (tuning each step count would cost minutes per count).
    # One L-BFGS start (γ = 0.25 / λ̄) besides tuned GD itself, 60 iterations: the full tuner's three starts took
    # over ten minutes at K = 8 on the loaded 2-core machine; the stability guard is kept.
    gdpp = tune_gdpp(*args, shared=True, start=gd_k, gamma_starts=(0.25,), max_iter=60)
    pgd = tune_preconditioner(*args, eta=gd_k.etas[0])
    gd_eta = descent_step_size(tune.x_context)
    probe = probe_set(task, config.n_contexts, config.n_queries, config.evaluation.test_seed, run.device)
    runs = algorithm_runs(probe, config, gdpp, pgd, gd_eta)
    common = {"gd_fixed_eta": gd_eta, "gdpp_eta": gdpp.etas[0], "gdpp_gamma": gdpp.gammas[0],
              "gd_tuned_eta": gd_k.etas[0], "pgd_eigenvalues": torch.linalg.eigvalsh(pgd.P).tolist(),
              "loss_least_squares": _least_squares_loss(probe)}

    def model(seed: int) -> nn.Module:
        return config.model.build(layout, seed)

    models = run.train_seeds("trained", model, lambda m, step, seed: run.eval_rows(step, seed, "trained", m),
                             batched=config.model.block == "lsa" and len(run.seeds) > 1)
    for seed, trained in models.items():
        metrics, rows = compare_layers(model_per_layer(trained, probe, layout), probe, runs)
        run.record(seed, {**metrics, **common})
        run.add_rows("layers", rows, seed=seed)
    return run.finish(lambda mean: [("matched_steps", matched_steps_figure(run.per_seed, K)),
                                    ("loss_per_layer", loss_per_layer_figure(run.per_seed, K))])


def _least_squares_loss(probe: Probe) -> float:
    """The probe loss of minimum-norm least squares (the limit Newton converges to)."""
    W = (torch.linalg.pinv(probe.x) @ probe.y).transpose(1, 2)
    return 0.5 * float((errors_of(W, probe) ** 2).sum(-1).mean())


# ---------------------------------------------------------------------------------------------------- figures
def _mean_and_range(per_seed: dict[int, dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    values = np.array([m[key] for m in per_seed.values()], dtype=float)  # (seeds, K)
    return values.mean(0), values.min(0), values.max(0)


def matched_steps_figure(per_seed: dict[int, dict[str, Any]], K: int) -> "plt.Figure":
    """Layer against the matched step count of every algorithm (mean over seeds, bars: min..max)."""
    layers = np.arange(1, K + 1)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, name in enumerate(ALGORITHMS):
        mean, low, high = _mean_and_range(per_seed, f"matched_steps_{name}")
        ax.errorbar(layers, mean, yerr=[mean - low, high - mean], fmt="o-", color=f"C{i + 1}", capsize=2,
                    label=LABELS[name])
    ax.set_yscale("symlog", linthresh=1.0)  # log above 1; Newton's iteration 0 can be a match
    ax.set(xlabel="layer k", ylabel="matched steps (max SimE)", xticks=layers,
           title="steps of each algorithm that best match layer k")
    legend_outside(ax)
    return fig


def loss_per_layer_figure(per_seed: dict[int, dict[str, Any]], K: int) -> "plt.Figure":
    """Loss after each layer (every seed) and each algorithm's loss at its matched step count (mean over seeds)."""
    layers = np.arange(1, K + 1)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for j, m in enumerate(per_seed.values()):
        ax.plot(layers, m["loss_trained_per_layer"], "o-", color="C0", lw=2, alpha=0.7,
                label="trained (per seed)" if j == 0 else None)
    for i, name in enumerate(ALGORITHMS):
        mean, _, _ = _mean_and_range(per_seed, f"loss_{name}_matched")
        ax.plot(layers, mean, "s--", color=f"C{i + 1}", alpha=0.8, label=f"{LABELS[name]} at matched steps")
    ax.set(yscale="log", xlabel="layer k", ylabel="loss on the probe queries, ½·MSE", xticks=layers,
           title="loss after layer k, beside each algorithm at its matched steps")
    legend_outside(ax)
    return fig


STUDY = regression_study(
    name="which-algorithm", summary="beyond the papers: GD, GD++, preconditioned GD or Newton, layer by layer",
    default_config=WhichAlgorithmConfig, run=run, training_work=lambda config: concat_work(config, config.model.build),
    memory_shape=lambda config: MemoryShape(d=config.task.d, heads=config.model.heads,
                                            batched_seeds=config.model.block == "lsa"),  # LSA: one batched model
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=256", "eval_every=6", "n_contexts=20", "n_queries=10",
          "newton_steps=3", "gd_steps=1,2", "tuned_steps=2"),
)

__all__ = ["STUDY", "WhichAlgorithmConfig", "compare_layers"]
