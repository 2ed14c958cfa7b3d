"""Study `sequence` (beyond the papers): in-context learning in a sequence, after von Oswald et al. 2023b
("Uncovering mesa-optimization algorithms in Transformers"): causal models trained on next-token prediction of
linear dynamical systems s_{t+1} = W s_t + σ ε_t (a fresh orthogonal W per sequence, fully observed), scored at
every position against the referees of ``icl_gd.regression.sequence.referees`` (docs/sequence.md).

Trains causal linear-attention stacks of each depth in ``depths`` (``lsa1``, ``lsa2``, ...), one causal mesa layer
(``mesa``) and a small softmax Transformer (``softmax``), and scores them beside ridge at the authors' λ = 0.001
(the mesa layer's answer in closed form), least squares, one GD step from a learned W0 with η tuned on held-out
sequences (``gd``, the paper's one-layer referee), ``gd_steps`` GD steps (``gd_k``), online GD (the delta rule,
``online_gd``), ridge at the λ = σ² / Var(W_ij) of a Gaussian prior of W's entry variance (``bayes``: the posterior
mean for Gaussian W, an approximation for the orthogonal W here) and the zero predictor. For the one-layer model,
the (η, W0) of the GD step closest to it is read off (``fit_gd`` on its predictions) and compared with the tuned
referee's, and the loss is traced along the line from its (gauge-fixed) weights to the construction's. The
authors' stored per-position losses (their least squares and their two-layer model, on their task) stand beside
our least squares on their task. Every model's and referee's order sensitivity at the last position
(``icl_gd.regression.sequence.order``: the pairs it has read in random orders) is measured beside online GD's.

Writes ``position_loss.csv`` (model, position, loss per seed), ``order.csv``, ``interpolation.csv``, ``curves.csv``,
``metrics.json`` and ``figures/position_loss.png``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from icl_gd.constructions.sequence import gd_step_weights
from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.core.config import check_settings, positive_int, require_non_negative, require_positive, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import RunContext, Study, StudyRun
from icl_gd.regression import metric_names as names
from icl_gd.regression.config import EvaluationConfig, TrainingConfig
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.sequence.authors import authors_losses
from icl_gd.regression.sequence.layers import causal_linear_attention, read_prediction, sequence_tokens
from icl_gd.regression.sequence.models import CausalLSAStack, CausalMesaModel, SoftmaxTransformer
from icl_gd.regression.sequence.order import order_sensitivity
from icl_gd.regression.sequence.probes import TARGETS, fit_probes, probe_r2, probe_targets
from icl_gd.regression.sequence.referees import (RidgeReferee, bayes_ridge, fit_gd, predict_with, tune_gd,
                                                 tune_online_gd)
from icl_gd.regression.sequence.tasks import LinearDynamicsTask, per_position_loss, position_losses
from icl_gd.regression.sequence.training import train_next_token
from icl_gd.regression.tasks import Stream
from icl_gd.studies.sequence_figures import order_figure, position_figure, probe_figure

MIXING = (0.0, 0.25, 0.5, 0.75, 1.0)  # α: 0 the trained layer (gauge-fixed), 1 the construction
AUTHORS_LAMBDA = 1e-3  # their least-squares referee's λ (run_sandbox.ipynb)
ORDER_REFEREES = ("ridge", "gd", "online_gd")  # a batch fit's order sensitivity (round-off) beside an online one's


@dataclass(frozen=True)
class SequenceTaskConfig:
    """Fully observed linear dynamics (``LinearDynamicsTask``): W Haar-orthogonal, s_1 ~ U(-1, 1)^d."""

    d_s: int = positive_int(5, "state dimension d_s (the authors': 10)")
    length: int = positive_int(20, "positions T scored per sequence (the authors': 50)")
    noise: float = setting(0.01, "std σ of the transition noise (the authors')", check=require_non_negative)

    def __post_init__(self) -> None:
        check_settings(self)

    def build(self) -> LinearDynamicsTask:
        return LinearDynamicsTask(d_s=self.d_s, length=self.length, noise=self.noise)


@dataclass(frozen=True)
class SequenceModelsConfig:
    """The trained models (``icl_gd.regression.sequence.models``)."""

    depths: tuple[int, ...] = setting((1, 2), "depths of the causal linear-attention stacks")
    heads: int = positive_int(4, "heads of the deeper stacks (the one-layer stack has one, as the construction)")
    key_size: int = positive_int(10, "key size of the deeper stacks' heads")
    init_scale: float = setting(0.5, "initial weights N(0, init_scale² / 3d)", check=require_positive)
    mesa_key_size: int = positive_int(5, "key size of the mesa layer")
    softmax_width: int = positive_int(32, "width of the softmax Transformer")
    softmax_layers: int = positive_int(2, "blocks of the softmax Transformer")

    def __post_init__(self) -> None:
        check_settings(self)
        if not self.depths or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in self.depths):
            raise ConfigError(f"depths must be positive integers, got {self.depths!r}")


@dataclass(frozen=True)
class SequenceConfig:
    task: SequenceTaskConfig = setting(doc="the sequences", factory=SequenceTaskConfig)
    model: SequenceModelsConfig = setting(doc="the trained models", factory=SequenceModelsConfig)
    training: TrainingConfig = setting(doc="optimisation (AdamW on the mean next-token loss)",
                                       factory=lambda: TrainingConfig(steps=700, batch_size=128, lr=3e-3,
                                                                      grad_clip=1.0, weight_decay=0.0))
    evaluation: EvaluationConfig = setting(doc="seeds and test sets", factory=lambda: EvaluationConfig(
        n_test=1024, n_tune=1024, eval_every=100))
    gd_steps: int = positive_int(4, "K of the K-step GD referee")
    n_probe: int = positive_int(1024, "sequences the linear probes are fitted on (scored on the test sequences)")
    probe_lambda: float = setting(1e-3, "λ of the probes' preconditioned input (G_t + λI)⁻¹ s_t (the authors' "
                                        "least-squares λ)", check=require_positive)
    n_authors: int = positive_int(1280, "sequences of the authors' task on which our least squares is scored")
    order_permutations: int = positive_int(4, "random orders of each test sequence's pairs (order sensitivity)")

    def __post_init__(self) -> None:
        check_settings(self)

    def train_config(self):
        return self.training.resolve(1, False, self.evaluation.eval_every)


def full() -> SequenceConfig:
    """The paper's sizes where a CPU allows: d_s = 10, T = 50, depths 1-3, batch 256 (theirs), 3 seeds, 4000
    steps (theirs: 20 000 of the schedule, the stored model 2500)."""
    return SequenceConfig(task=SequenceTaskConfig(d_s=10, length=50),
                          model=SequenceModelsConfig(depths=(1, 2, 3), heads=4, key_size=20, mesa_key_size=10,
                                                     softmax_width=40),
                          training=TrainingConfig(steps=4000, batch_size=256, lr=1e-3, grad_clip=1.0,
                                                  weight_decay=0.0, warmup=0.05),
                          evaluation=EvaluationConfig(seeds=3, n_test=2048, n_tune=2048, eval_every=500))


# ------------------------------------------------------------------------------------------------- the models
def trained_models(config: SequenceConfig, seed: int) -> dict[str, nn.Module]:
    """One untrained model per name: ``lsa<L>`` for each depth, ``mesa``, ``softmax``."""
    m, d = config.model, config.task.d_s
    models: dict[str, nn.Module] = {
        f"lsa{L}": CausalLSAStack(d, L, 1, 3 * d, seed, m.init_scale) if L == 1
        else CausalLSAStack(d, L, m.heads, m.key_size, seed, m.init_scale) for L in m.depths}
    models["mesa"] = CausalMesaModel(d, m.mesa_key_size, seed, init_scale=m.init_scale)
    models["softmax"] = SoftmaxTransformer(d, m.softmax_width, 4, m.softmax_layers, seed)
    return models


def product_weights(layer: LSAWeights) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_Kᵀ W_Q, P W_V), each (D, D), of a one-head layer: the layer is a function of these two alone, up to the
    scale c (c W_Kᵀ W_Q, P W_V / c); both returned at equal Frobenius norm, fixing c."""
    qk, pv = layer.W_K[0].T @ layer.W_Q[0], layer.P[0] @ layer.W_V[0]
    c = (pv.norm() / qk.norm()).sqrt()
    return qk * c, pv / c


def mixed_layer_predictions(trained: CausalLSAStack, eta: float, W0: torch.Tensor, alpha: float,
                            inputs: torch.Tensor) -> torch.Tensor:
    """(B, T, d) the one-head layer whose products and initial map A are (1 - α) the trained layer's plus α the
    construction's (one GD step with η from W0), gauge-fixed by ``product_weights`` and by the sign c = -1 (which
    leaves the layer unchanged as well), taken where it turns the trained W_Kᵀ W_Q towards the construction's."""
    d = trained.d
    with torch.no_grad():
        qk_t, pv_t = product_weights(trained.layer(0).to(dtype=inputs.dtype))
        qk_c, pv_c = product_weights(gd_step_weights(d, eta, W0, inputs.dtype))
        if float((qk_t * qk_c).sum()) < 0:
            qk_t, pv_t = -qk_t, -pv_t
        qk, pv = (1 - alpha) * qk_t + alpha * qk_c, (1 - alpha) * pv_t + alpha * pv_c
        A = (1 - alpha) * trained.A.to(inputs) + alpha * W0.to(inputs)
        eye = torch.eye(3 * d, dtype=inputs.dtype)
        layer = LSAWeights(qk[None], eye[None], pv[None], eye[None])
        tokens = sequence_tokens(inputs, inputs @ A.T)
        return read_prediction(causal_linear_attention(layer, tokens), d)


# ---------------------------------------------------------------------------------------------------- the run
def part_losses(name: str, losses: torch.Tensor) -> dict[str, float]:
    """The mean of the (T,) per-position losses over the first quarter of the positions (at least one) and over
    the second half."""
    T = len(losses)
    return {names.sequence_early_loss(name): float(losses[:max(1, T // 4)].mean()),
            names.sequence_late_loss(name): float(losses[T // 2:].mean())}


def _positions(losses: torch.Tensor) -> list[float]:
    return [float(v) for v in losses]


def run(config: SequenceConfig, ctx: RunContext) -> dict[str, Any]:
    task, ev = config.task.build(), config.evaluation
    study = StudyRun(ctx, ev.seed_list)
    test = task.sample(ev.n_test, ev.test_seed, 0, Stream.TEST, dtype=torch.float64)
    referees: dict[str, Any] = {
        "ridge": RidgeReferee(AUTHORS_LAMBDA), "least_squares": RidgeReferee(0.0), "bayes": bayes_ridge(task),
        "gd": tune_gd(task, ev.test_seed, ev.n_tune, learn_W0=True),
        "gd_k": tune_gd(task, ev.test_seed, ev.n_tune, steps=config.gd_steps, learn_W0=True),
        "online_gd": tune_online_gd(task, ev.test_seed, ev.n_tune), "zero": torch.zeros_like}
    positions = {name: per_position_loss(referee, test) for name, referee in referees.items()}
    ordered = {name: order_sensitivity(referees[name].from_pairs, test.inputs, config.order_permutations,
                                       ev.test_seed) for name in ORDER_REFEREES}
    gd = referees["gd"]
    shared: dict[str, Any] = {names.loss(name): float(p.mean()) for name, p in positions.items()}
    shared.update({names.eta("gd"): gd.eta, names.eta("gd_k"): referees["gd_k"].eta,
                   names.eta("online_gd"): referees["online_gd"].eta,
                   names.sequence_W0_norm("gd"): float(gd.W0.norm())})
    shared.update({key: value for name, p in positions.items() for key, value in part_losses(name, p).items()})
    shared.update(authors_comparison(config.n_authors, ev.test_seed))
    shared.update({names.order_sensitivity(name): value for name, value in ordered.items()})

    train_config = config.train_config()
    probe_batch = task.sample(config.n_probe, ev.test_seed, 1, Stream.TUNE, dtype=torch.float64)
    for seed in study.seeds:
        study.record(seed, shared)
        study.add_rows("position_loss", [{"model": name, "kind": "referee", "position": t + 1, "loss": v}
                                         for name, p in positions.items() for t, v in enumerate(_positions(p))],
                       seed=seed)
        study.add_rows("order", [{"model": name, "kind": "referee", "order_sensitivity": v}
                                 for name, v in ordered.items()], seed=seed)
        for name, model in trained_models(config, seed).items():
            model = model.to(ctx.device)

            def evaluate(m: nn.Module, step: int, s: int, name: str = name) -> list[dict[str, Any]]:
                with torch.no_grad():
                    loss = float(per_position_loss(m, test.to(ctx.device, torch.float32)).mean())
                return [{"step": step, "seed": s, "model": name, "metric": "loss", "value": loss}]

            state = train_next_token(model, task, train_config, seed, device=ctx.device, evaluate=evaluate,
                                     checkpoint_path=study.checkpoint(f"{name}-seed{seed}"),
                                     fingerprint=config_fingerprint(config, name), progress=ctx.progress,
                                     description=f"{name} seed {seed}")
            study.add_rows("curves", state.history)
            model = model.to("cpu", torch.float64).eval()  # scored beside the referees: float64, on the CPU
            with torch.no_grad():
                losses = per_position_loss(model, test)
            study.record(seed, {names.loss(name): float(losses.mean()),
                                names.rel_gap(name, "gd"): float(losses.mean()) / shared[names.loss("gd")] - 1,
                                names.rel_gap(name, "ridge"): float(losses.mean()) / shared[names.loss("ridge")] - 1,
                                **part_losses(name, losses)})
            study.add_rows("position_loss", [{"model": name, "kind": "trained", "position": t + 1, "loss": v}
                                             for t, v in enumerate(_positions(losses))], seed=seed)
            sensitivity = order_sensitivity(model.from_pairs, test.inputs, config.order_permutations, ev.test_seed)
            study.record(seed, {names.order_sensitivity(name): sensitivity})
            study.add_rows("order", [{"model": name, "kind": "trained", "order_sensitivity": sensitivity}],
                           seed=seed)
            if name == "mesa":
                study.record(seed, {"lambda_mesa": float(model.lam)})
            if name == "lsa1":
                study.record(seed, one_layer_metrics(study, model, gd, test, seed))
            if isinstance(model, CausalLSAStack):
                study.record(seed, probe_metrics(study, name, model, probe_batch, test, config.probe_lambda, seed))
    return study.finish(lambda mean: [("position_loss", position_figure(study.tables["position_loss"])),
                                      ("probes", probe_figure(study.tables["probes"])),
                                      ("order", order_figure(study.tables["order"]))])


def probe_metrics(study: StudyRun, name: str, model: CausalLSAStack, fit: Any, test: Any, lam: float, seed: int
                  ) -> dict[str, float]:
    """Linear probes of the next token and of the preconditioned input from every layer's tokens of ``model``
    (``icl_gd.regression.sequence.probes``): fitted per position on ``fit``, R² per position on ``test``."""
    with torch.no_grad():
        fit_streams, test_streams = model.residual_stream(fit.inputs), model.residual_stream(test.inputs)
    fit_targets = probe_targets(fit.inputs, fit.targets, lam)
    test_targets = probe_targets(test.inputs, test.targets, lam)
    metrics, rows = {}, []
    for layer, (fit_stream, test_stream) in enumerate(zip(fit_streams, test_streams)):
        for target in TARGETS:
            r2 = probe_r2(fit_probes(fit_stream, fit_targets[target]), test_stream, test_targets[target])
            metrics[names.sequence_probe_r2(name, target, layer)] = float(r2[len(r2) // 2:].mean())
            rows += [{"model": name, "layer": layer, "target": target, "position": t + 1, "r2": float(v)}
                     for t, v in enumerate(r2)]
    study.add_rows("probes", rows, seed=seed)
    return metrics


def one_layer_metrics(study: StudyRun, model: CausalLSAStack, gd: Any, test: Any, seed: int) -> dict[str, Any]:
    """The one-layer model beside one tuned GD step: the (η, W0) read off it, how much of it that GD step explains,
    and its loss along the line to the construction at the read-off and at the tuned (η, W0)."""
    with torch.no_grad():
        predictions = model(test.inputs)
    read = fit_gd(test.inputs, predictions, learn_W0=True)
    with torch.no_grad():
        residual = position_losses(read(test.inputs), predictions).mean()
        spread = position_losses(torch.zeros_like(predictions), predictions).mean()
    metrics = {names.eta("lsa1"): read.eta, names.sequence_W0_norm("lsa1"): float(read.W0.norm()),
               "eta_ratio_lsa1_vs_gd": read.eta / gd.eta,
               "W0_distance_lsa1_vs_gd": float((read.W0 - gd.W0).norm()),
               names.sequence_readoff_residual("lsa1"): float((residual / spread).sqrt())}
    rows = []
    for alpha in MIXING:
        with torch.no_grad():
            loss = float(position_losses(mixed_layer_predictions(model, gd.eta, gd.W0, alpha, test.inputs),
                                         test.targets).mean())
        rows.append({"model": "lsa1", "construction": "gd", "alpha": alpha, "loss": loss})
    study.add_rows("interpolation", rows, seed=seed)
    losses = [r["loss"] for r in rows]
    metrics["interpolation_excess_lsa1"] = (max(losses) - max(losses[0], losses[-1])) / losses[-1]
    return metrics


def authors_comparison(n_sequences: int, seed: int) -> dict[str, float]:
    """Our ridge (λ = 0.001) on the authors' task with their one-pair lag (their rows [:k]), beside their stored
    least squares and two-layer model: the mean over the 50 positions of each."""
    task = LinearDynamicsTask()
    batch = task.sample(n_sequences, seed, 0, Stream.TEST, dtype=torch.float64)
    weights = RidgeReferee(AUTHORS_LAMBDA).weights(batch.inputs)
    lagged = weights[(torch.arange(task.length) - 1).clamp_min(0)]
    ours = position_losses(predict_with(lagged, batch.inputs), batch.targets)
    stored = authors_losses()
    return {names.loss("ridge_authors_task"): float(ours.mean()),
            names.loss("authors_lsq"): float(stored["lsq"].mean.mean()),
            names.loss("authors_lsa2"): float(stored["transformer"].mean.mean())}


STUDY = Study(
    name="sequence",
    summary="beyond the papers: causal models trained on linear dynamical systems against per-position referees",
    default_config=SequenceConfig, run=run, default_threads=1, presets={"full": full},
    resolved_training=SequenceConfig.train_config,
    headline=("loss_lsa1", "loss_gd", "loss_lsa2", "loss_mesa", "loss_ridge", "loss_softmax", "eta_lsa1", "eta_gd"),
    tiny=("steps=6", "batch_size=16", "n_test=32", "n_tune=32", "eval_every=3", "length=6", "d_s=3", "n_authors=32",
          "softmax_width=8", "n_probe=32", "order_permutations=2"),
)
