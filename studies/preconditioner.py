"""Study `preconditioner` (beyond the papers): one trained LSA layer against the closed-form optimum of linear
attention, Γ* = ((1 + 1/N) Λ + ((tr Λ + τ²)/N) I)⁻¹ (Zhang, Frei & Bartlett 2024, Thm 4.1; Ahn et al. 2023, Thm 1).

Trains one LSA layer on Gaussian regression whose inputs have Ahn et al.'s eigenvalues (1, 1, 0.5, 0.25, 1) in a
random basis (d = 5, N = 20), reads the preconditioner Γ it applies off its weights
(``icl_gd.regression.theory.trained``) and scores it on fixed test tasks beside the layer ŷ = x_qᵀ Γ* h, the best
scalar GD step (Γ = η* I, the closed-form η*) and least squares:

- ``metrics.json``: its loss against R(Γ*) and R(η* I) (the excess as a share of the gap Γ* closes), Γ's cosine
  and relative error against Γ* (beside η* I's), R(Γ) of the read-off in closed form and the remainder of the layer
  that is not x_qᵀ Γ h;
- ``shifts.csv``: the trained layer tested under covariate shift (contexts and query from N(0, cΛ)) and at other
  context lengths M, each point beside its closed form ``lsa_risk`` and least squares. At M ≠ N the layer is read
  twice: as trained (it sums over its context, no 1/M: Γ becomes (M/N) Γ) and normalised by 1/M as Zhang, Frei &
  Bartlett's layer is (its context tokens scaled by √(N/M), exact for a layer quadratic in the context).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from icl_gd.core.config import check_settings, require_positive_int, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.plotting import legend_outside, plt
from icl_gd.core.study import RunContext
from icl_gd.regression import metric_names as names
from icl_gd.regression.baselines import GDPredictor, LeastSquaresPredictor
from icl_gd.regression.config import LSAStackConfig, RegressionTaskConfig
from icl_gd.regression.figures import loss_curves_figure
from icl_gd.regression.lsa import LSAModel
from icl_gd.regression.metrics import regression_loss
from icl_gd.regression.study import EvaluationConfig, RegressionConfig, RegressionRun, TrainingConfig, concat_work, parts
from icl_gd.regression.study_spec import regression_study
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.theory.one_layer import (AHN_SPECTRUM, lsa_risk, one_layer_optimum, optimal_preconditioner,
                                                 rotated_covariance)
from icl_gd.regression.theory.trained import PreconditionedStepPredictor, lsa_preconditioner, remainder_loss
from icl_gd.regression.tokens import ConcatTokenTask

TRAINED, NORMALISED = "trained LSA", "trained LSA, normalised by 1/M"
LABELS = {"gamma_star": "Γ* (closed form)", "best_gd": "best GD step η* I", "least_squares": "least squares",
          "zero": "zero predictor"}


def _positive_values(name: str, values: tuple[Any, ...], integer: bool = False) -> None:
    if not values or any(not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0) for v in values) \
            or (integer and any(not isinstance(v, int) for v in values)):
        raise ConfigError(f"{name} must be positive {'integers' if integer else 'numbers'}, got {values!r}")


@dataclass(frozen=True)
class AnisotropicTaskConfig(RegressionTaskConfig):
    """Gaussian in-context regression with inputs N(0, Λ), Λ = Q diag(spectrum) Qᵀ in a seeded random basis."""

    d: int = setting(5, "input dimension; the spectrum's length")
    n_context: int = setting(20, "context pairs per task, N")
    spectrum: tuple[float, ...] = setting(AHN_SPECTRUM, "eigenvalues of the input covariance Λ (Ahn et al.'s)")
    basis_seed: int = setting(2024, "seed of the random basis Q of Λ")

    def __post_init__(self) -> None:
        check_settings(self)
        _positive_values("spectrum", self.spectrum)
        if len(self.spectrum) != self.d:
            raise ConfigError(f"spectrum has {len(self.spectrum)} eigenvalues but d = {self.d}")
        super().__post_init__()

    def covariance(self, scale: float = 1.0) -> torch.Tensor:
        """c Λ (d, d), float64."""
        return scale * rotated_covariance(tuple(float(v) for v in self.spectrum), self.basis_seed)

    def law(self, scale: float = 1.0, n_context: int | None = None) -> LinearRegressionTask:
        """The task with inputs N(0, cΛ) and M = ``n_context`` pairs (None: N)."""
        cov = self.covariance(scale).tolist()
        return LinearRegressionTask(d=self.d, n_context=n_context or self.n_context,
                                    inputs=NormalInputs(covariance=tuple(map(tuple, cov))),
                                    weight_scale=self.weight_scale, label_noise=self.label_noise)

    def build(self) -> LinearRegressionTask:
        return self.law()


@dataclass(frozen=True)
class PreconditionerConfig(RegressionConfig):
    task: AnisotropicTaskConfig = parts(AnisotropicTaskConfig, "the tasks")
    model: LSAStackConfig = parts(LSAStackConfig, "the model")
    training: TrainingConfig = parts(TrainingConfig, "optimisation", steps=4000, batch_size=1024, lr=3e-3,
                                     grad_clip=0.0)
    evaluation: EvaluationConfig = parts(EvaluationConfig, "seeds and test sets", seeds=3, n_test=10_000,
                                         n_tune=1024, eval_every=250)
    covariate_scales: tuple[float, ...] = setting((0.25, 0.5, 1.0, 2.0, 4.0), "c of the covariate shifts: "
                                                  "contexts and query from N(0, cΛ)")
    context_lengths: tuple[int, ...] = setting((5, 10, 20, 50, 100, 200), "test context lengths M")
    n_shift: int = setting(10_000, "test tasks per point of shifts.csv", check=require_positive_int)

    def __post_init__(self) -> None:
        check_settings(self)
        _positive_values("covariate_scales", self.covariate_scales)
        _positive_values("context_lengths", self.context_lengths, integer=True)
        if self.model.layers != 1 or self.model.recurrent:
            raise ConfigError(f"the closed forms are one layer's: layers must be 1, got {self.model.layers}")
        if self.task.train_tasks:
            raise ConfigError(f"the closed forms are for fresh tasks: train_tasks = {self.task.train_tasks}, must be 0")


def _trained_model(config: PreconditionerConfig, layout: Any, seed: int) -> LSAModel:
    return LSAModel(config.model.lsa_config(layout), seed=seed)


def training_work(config: PreconditionerConfig) -> list:
    return concat_work(config, lambda layout, seed: _trained_model(config, layout, seed))


def _normalised(tokens: torch.Tensor, n_train: int) -> torch.Tensor:
    """The context tokens scaled by √(N/M): a layer quadratic in its context then averages with 1/M where it was
    trained to sum N tokens."""
    m = tokens.shape[1] - 1
    scaled = tokens.clone()
    scaled[:, :-1] *= math.sqrt(n_train / m)
    return scaled


def _loss(predictor: Any, tokens: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        return regression_loss(predictor(tokens), targets)


def shift_rows(config: PreconditionerConfig, run: RegressionRun, models: dict[int, LSAModel],
               gammas: dict[int, torch.Tensor]) -> list[dict[str, Any]]:
    """Tidy rows (seed, shift, value, predictor, loss, closed_form) of every covariate scale and context length;
    seed -1: a reference, the same for every seed."""
    task, n = config.task, config.task.n_context
    cov, noise = task.covariance(), task.label_noise
    gamma_star = optimal_preconditioner(cov, n, noise)
    layout = run.layout
    rows: list[dict[str, Any]] = []

    def score(shift: str, value: float, law: LinearRegressionTask, context_cov: torch.Tensor, m: int) -> None:
        batch, tokens = ConcatTokenTask(law).batch_tokens(config.n_shift, config.evaluation.test_seed, 0,
                                                          Stream.TEST, run.device)
        targets = batch.y_query

        def add(seed: int, predictor: str, loss: float, closed: float) -> None:
            rows.append({"shift": shift, "value": value, "seed": seed, "predictor": predictor, "loss": loss,
                         "closed_form": closed})

        def closed(gamma: torch.Tensor) -> float:
            return float(lsa_risk(gamma, context_cov, m, label_noise=noise))

        add(-1, LABELS["gamma_star"], _loss(PreconditionedStepPredictor(gamma_star, layout), tokens, targets),
            closed(gamma_star))
        add(-1, LABELS["zero"], regression_loss(torch.zeros_like(targets), targets),
            0.5 * (float(torch.trace(context_cov)) + noise ** 2))
        add(-1, LABELS["least_squares"], _loss(LeastSquaresPredictor(layout), tokens.double(), targets.double()),
            float("nan"))
        for seed, model in models.items():
            add(seed, TRAINED, _loss(model, tokens, targets), closed(gammas[seed] * m / n))
            add(seed, NORMALISED, _loss(model, _normalised(tokens, n), targets), closed(gammas[seed]))

    for c in config.covariate_scales:
        score("covariate", float(c), task.law(scale=c), cov * c, n)
    for m in config.context_lengths:
        score("length", float(m), task.law(n_context=m), cov, m)
    return rows


def shift_metrics(rows: list[dict[str, Any]], seed: int, largest_scale: float) -> dict[str, float]:
    """A seed's readings of ``shift_rows``: over the covariate scales, the trained layer's largest relative loss gap
    to Γ* on the same test tasks (sign kept); over the context lengths, the normalised layer's; and the trained
    layer's loss over the zero predictor's at the largest scale."""
    def loss(shift: str, value: float, predictor: str, seed_of: int) -> float:
        return next(r["loss"] for r in rows if (r["shift"], r["value"], r["predictor"], r["seed"])
                    == (shift, value, predictor, seed_of))

    def worst(shift: str, predictor: str) -> float:
        values = sorted({r["value"] for r in rows if r["shift"] == shift})
        gaps = [loss(shift, v, predictor, seed) / loss(shift, v, LABELS["gamma_star"], -1) - 1 for v in values]
        return max(gaps, key=abs)

    return {names.shift_worst_gap("covariate", "trained", "gamma_star"): worst("covariate", TRAINED),
            names.shift_worst_gap("length", "trained_normalised", "gamma_star"): worst("length", NORMALISED),
            names.shift_loss_ratio("covariate", largest_scale, "trained", "zero"):
                loss("covariate", largest_scale, TRAINED, seed) / loss("covariate", largest_scale, LABELS["zero"], -1)}


def run(config: PreconditionerConfig, ctx: RunContext) -> dict[str, Any]:
    task = config.task
    run = RegressionRun(config, ctx, ConcatTokenTask(task.build()))
    d, n, noise = task.d, task.n_context, task.label_noise
    if task.weight_scale != 1:
        raise ConfigError("the closed forms take W ~ N(0, I): weight_scale must be 1")
    cov = task.covariance()
    optimum = one_layer_optimum(cov, n, noise)
    gamma_star = optimal_preconditioner(cov, n, noise)
    eye = torch.eye(d, dtype=torch.float64)
    star = run.add_reference("gamma_star", PreconditionedStepPredictor(gamma_star, run.layout),
                             curve=LABELS["gamma_star"])
    best_gd = run.add_reference("best_gd", GDPredictor(run.layout, [optimum.eta]), curve=LABELS["best_gd"])
    ls = run.add_reference("least_squares", LeastSquaresPredictor(run.layout), align=False, curve=None)
    common = {names.loss("gamma_star"): star.loss, names.loss("best_gd"): best_gd.loss,
              names.loss("least_squares"): ls.loss, "risk_gamma_star": optimum.lsa_loss,
              "risk_best_gd": optimum.gd_loss, names.eta("best_gd"): optimum.eta,
              **_preconditioner_metrics("best_gd", optimum.eta * eye, gamma_star)}
    models = run.train_seeds("trained", lambda seed: _trained_model(config, run.layout, seed),
                             lambda m, step, seed: run.eval_rows(step, seed, TRAINED, m))
    gammas = {seed: lsa_preconditioner(model.weights(), d, n) for seed, model in models.items()}
    rows = shift_rows(config, run, models, gammas)
    run.add_rows("shifts", rows)
    for seed, model in models.items():
        gamma, trained = gammas[seed], run.score(model)
        run.record(seed, {
            **common,
            names.loss("trained"): trained.loss,
            "risk_readoff": float(lsa_risk(gamma, cov, n, label_noise=noise)),
            "remainder_loss": remainder_loss(model, gamma, run.layout, run.test.tokens, n),
            **_preconditioner_metrics("trained", gamma, gamma_star),
            **shift_metrics(rows, seed, max(config.covariate_scales)),
            "gamma_readoff": gamma.tolist()})
    return run.finish(lambda mean: [
        ("loss_curves", loss_curves_figure(run.tables["curves"], {"least squares": ls.loss})),
        ("shifts", shifts_figure(run.tables["shifts"])),
        ("preconditioner", preconditioner_figure(gamma_star, optimum.eta, gammas))])


def _preconditioner_metrics(model: str, gamma: torch.Tensor, gamma_star: torch.Tensor) -> dict[str, float]:
    norm = torch.linalg.norm
    return {names.preconditioner_cosine(model): float((gamma * gamma_star).sum() / (norm(gamma) * norm(gamma_star))),
            names.preconditioner_rel_error(model): float(norm(gamma - gamma_star) / norm(gamma_star))}


def shifts_figure(rows: list[dict[str, Any]]) -> Any:
    """Loss against c (covariate shift) and M (context length), log axes: each predictor's measured points and its
    closed form as a line (the mean over seeds of the trained layer's). Least squares is exact on noiseless tasks
    (a loss of round-off) and is drawn only where its loss is above 1e-8."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, shift, label in zip(axes, ("covariate", "length"), ("contexts and query from N(0, cΛ): c",
                                                                 "test context length M")):
        chosen = [r for r in rows if r["shift"] == shift and not (r["predictor"] == LABELS["least_squares"]
                                                                   and r["loss"] < 1e-8)]
        for k, predictor in enumerate(dict.fromkeys(r["predictor"] for r in rows)):
            own = [r for r in chosen if r["predictor"] == predictor]
            if not own:
                continue
            color = f"C{k}"
            ax.scatter([r["value"] for r in own], [r["loss"] for r in own], s=14, color=color, label=predictor)
            by_x: dict[float, list[float]] = {}
            for r in own:
                if math.isfinite(r["closed_form"]):
                    by_x.setdefault(r["value"], []).append(r["closed_form"])
            grid = sorted(by_x)
            ax.plot(grid, [float(np.mean(by_x[x])) for x in grid], color=color, lw=1)
        values = sorted({r["value"] for r in rows if r["shift"] == shift})
        ax.set(xscale="log", yscale="log", xlabel=label, ylabel="test loss ½(ŷ - y)²")
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.minorticks_off()
    legend_outside(axes[1], fontsize=7)
    axes[0].set_title("points: measured; lines: closed form (lsa_risk)", fontsize=9)
    axes[1].set_title("least squares: exact on noiseless tasks (not drawn)", fontsize=9)
    fig.tight_layout()
    return fig


def preconditioner_figure(gamma_star: torch.Tensor, eta: float, gammas: dict[int, torch.Tensor]) -> Any:
    """Γ* beside the first seed's read-off Γ and η* I, on one colour scale."""
    seed = min(gammas)
    panels = [("Γ* (closed form)", gamma_star), (f"trained Γ (seed {seed})", gammas[seed]),
              ("best GD step η* I", eta * torch.eye(gamma_star.shape[0], dtype=torch.float64))]
    bound = max(float(p.abs().max()) for _, p in panels)
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    for ax, (title, matrix) in zip(axes, panels):
        image = ax.imshow(matrix.numpy(), cmap="RdBu_r", vmin=-bound, vmax=bound)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.colorbar(image, ax=axes, shrink=0.8)
    return fig


def full_config() -> PreconditionerConfig:
    """Five seeds of 20 000 steps of 2048 tasks; 10 000 test tasks per shift point."""
    return PreconditionerConfig(training=TrainingConfig(steps=20_000, batch_size=2048, lr=3e-3, grad_clip=0.0),
                                evaluation=EvaluationConfig(seeds=5, n_test=10_000, n_tune=1024, eval_every=1000))


STUDY = regression_study(
    name="preconditioner",
    summary="one trained LSA layer against the closed-form optimum Γ* on anisotropic Gaussian inputs, under "
            "covariate shift and other context lengths (beyond the papers)",
    default_config=PreconditionerConfig,
    run=run,
    presets={"full": full_config},
    training_work=training_work,
    tiny=("steps=12", "batch_size=32", "n_test=128", "n_tune=64", "eval_every=6", "n_shift=64", "seeds=1"),
)
