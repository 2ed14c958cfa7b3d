"""Any in-context learner against GD, GD++ and second-order methods: von Oswald et al.'s question (2023, §3:
does a trained model do gradient descent?) asked of a predictor icl-gd did not build.

A predictor is a ``torch.nn.Module`` or a callable in one of three *calls*, declared by the caller:

- ``"arguments"``: ``f(x_ctx (B, N, d), y_ctx (B, N), x_q (B, d))`` (``y_ctx`` (B, N, d_y) when d_y > 1);
- ``"concat"``: ``f(tokens (B, N+1, d + d_y))``, icl-gd's concatenated tokens (``icl_gd.regression.tokens``), the
  query (x_q, 0) last: every icl-gd model and construction;
- ``"interleaved"``: ``f(tokens (B, 2N+1, max(d, d_y)))``, Garg et al.'s (2022) x_1, (y_1, 0…), …, x_q
  (``icl_gd.regression.separate.tokens.InterleavedLayout``);

or a layout object (``ConcatLayout``, ``InterleavedLayout``, ``SeparateLayout``, …) whose ``tokens`` the predictor
takes. It returns ŷ (B,) or (B, d_y). Per-layer read-outs, when given (``layers=`` or the predictor's own
``layer_predictions``), take the same inputs and return (L, B) or (L, B, d_y), or a sequence of L of those.

``compare`` wraps the predictor as icl-gd's one call (``ForeignPredictor``: concatenated tokens in, ŷ out, so the
references, the metrics and the autograd sensitivities are the library's own) and returns one tidy DataFrame:

- one row per reference and step count (``layer`` <NA>): tuned GD for 1..K steps (``icl_gd.regression.tuning``),
  GD++ and preconditioned GD tuned for each K (``icl_gd.regression.algorithms``), Iterative Newton for 1..n
  iterations, least squares and ridge (λ tuned); columns ``loss`` (the predictor's), ``loss_reference``,
  ``pred_diff``, ``cos_sensitivity``, ``sensitivity_diff`` (``icl_gd.regression.metrics.alignment``) and
  ``parameters`` (the reference's tuned parameters, JSON);
- with per-layer read-outs, one row per layer and algorithm at its best-matching step count (Fu et al. 2023's
  argmax of the error similarity, ``icl_gd.regression.algorithms.match_layers``): ``steps``, ``sim_errors``,
  ``sim_weights``, ``loss`` (the layer's) and ``loss_reference`` (the algorithm's there).

Every reference runs in float64 on the same held-out tuning and test tasks; the predictor runs in its own dtype.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from icl_gd.core.config import check_settings, positive_int, require_positive_int, setting
from icl_gd.core.errors import ConfigError, ICLGDError
from icl_gd.core.progress import phased, tick
from icl_gd.regression.algorithms import (NewtonPredictor, PreconditionedGDPredictor, descent_step_size,
                                          match_layers, probe_set, run_algorithms, tune_preconditioner)
from icl_gd.regression.baselines import (GDPPPredictor, GDPredictor, LeastSquaresPredictor, RidgePredictor,
                                        tune_ridge)
from icl_gd.regression.evaluation import EvalSet, Scored, predictor_dtype, score
from icl_gd.regression.metrics import predictions_and_sensitivities_of
from icl_gd.regression.separate.tokens import InterleavedLayout
from icl_gd.regression.tasks import LinearRegressionTask, RegressionBatch, Stream
from icl_gd.regression.theory.one_layer import lsa_risk, optimal_preconditioner, optimal_scalar_step
from icl_gd.regression.theory.trained import PreconditionedStepPredictor
from icl_gd.regression.tokens import ConcatLayout
from icl_gd.regression.tuning import tune_gd, tune_gdpp

CALLS = ("arguments", "concat", "interleaved")
COLUMNS = ["layer", "reference", "steps", "loss", "loss_reference", "pred_diff", "cos_sensitivity",
           "sensitivity_diff", "sim_errors", "sim_weights", "parameters"]


# ---------------------------------------------------------------------------------------------------- calls
@dataclass(frozen=True)
class ArgumentsCall:
    """f(x_ctx (B, N, d), y_ctx (B, N) or (B, N, d_y), x_q (B, d)): y_ctx loses its last axis when d_y = 1."""

    d_x: int
    d_y: int
    n_context: int
    name = "arguments"

    def inputs(self, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x, (y[..., 0] if self.d_y == 1 else y), x_query

    def describe(self, B: int) -> str:
        y = f"({B}, {self.n_context})" if self.d_y == 1 else f"({B}, {self.n_context}, {self.d_y})"
        return f"f(x_ctx ({B}, {self.n_context}, {self.d_x}), y_ctx {y}, x_q ({B}, {self.d_x}))"


@dataclass(frozen=True)
class TokenCall:
    """f(tokens): the task laid out by ``layout`` (anything with ``tokens(batch)``, ``d_x``, ``d_y``)."""

    layout: Any
    n_context: int
    name: str = "tokens"

    def inputs(self, x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x_all = torch.cat([x, x_query[:, None]], dim=1)
        y_all = torch.cat([y, y.new_zeros(y.shape[0], 1, y.shape[-1])], dim=1)  # the query's label is never read
        return (self.layout.tokens(RegressionBatch(x_all, y_all, x.new_zeros(0))),)

    def describe(self, B: int) -> str:
        x = torch.zeros(B, self.n_context, self.layout.d_x)
        shape = tuple(self.inputs(x, torch.zeros(B, self.n_context, self.layout.d_y), x[:, 0])[0].shape)
        return f"f(tokens {shape}) ({self.name})"


def resolve_call(layout: str | Any, task: LinearRegressionTask) -> ArgumentsCall | TokenCall:
    """The call a predictor declared by ``layout`` takes for ``task``: a name of ``CALLS`` or a layout object,
    which must fit the task (its d_x, d_y and, where it has one, n_context)."""
    d, d_y, N = task.d, task.d_y, task.n_context
    if isinstance(layout, str):
        if layout == "arguments":
            return ArgumentsCall(d, d_y, N)
        if layout == "concat":
            return TokenCall(ConcatLayout(d, d_y), N, "icl-gd's concatenated tokens")
        if layout == "interleaved":
            return TokenCall(InterleavedLayout(d, d_y, N), N, "Garg et al.'s interleaved tokens")
        raise ConfigError(f"layout {layout!r} is not one of {', '.join(CALLS)} (or a layout object)")
    if not callable(getattr(layout, "tokens", None)):
        raise ConfigError(f"layout {layout!r} has no tokens(batch); give one of {', '.join(CALLS)} or a layout object")
    wanted = {"d_x": d, "d_y": d_y, "n_context": N}
    given = {key: getattr(layout, key) for key in wanted if hasattr(layout, key)}
    if any(given[key] != wanted[key] for key in given):
        have = ", ".join(f"{k}={v}" for k, v in given.items())
        raise ConfigError(f"layout {type(layout).__name__}({have}) does not fit the task (d={d}, d_y={d_y}, N={N}): "
                          f"its tokens would hold d_x={given.get('d_x')}, d_y={given.get('d_y')}")
    return TokenCall(layout, N, type(layout).__name__)


# ---------------------------------------------------------------------------------------------------- the wrapper
class ForeignPredictor(nn.Module):
    """Any predictor as icl-gd's one call: concatenated tokens (B, N+1, d + d_y) in, ŷ (B, d_y) out in the
    tokens' dtype; the predictor sees its own ``call``'s inputs in its own dtype. ``layer_predictions`` (tokens
    -> (L, B, d_y)) from the per-layer read-outs ``layers`` (or the predictor's ``layer_predictions``)."""

    def __init__(self, predictor: Callable[..., Any], call: ArgumentsCall | TokenCall,
                 layers: Callable[..., Any] | None = None) -> None:
        super().__init__()
        if not callable(predictor):
            raise ConfigError(f"the predictor must be a torch.nn.Module or a callable, got {type(predictor).__name__}")
        self.predictor, self.call = predictor, call
        self.layers = layers if layers is not None else getattr(predictor, "layer_predictions", None)
        self.concat = ConcatLayout(call.layout.d_x if isinstance(call, TokenCall) else call.d_x,
                                   call.layout.d_y if isinstance(call, TokenCall) else call.d_y)
        self.dtype = predictor_dtype(predictor)

    def _inputs(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        parts = self.concat.split(tokens)
        if self.dtype is not None:
            parts = tuple(t.to(self.dtype) for t in parts)
        return self.call.inputs(*parts)

    def _prediction(self, out: Any, B: int, what: str, leading: tuple[int, ...] = ()) -> torch.Tensor:
        """``out`` as ŷ (*leading, B, d_y); a wrong type, dtype or shape is a ConfigError naming the expected
        shapes."""
        d_y = self.concat.d_y
        if not isinstance(out, torch.Tensor):
            raise ConfigError(f"{what} returned a {type(out).__name__}, expected a tensor {(*leading, B)} or "
                              f"{(*leading, B, d_y)} from {self.call.describe(B)}")
        if not out.is_floating_point():
            raise ConfigError(f"{what} returned dtype {out.dtype}, expected a floating-point tensor from "
                              f"{self.call.describe(B)}")
        if d_y == 1 and tuple(out.shape) == (*leading, B):
            out = out[..., None]
        if tuple(out.shape) != (*leading, B, d_y):
            raise ConfigError(f"{what} returned shape {tuple(out.shape)}, expected {(*leading, B)} or "
                              f"{(*leading, B, d_y)} from {self.call.describe(B)}")
        return out

    def _call(self, fn: Callable[..., Any], tokens: torch.Tensor, what: str) -> Any:
        """``fn`` (the predictor or its read-outs) on ``tokens`` in its own call: a failure inside it, of any type,
        is a one-line ConfigError naming the call it was given."""
        try:
            return fn(*self._inputs(tokens))
        except ICLGDError:
            raise
        except Exception as error:  # the predictor's own errors are any type: name what it was given
            first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise ConfigError(f"{what} failed on {self.call.describe(tokens.shape[0])}: {first}; is the declared "
                              f"layout ({self.call.name}) the one it takes?") from error

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out = self._call(self.predictor, tokens, "the predictor")
        return self._prediction(out, tokens.shape[0], "the predictor").to(tokens.dtype)

    def layer_predictions(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (L, B, d_y) of the per-layer read-outs, in the tokens' dtype."""
        if self.layers is None:
            raise ConfigError("the predictor has no per-layer read-outs (give layers= or a layer_predictions method)")
        out = self._call(self.layers, tokens, "the per-layer read-outs")
        if isinstance(out, (list, tuple)):
            out = torch.stack([self._prediction(o, tokens.shape[0], "a per-layer read-out") for o in out])
        if not isinstance(out, torch.Tensor) or out.dim() < 2:
            raise ConfigError(f"the per-layer read-outs returned {type(out).__name__}, expected (L, B) or "
                              f"(L, B, d_y) tensors from {self.call.describe(tokens.shape[0])}")
        return self._prediction(out, tokens.shape[0], "the per-layer read-outs", (out.shape[0],)).to(tokens.dtype)

    def check(self, tokens: torch.Tensor) -> None:
        """Call the predictor (and its read-outs) once on ``tokens``: a failure inside it is a one-line ConfigError
        naming the call it was given; so is an output of the wrong shape or dtype, NaN or inf, one that does not
        vary between the tasks, or one that autograd cannot differentiate with respect to the query."""
        for what, call in (("the predictor", self.forward), ("the per-layer read-outs", self.layer_predictions)):
            if what != "the predictor" and self.layers is None:
                continue
            with torch.no_grad():
                out = call(tokens)
            if not torch.isfinite(out).all():
                raise ConfigError(f"{what} returned NaN or inf on {self.call.describe(tokens.shape[0])}")
        try:
            predictions_and_sensitivities_of(self, tokens, self.concat.d_x)
        except ConfigError as error:
            with torch.no_grad():
                out = self.forward(tokens)
            if bool((out == out[:1]).all()):
                raise ConfigError(constant_output(len(out))) from error
            raise

    def check_scored(self, scored: Scored) -> None:
        """The predictor's ŷ and sensitivities on the test tasks (``score``): ConfigError unless every one is finite
        and ŷ varies between the tasks."""
        B = len(scored.prediction)
        for name, values in (("ŷ", scored.prediction), ("sensitivity ∂ŷ/∂x_q", scored.sensitivity)):
            bad = int((~torch.isfinite(values)).flatten(1).any(-1).sum())
            if bad:
                raise ConfigError(f"the predictor's {name} is NaN or inf on {bad} of the {B} test tasks")
        if bool((scored.prediction == scored.prediction[:1]).all()):
            raise ConfigError(constant_output(B))
        if not math.isfinite(scored.loss):
            raise ConfigError(f"the predictor's test loss is {scored.loss} (NaN or inf: its largest |ŷ| is "
                              f"{float(scored.prediction.abs().max()):.3g})")


def constant_output(B: int) -> str:
    return (f"the predictor gives the same ŷ on all {B} tasks it was given (a constant output: it does not depend on "
            "its inputs)")


# ---------------------------------------------------------------------------------------------------- settings
# The most step counts the references are tuned for: each K = 1..steps is tuned on its own (GD++ and preconditioned
# GD by L-BFGS through K steps), so the tuning grows faster than K²: on one core 6 steps take about 15 s, 12 about
# 45 s, 24 about 4 minutes; 64 already takes most of an hour.
MAX_STEPS = 64


def require_reference_steps(name: str, value: int) -> None:
    """1..``MAX_STEPS`` step counts, with the reason for the bound."""
    require_positive_int(name, value)
    if value > MAX_STEPS:
        raise ConfigError(f"{name} must be at most {MAX_STEPS}: every step count 1..{name} is tuned on its own and "
                          f"the tuning grows faster than its square (24 steps take about 4 minutes), got {value}")


@dataclass(frozen=True)
class CompareConfig:
    """The references' step counts and the per-layer matching's probe set (the test and tuning tasks are
    ``compare``'s arguments)."""

    steps: int = setting(6, f"GD, GD++ and preconditioned GD tuned for 1..this many steps (at most {MAX_STEPS})",
                         check=require_reference_steps)
    newton_steps: int = positive_int(6, "Iterative Newton: iterations 1..this")
    n_contexts: int = positive_int(500, "contexts of the per-layer matching (probe set)")
    n_queries: int = positive_int(20, "query points per probe context (errors and induced weights; at least d)")
    gd_steps: tuple[int, ...] = setting((1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512),
                                        "per-layer matching: step counts of GD at the fixed step 1/L")
    tuned_steps: int = positive_int(16, "per-layer matching: GD++ and preconditioned GD (tuned for `steps`) run "
                                        "for 1..this")

    def __post_init__(self) -> None:
        check_settings(self)
        if not self.gd_steps or any(not isinstance(k, int) or k <= 0 for k in self.gd_steps):
            raise ConfigError(f"gd_steps must be positive integers, got {self.gd_steps!r}")


@dataclass(frozen=True)
class Reference:
    """A reference at one step count: its predictor (icl-gd's call) and its parameters (JSON-able)."""

    name: str
    steps: int | None
    predictor: nn.Module
    parameters: dict[str, Any]


# ---------------------------------------------------------------------------------------------------- references
@phased("tuning the references")
def tuned_references(task: LinearRegressionTask, config: CompareConfig, n_tune: int = 2048, seed: int = 2023,
                     device: torch.device | str = "cpu") -> tuple[list[Reference], dict[str, Any]]:
    """Every reference of the comparison, tuned on ``n_tune`` held-out tasks (Stream.TUNE of ``seed``), and the
    parameters the per-layer matching needs (GD++ and preconditioned GD tuned for ``steps``, GD's fixed step 1/L)."""
    tune = task.sample(n_tune, seed, 0, Stream.TUNE, device, torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query)
    layout = ConcatLayout(task.d, task.d_y)
    refs: list[Reference] = []
    gdpp = pgd = None
    for k in range(1, config.steps + 1):
        gd = tune_gd(*args, k, shared=True)
        # One (η, γ) for every step; one L-BFGS start (γ = 0.25 / λ̄) besides GD itself, 60 iterations, the stability
        # guard kept (as the which-algorithm study tunes it). At one step GD++ is GD (γ acts after the last step).
        gdpp = gd if k == 1 else tune_gdpp(*args, k, shared=True, start=gd, gamma_starts=(0.25,), max_iter=60)
        pgd = tune_preconditioner(*args, k, eta=gd.etas[0])
        tick(f"of {config.steps} step counts tuned")
        refs += [Reference("gd", k, GDPredictor(layout, gd.etas), {"eta": gd.etas[0]}),
                 Reference("gdpp", k, GDPPPredictor(layout, gdpp), {"eta": gdpp.etas[0], "gamma": gdpp.gammas[0]}),
                 Reference("pgd", k, PreconditionedGDPredictor(layout, pgd),
                           {"P_eigenvalues": [round(v, 6) for v in torch.linalg.eigvalsh(pgd.P).tolist()]})]
    if task.d >= 2:  # Iterative Newton's initial scale never converges at d = 1 (``algorithms.newton_inverses_per_step``)
        refs += [Reference("newton", k, NewtonPredictor(layout, k), {}) for k in range(1, config.newton_steps + 1)]
    lam = tune_ridge(*args)
    refs += [Reference("least_squares", None, LeastSquaresPredictor(layout), {}),
             Reference("ridge", None, RidgePredictor(layout, lam), {"lambda": lam})]
    matching = {"gdpp": gdpp, "pgd": pgd, "gd_eta": descent_step_size(tune.x_context)}
    return refs, matching


# ---------------------------------------------------------------------------------------------------- compare
def compare(predictor: Callable[..., Any], task: LinearRegressionTask, layout: str | Any = "arguments",
            config: CompareConfig | None = None, layers: Callable[..., Any] | None = None,
            device: torch.device | str = "cpu", n_test: int = 2000, n_tune: int = 2048, seed: int = 2023,
            references: tuple[list[Reference], dict[str, Any]] | None = None,
            extra: Sequence[Reference] = ()) -> pd.DataFrame:
    """The tidy comparison of ``predictor`` (in the call ``layout`` declares) with every reference on ``task``
    (module docstring): ``n_test`` test tasks (Stream.TEST of ``seed``), references tuned on ``n_tune`` held-out
    ones (Stream.TUNE), the probe set of the per-layer matching from ``seed`` too. ``df.attrs``: ``parameters`` (per reference name, the parameters of its largest step
    count, and the per-layer matching's), ``loss`` (the predictor's test loss) and ``layer_metrics`` (the
    per-layer matching's metrics, when read-outs are given). ``references``: ``tuned_references(task, config,
    n_tune, seed)`` computed once for several predictors of one task; ``extra``: references of fixed parameters
    scored beside them (``closed_form_references``)."""
    config = config or CompareConfig()
    if layers is not None and not callable(layers):
        raise ConfigError(f"layers must be a callable giving the per-layer read-outs, got {type(layers).__name__}")
    if (layers is not None or callable(getattr(predictor, "layer_predictions", None))) and config.n_queries < task.d:
        raise ConfigError(f"n_queries must be at least d = {task.d} (induced weights), got {config.n_queries}")
    model = ForeignPredictor(predictor, resolve_call(layout, task), layers)
    test_batch = task.sample(n_test, seed, 0, Stream.TEST, device, torch.float64)
    test = EvalSet(model.concat.tokens(test_batch), test_batch.y_query, task.d)
    model.check(test.tokens[:2])
    if isinstance(predictor, nn.Module):
        predictor.eval()
    trained = score(model, test)
    model.check_scored(trained)  # before any reference is tuned: a NaN, inf or constant predictor is refused now
    refs, matching = references or tuned_references(task, config, n_tune, seed, device)
    refs = [*refs, *extra]
    rows = [_reference_row(ref, score(ref.predictor, test), trained) for ref in refs]
    parameters: dict[str, Any] = {ref.name: ref.parameters for ref in refs}
    frame = pd.DataFrame(rows, columns=COLUMNS)
    metrics: dict[str, Any] = {}
    if model.layers is not None:
        metrics, layer_rows = _match_layers(model, task, config, matching, seed, device)
        frame = pd.concat([frame, pd.DataFrame(layer_rows, columns=COLUMNS)], ignore_index=True)
        parameters["matching"] = {"gd_fixed_eta": matching["gd_eta"], "gdpp_eta": matching["gdpp"].etas[0],
                                  "gdpp_gamma": matching["gdpp"].gammas[0],
                                  "pgd_eigenvalues": torch.linalg.eigvalsh(matching["pgd"].P).tolist()}
    frame["layer"] = frame["layer"].astype("Int64")
    frame["steps"] = frame["steps"].astype("Int64")
    frame.attrs.update(parameters=parameters, loss=trained.loss, layer_metrics=metrics)
    return frame


def _reference_row(ref: Reference, scored: Scored, trained: Scored) -> dict[str, Any]:
    a = trained.alignment_with(scored)
    return {"layer": None, "reference": ref.name, "steps": ref.steps, "loss": trained.loss,
            "loss_reference": scored.loss, "pred_diff": a.pred_diff, "cos_sensitivity": a.cos_sensitivity,
            "sensitivity_diff": a.sensitivity_diff, "parameters": json.dumps(ref.parameters)}


def closed_form_references(covariance: torch.Tensor | None, scale: float, task: LinearRegressionTask
                           ) -> list[Reference]:
    """The one-layer theory's references on a Gaussian law (docs/theory.md): the layer at the optimum Γ* of inputs
    N(0, Λ) with ``task.n_context`` pairs, and one GD step at the best scalar step η* of that law, each with its
    closed-form expected loss on the test law N(0, ``scale`` Λ) (``risk``); none for uniform inputs
    (``covariance`` None), several outputs or label noise the closed forms do not take here."""
    if covariance is None or task.d_y != 1 or task.weight_scale != 1:
        return []
    n, noise = task.n_context, task.label_noise
    layout = ConcatLayout(task.d, task.d_y)
    gamma_star = optimal_preconditioner(covariance, n, noise)
    eta = optimal_scalar_step(covariance, n, noise)
    eye = torch.eye(task.d, dtype=torch.float64)
    tested = scale * covariance

    def risk(gamma: torch.Tensor) -> float:
        return round(float(lsa_risk(gamma, tested, n, label_noise=noise)), 8)

    return [Reference("gamma_star", None, PreconditionedStepPredictor(gamma_star, layout),
                      {"risk": risk(gamma_star), "covariate_scale": scale}),
            Reference("gd_population", 1, GDPredictor(layout, [eta]),
                      {"eta": eta, "risk": risk(eta * eye), "covariate_scale": scale})]


MATCHED_NAMES = {"gd": "gd_fixed_step"}  # the matching's GD runs at the fixed step 1/L, not tuned per count


@phased("matching the layers with the algorithms")
def _match_layers(model: ForeignPredictor, task: LinearRegressionTask, config: CompareConfig,
                  matching: dict[str, Any], seed: int, device: torch.device | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per layer and algorithm the best-matching step count (``match_layers`` on a probe set of ``n_contexts``
    contexts x ``n_queries`` queries), as rows of the comparison."""
    if task.d < 2:
        raise ConfigError("the per-layer matching needs d ≥ 2 (Iterative Newton's initial scale never converges at d = 1)")
    probe = probe_set(task, config.n_contexts, config.n_queries, seed, device)
    B, M, _ = probe.queries.shape
    with torch.no_grad():
        tokens = probe.tokens(model.concat, torch.float64)
        predictions = torch.cat([model.layer_predictions(part) for part in tokens.split(4000)], dim=1)
    if not torch.isfinite(predictions).all():
        raise ConfigError("the per-layer read-outs are NaN or inf on the probe tasks of the per-layer matching")
    predictions = predictions.double().reshape(len(predictions), B, M, task.d_y)
    runs = run_algorithms(probe, matching["gdpp"], matching["pgd"], matching["gd_eta"], config.newton_steps,
                          config.gd_steps, config.tuned_steps)
    metrics, grid = match_layers(predictions, probe, runs)
    rows = [{"layer": r["layer"], "reference": MATCHED_NAMES.get(r["algorithm"], r["algorithm"]), "steps": r["steps"],
             "loss": r["loss_layer"], "loss_reference": r["loss_algorithm"], "sim_errors": r["sim_errors"],
             "sim_weights": r["sim_weights"]} for r in grid if r["matched"]]
    return metrics, rows


# ---------------------------------------------------------------------------------------------------- figure
FAMILIES = ("gd", "gdpp", "pgd", "newton")
LABELS = {"gd": "GD (tuned per K)", "gdpp": "GD++ (tuned per K)", "pgd": "preconditioned GD (tuned per K)",
          "newton": "Iterative Newton", "gd_fixed_step": "GD (fixed 1/L step)", "least_squares": "least squares",
          "ridge": "ridge (λ tuned)"}


def comparison_figure(frame: pd.DataFrame) -> Any:
    """Left: the predictor's prediction difference with each reference against its step count (least squares and
    ridge as lines). Right, with per-layer read-outs: each algorithm's step count matched to each layer."""
    from icl_gd.core.plotting import plt

    output, layers = frame[frame["layer"].isna()], frame[frame["layer"].notna()]
    fig, axes = plt.subplots(1, 2 if len(layers) else 1, figsize=(10.4 if len(layers) else 5.2, 3.6), squeeze=False)
    ax = axes[0, 0]
    for i, name in enumerate(FAMILIES):
        part = output[output["reference"] == name].groupby("steps")["pred_diff"].mean()
        if len(part):
            ax.plot(part.index.astype(int), part.values, "o-", color=f"C{i + 1}", label=LABELS[name])
    for j, name in enumerate(("least_squares", "ridge")):
        part = output[output["reference"] == name]["pred_diff"]
        if len(part):
            ax.axhline(part.mean(), color="k", ls=("--", ":")[j], label=LABELS[name])
    ax.set(xlabel="steps (iterations)", ylabel="mean |ŷ - ŷ_ref|", yscale="log", title="distance to each reference")
    ax.legend(fontsize=7)
    if len(layers):
        ax = axes[0, 1]
        for i, name in enumerate(("newton", "gd_fixed_step", "gdpp", "pgd")):
            part = layers[layers["reference"] == name].groupby("layer")["steps"].mean()
            if len(part):
                ax.plot(part.index.astype(int), part.values, "o-", color=f"C{i + 1}", label=LABELS.get(name, name))
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set(xlabel="layer", ylabel="matched steps (max SimE)", title="steps that best match each layer")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
