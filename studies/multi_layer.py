"""Study `multi-layer`: K-layer LSA models against K steps of GD and of GD++ (von Oswald et al. 2023, §4).

Trains K-layer LSA models (``--set layers=K``, tied with ``--set recurrent=true``) on fresh regression tasks,
all seeds as one batched model (``icl_gd.ensemble``), with the authors' settings for the depth. On a fixed test
set it compares them with GD and GD++ whose parameters were tuned on separate held-out tasks (one (η, γ) for a
recurrent model, per-step (η_k, γ_k) otherwise): per-layer losses, alignment with both over training, the
effective (η_k, γ_k) read off each trained layer, OOD sweeps, and (recurrent models) the trained layer applied
far past its training depth, with damping, against GD and GD++ run as long.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import torch

from constructions.gdpp import gdpp_model
from icl_gd.baselines import GDPredictor, ZeroPredictor
from icl_gd.config import require_positive, require_positive_ints
from icl_gd.ensemble import train_ensemble
from icl_gd.errors import ConfigError
from icl_gd.evaluation import EvalSet, Scored, alignment_metrics, score, scored_rows
from icl_gd.gdpp import GDPPParams, GDPPPredictor, gdpp_params_from_weights, tune_gd, tune_gdpp
from icl_gd.lsa import LSAConfig, LSAModel
from icl_gd.metrics import regression_loss
from icl_gd.ood import default_sweeps, evaluate_sweeps
from icl_gd.plotting import alignment_curves_figure, loss_curves_figure, ood_figure, save_figure
from icl_gd.results import mean_over_seeds, write_csv, write_json, write_metrics
from icl_gd.tasks import LinearRegressionTask, Stream, UniformInputs
from icl_gd.tokens import ConcatLayout, ConcatTokenTask
from icl_gd.training import TrainConfig, authors_train_config, config_fingerprint, train

from icl_gd.study import RunContext, Study


@dataclass(frozen=True)
class MultiLayerConfig:
    """Every setting of the study (``--set KEY=VALUE``). ``steps``, ``lr`` and ``grad_clip`` left at None take
    the authors' values for the depth (PROTOCOL §1); ``input_range`` is the width r of U(-r/2, r/2);
    ``compile`` runs the training step through ``torch.compile`` (see ``TrainConfig``)."""

    d: int = 10
    n_context: int = 10
    input_range: float = 1.0
    weight_scale: float = 1.0
    label_noise: float = 0.0
    layers: int = 2
    recurrent: bool = False
    steps: int | None = None
    batch_size: int = 2048
    lr: float | None = None
    grad_clip: float | None = None
    eval_every: int = 100
    checkpoint_every: int = 1000
    seed: int = 0
    seeds: int = 3
    batched_seeds: bool = True
    test_seed: int = 2023
    n_test: int = 10_000
    n_tune: int = 10_000
    n_ood: int = 2_000
    max_applications: int = 50
    dampings: tuple[float, ...] = (1.0, 0.75, 0.5)
    compile: bool = False

    def __post_init__(self) -> None:
        require_positive_ints(
            self, "d", "n_context", "layers", "batch_size", "eval_every", "checkpoint_every", "seeds", "n_test", "n_tune",
            "n_ood", "max_applications")
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps <= 0):
            raise ConfigError(f"steps must be a positive integer, got {self.steps!r}")
        for name in ("input_range", "weight_scale"):
            require_positive(name, getattr(self, name))
        for name in ("lr", "grad_clip"):
            if getattr(self, name) is not None:
                require_positive(name, getattr(self, name))
        if self.label_noise < 0:
            raise ConfigError(f"label_noise must be non-negative, got {self.label_noise!r}")
        if self.seed < 0 or self.test_seed < 0:
            raise ConfigError(f"seeds must be non-negative, got seed={self.seed}, test_seed={self.test_seed}")
        if not self.dampings or any(not 0 < g <= 1 for g in self.dampings):
            raise ConfigError(f"dampings must be values in (0, 1], got {self.dampings!r}")

    @property
    def task(self) -> LinearRegressionTask:
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=UniformInputs(self.input_range),
                                    weight_scale=self.weight_scale, label_noise=self.label_noise)

    @property
    def model(self) -> LSAConfig:
        return LSAConfig(d_model=self.d + 1, n_layers=self.layers, recurrent=self.recurrent,
                         clip_activations=10.0 if self.layers > 3 else None)

    @property
    def training(self) -> TrainConfig:
        overrides: dict[str, Any] = {"batch_size": self.batch_size, "eval_every": self.eval_every,
                                     "checkpoint_every": self.checkpoint_every, "compile": self.compile}
        for name in ("steps", "lr", "grad_clip"):
            if getattr(self, name) is not None:
                overrides[name] = getattr(self, name)
        return authors_train_config(self.layers, self.recurrent, **overrides)

    @property
    def shared_steps(self) -> bool:
        """One (η, γ) for every step when the model has one weight set."""
        return self.recurrent or self.layers == 1


@dataclass(frozen=True)
class References:
    """GD and GD++ tuned on held-out tasks, and their scores on the test set."""

    gd: GDPPParams
    gdpp: GDPPParams
    gd_scored: Scored
    gdpp_scored: Scored


def tune_references(config: MultiLayerConfig, test: EvalSet, device: torch.device) -> References:
    """Tune GD and GD++ on Stream.TUNE tasks (never the test tasks), K steps, shared or per step."""
    tune = config.task.sample(config.n_tune, config.test_seed, 0, Stream.TUNE, device, torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, config.layers)
    gd = tune_gd(*args, shared=config.shared_steps)
    gdpp = tune_gdpp(*args, shared=config.shared_steps, start=gd)
    layout = ConcatTokenTask(config.task).layout
    return References(gd, gdpp, score(GDPredictor(layout, gd.etas), test),
                      score(GDPPPredictor(layout, gdpp), test))


def per_step_losses(params: GDPPParams, test: EvalSet, layout: ConcatLayout) -> list[float]:
    """Test loss after each of the K steps (step 1 first), computed in float64 like every reference."""
    preds = GDPPPredictor(layout, params).predictions_per_step(test.tokens.double())
    return [regression_loss(p, test.targets.double()) for p in preds[1:]]


def per_layer_losses(model: LSAModel, test: EvalSet) -> list[float]:
    """Test loss of the prediction read after each layer (layer 1 first)."""
    with torch.no_grad():
        _, states = model(test.tokens, return_tokens=True)
    d_y = model.config.d_y
    return [regression_loss(-s[:, -1, -d_y:], test.targets) for s in states[1:]]


def run(config: MultiLayerConfig, ctx: RunContext) -> dict[str, Any]:
    device, d, N, K = ctx.device, config.d, config.n_context, config.layers
    token_task = ConcatTokenTask(config.task)
    layout = token_task.layout
    batch, tokens = token_task.batch_tokens(config.n_test, config.test_seed, 0, Stream.TEST, device)
    test = EvalSet(tokens, batch.y_query, d)
    refs = tune_references(config, test, device)
    references = {"gd": refs.gd_scored, "gdpp": refs.gdpp_scored}
    loss_zero = score(ZeroPredictor(layout), test).loss
    gdpp_constructed = gdpp_model(d, 1, N, refs.gdpp.etas, refs.gdpp.gammas, recurrent=config.shared_steps,
                                  dtype=torch.float32).to(device)

    seeds = [config.seed + i for i in range(config.seeds)]
    models = [LSAModel(config.model, seed=seed).to(device) for seed in seeds]
    untrained = [LSAModel(config.model, seed=seed).to(device) for seed in seeds]

    def evaluate(m: torch.nn.Module, step: int, seed: int) -> list[dict[str, Any]]:
        rows = scored_rows(step, seed, "trained", score(m, test), references)
        for name, s in (("gd", refs.gd_scored), ("gdpp", refs.gdpp_scored)):
            rows.append({"step": step, "seed": seed, "model": name, "metric": "loss", "value": s.loss})
        return rows

    fingerprint = config_fingerprint(config.task, config.model, config.training, seeds)
    if config.batched_seeds:
        states = train_ensemble(models, token_task, config.training, seeds, device=device, evaluate=evaluate,
                                checkpoint_path=ctx.out / "checkpoints" / "seeds.pt", fingerprint=fingerprint,
                                progress=ctx.progress, description=f"K={K} x{len(seeds)} seeds")
    else:
        states = [train(m, token_task, config.training, seed, device=device,
                        evaluate=lambda m, step, seed=seed: evaluate(m, step, seed),
                        checkpoint_path=ctx.out / "checkpoints" / f"seed{seed}.pt", fingerprint=fingerprint,
                        progress=ctx.progress, description=f"K={K} seed {seed}") for m, seed in zip(models, seeds)]
    curves = [row for state in states for row in state.history]

    gd_per_step, gdpp_per_step = per_step_losses(refs.gd, test, layout), per_step_losses(refs.gdpp, test, layout)
    per_seed: dict[int, dict[str, Any]] = {}
    ood_rows: list[dict[str, Any]] = []
    depth_rows: list[dict[str, Any]] = []
    depth_refs = depth_reference_rows(config, refs, test) if config.recurrent else []
    for seed, model, init in zip(seeds, models, untrained):
        trained = score(model, test)
        effective = [gdpp_params_from_weights(w, d, 1, N) for w in model.weights()]
        read_off = GDPPParams(tuple(e for e, _ in effective) * (K if config.recurrent else 1),
                              tuple(g for _, g in effective) * (K if config.recurrent else 1))
        m: dict[str, Any] = {
            "loss_trained": trained.loss,
            "loss_gd": refs.gd_scored.loss,
            "loss_gdpp": refs.gdpp_scored.loss,
            "loss_gdpp_constructed": score(gdpp_constructed, test).loss,
            "loss_zero": loss_zero,
            "loss_trained_per_layer": per_layer_losses(model, test),
            "loss_gd_per_step": gd_per_step,
            "loss_gdpp_per_step": gdpp_per_step,
            "loss_rel_gap_trained_vs_gd": (trained.loss - refs.gd_scored.loss) / refs.gd_scored.loss,
            "loss_rel_gap_trained_vs_gdpp": (trained.loss - refs.gdpp_scored.loss) / refs.gdpp_scored.loss,
            "gd_eta": _scalar_if_shared(refs.gd.etas, config.shared_steps),
            "gdpp_eta": _scalar_if_shared(refs.gdpp.etas, config.shared_steps),
            "gdpp_gamma": _scalar_if_shared(refs.gdpp.gammas, config.shared_steps),
            "trained_eta": _scalar_if_shared([e for e, _ in effective], config.recurrent),
            "trained_gamma": _scalar_if_shared([g for _, g in effective], config.recurrent),
            # GD++ run with the (η, γ) read off the trained layers: splits the gap to tuned GD++ into "which
            # (η, γ) training settled on" and "how far the rest of the weights are from a GD++ layer".
            "loss_gdpp_at_trained_params": score(GDPPPredictor(layout, read_off), test).loss,
        }
        m.update(_suffixed(trained, refs.gd_scored, "_gd"))
        m.update(_suffixed(trained, refs.gdpp_scored, "_gdpp"))
        m.update(_suffixed(score(init, test), refs.gdpp_scored, "_gdpp", prefix="untrained_"))
        m.update(_suffixed(refs.gd_scored, refs.gdpp_scored, "_gdpp", prefix="gd_"))
        m.update(alignment_peak(curves, seed))
        per_seed[seed] = m

        predictors = {"trained": model, "gd": GDPredictor(layout, refs.gd.etas),
                      "gdpp": GDPPPredictor(layout, refs.gdpp)}
        for row in evaluate_sweeps(config.task, predictors, default_sweeps(N), config.n_ood, config.test_seed, device):
            ood_rows.append({"seed": seed, **row})
        if config.recurrent:
            depth_rows += [{"seed": seed, **row} for row in trained_depth_rows(config, model, test) + depth_refs]

    mean = mean_over_seeds(per_seed)
    mean["seeds"] = seeds
    write_csv(ctx.out / "curves.csv", curves, ["step", "seed", "model", "metric", "value"])
    write_csv(ctx.out / "ood.csv", ood_rows, ["seed", "sweep", "value", "model", "loss"])
    if depth_rows:
        write_csv(ctx.out / "depth.csv", depth_rows, ["seed", "damping", "applications", "model", "loss"])
    write_json(ctx.out / "weights.json", {seed: [dataclasses.asdict(w) for w in model.weights()]
                                          for seed, model in zip(seeds, models)})
    draw_figures(ctx, config, curves, ood_rows, depth_rows, per_seed, mean)
    write_metrics(ctx.out, mean, per_seed)
    return mean


def depth_reference_rows(config: MultiLayerConfig, refs: References, test: EvalSet) -> list[dict[str, Any]]:
    """GD and GD++ with damping λ (λη, λγ) run n = 1..max_applications steps: rows {damping, applications,
    model, loss}. They do not depend on the training seed, so they are computed once."""
    layout, n_max, tokens = ConcatLayout(config.d), config.max_applications, test.tokens.double()
    eta_gd, eta, gamma = refs.gd.etas[0], refs.gdpp.etas[0], refs.gdpp.gammas[0]
    rows = []
    for damping in config.dampings:
        gd = GDPPParams((damping * eta_gd,) * n_max, (0.0,) * n_max)
        gdpp = GDPPParams((damping * eta,) * n_max, (damping * gamma,) * n_max)
        curves = {name: GDPPPredictor(layout, params).predictions_per_step(tokens)[1:]
                  for name, params in (("gd", gd), ("gdpp", gdpp))}
        rows += _depth_rows(curves, test, damping)
    return rows


def trained_depth_rows(config: MultiLayerConfig, model: LSAModel, test: EvalSet) -> list[dict[str, Any]]:
    """The trained recurrent layer applied n = 1..max_applications times with damping λ (its update scaled by
    λ): rows {damping, applications, model, loss}."""
    rows = []
    for damping in config.dampings:
        damped = LSAModel(dataclasses.replace(config.model, damping=damping, clip_activations=None))
        damped = damped.to(test.tokens.device).load_weights(model.weights())
        with torch.no_grad():
            _, states = damped(test.tokens, return_tokens=True, n_applications=config.max_applications)
        rows += _depth_rows({"trained": [-s[:, -1, -1:] for s in states[1:]]}, test, damping)
    return rows


def _depth_rows(curves: dict[str, Any], test: EvalSet, damping: float) -> list[dict[str, Any]]:
    rows = []
    for name, preds in curves.items():
        for n, pred in enumerate(preds, start=1):
            loss = regression_loss(pred, test.targets)
            rows.append({"damping": damping, "applications": n, "model": name,
                         "loss": loss if loss == loss else float("inf")})  # NaN only after overflow
    return rows


def alignment_peak(curves: list[dict[str, Any]], seed: int) -> dict[str, float]:
    """The highest sensitivity cosine against GD over training and the step it was reached (the model aligns
    with GD first, then moves on to GD++), and the cosine against GD++ at that step."""
    rows = [r for r in curves if r["seed"] == seed and r["model"] == "trained"]
    vs_gd = {r["step"]: r["value"] for r in rows if r["metric"] == "cos_sensitivity_vs_gd"}
    vs_gdpp = {r["step"]: r["value"] for r in rows if r["metric"] == "cos_sensitivity_vs_gdpp"}
    step = max(vs_gd, key=lambda k: (vs_gd[k], -k))
    return {"cos_sensitivity_gd_peak": vs_gd[step], "cos_sensitivity_gd_peak_step": float(step),
            "cos_sensitivity_gdpp_at_gd_peak": vs_gdpp[step]}


def _suffixed(scored: Scored, reference: Scored, suffix: str, prefix: str = "") -> dict[str, float]:
    return {f"{prefix}{k}{suffix}": v for k, v in alignment_metrics("", scored, reference).items()}


def _scalar_if_shared(values, shared: bool) -> Any:
    values = [float(v) for v in values]
    return values[0] if shared else values


# ---------------------------------------------------------------------------------------------------- figures
def draw_figures(ctx: RunContext, config: MultiLayerConfig, curves, ood_rows, depth_rows, per_seed, mean) -> None:
    K = config.layers
    save_figure(loss_curves_figure(curves, {"zero predictor": mean["loss_zero"]}), ctx.out, "loss_curves")
    for ref in ("gd", "gdpp"):
        save_figure(alignment_curves_figure([r for r in curves if r["model"] == "trained"], reference=ref),
                    ctx.out, f"alignment_vs_{ref}")
    save_figure(ood_figure(ood_rows), ctx.out, "ood")

    import pandas as pd
    import seaborn as sns

    df = pd.DataFrame([r for r in curves if r["model"] == "trained" and r["metric"].startswith("cos_sensitivity")])
    df["reference"] = df.metric.str.replace("cos_sensitivity_vs_", "", regex=False)
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    sns.lineplot(data=df, x="step", y="value", hue="reference", errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="training step", ylabel="sensitivity cosine of the trained model", ylim=(0.8, 1.005))
    save_figure(fig, ctx.out, "cosine_gd_then_gdpp")

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    layers = list(range(1, K + 1))
    for seed, m in per_seed.items():
        ax.plot(layers, m["loss_trained_per_layer"], "o-", color="C0", alpha=0.6,
                label="trained (per seed)" if seed == config.seed else None)
    ax.plot(layers, mean["loss_gd_per_step"], "s--", color="C1", label=f"GD ({K} steps, tuned)")
    ax.plot(layers, mean["loss_gdpp_per_step"], "^--", color="C2", label=f"GD++ ({K} steps, tuned)")
    ax.set(yscale="log", xlabel="layer / step", ylabel="test loss", xticks=layers,
           title=f"K={K} {'recurrent' if config.recurrent else 'separate layers'}")
    ax.legend(fontsize=7)
    save_figure(fig, ctx.out, "per_layer_loss")

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    n_distinct = 1 if config.recurrent else K
    for ax, key, ref in ((axes[0], "trained_eta", "gdpp_eta"), (axes[1], "trained_gamma", "gdpp_gamma")):
        xs = list(range(1, n_distinct + 1))
        for seed, m in per_seed.items():
            ax.plot(xs, _as_list(m[key]), "o", color="C0", alpha=0.6,
                    label="trained (read off weights)" if seed == config.seed else None)
        ax.plot(xs, _as_list(mean[ref])[:n_distinct], "x", ms=10, color="C2", label="GD++ tuned")
        ax.set(xlabel="layer", ylabel=key.split("_")[1], xticks=xs)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, ctx.out, "effective_params")

    if depth_rows:
        df = pd.DataFrame(depth_rows)
        df = df[df.loss < 1e6]  # overflowed runs are in depth.csv; the figure shows the finite part
        fig, axes = plt.subplots(1, len(config.dampings), figsize=(4.2 * len(config.dampings), 3.3), squeeze=False)
        for ax, damping in zip(axes.flat, config.dampings):
            sns.lineplot(data=df[df.damping == damping], x="applications", y="loss", hue="model", style="model",
                         errorbar=("pi", 100), ax=ax)
            ax.axvline(K, color="grey", lw=0.8, ls=":")
            ax.set(yscale="log", title=f"damping {damping}", xlabel="layer applications / steps")
        fig.tight_layout()
        save_figure(fig, ctx.out, "past_training_depth")


def _as_list(value) -> list[float]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


STUDY = Study(
    name="multi-layer",
    summary="K-layer LSA (tied or not) vs K steps of tuned GD and GD++: per-layer loss, alignment, OOD, depth",
    default_config=MultiLayerConfig,
    run=run,
    default_threads=1,
)
