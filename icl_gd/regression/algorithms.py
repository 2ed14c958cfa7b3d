"""Algorithms a deep trained model may run instead of GD or GD++: Iterative Newton (Fu, Chen, Jia & Sharan 2023,
arXiv 2310.17086), preconditioned GD (Ahn, Cheng, Daneshmand & Sra, NeurIPS 2023) and GD at one fixed step size
for any number of steps, each as weights per step on a batch of contexts and as a predictor with the call of every
baseline (``icl_gd.regression.baselines``: tokens (B, T, D) in, ŷ (B, d_y) out; float64 inside).

Shapes: B tasks, N context pairs, d inputs, d_y outputs. W: (B, d_y, d), so ŷ = W x_q. The loss is von Oswald et
al.'s (2023, Eq. 2) L(W) = 1/(2N) Σ_i ‖W x_i - y_i‖², ∇L(W) = (W S - Yᵀ X) / N with S = XᵀX (B, d, d) the
context's Gram matrix.

Iterative Newton (Newton-Schulz towards S⁺), as Fu et al.'s code (``LeastSquaresModelNewtonMethod``) runs it:
M_0 = α S with α = 2 / ‖S Sᵀ‖_F, M_{k+1} = M_k (2I - S M_k), W_k = (M_k Xᵀ Y)ᵀ. M_k is a polynomial in S, so
I - M_k S = (I - α S²)^(2^k): k Newton iterations are 2^k steps of GD preconditioned by P = S with η = α N (checked
in ``icl_gd.constructions.algorithms``), which is why GD needs exponentially many steps to keep up. (Their paper
writes ‖S Sᵀ‖_2; their code, which drew their figures, takes torch.linalg.norm's default, the Frobenius norm. With
the spectral norm the top eigen-direction's factor is (1 - 2)^(2^k) = 1 and never converges.)

Preconditioned GD: W_{k+1} = W_k - η_k ∇L(W_k) P with a symmetric P (d, d), shared by every task (Ahn et al.'s
multi-layer optimum; ``tune_preconditioner`` tunes it on held-out tasks) or one per task (B, d, d). P = I is GD.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from icl_gd.core.errors import ConfigError, DivergenceError
from icl_gd.core.progress import phased
from icl_gd.regression.baselines import ContextLayout
from icl_gd.regression.gd import gdpp_predictions_per_step, initial_weights, regression_gradient
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.tasks import LinearRegressionTask, Stream, make_generator


def _float64(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.double() for t in tensors)


def _predict(W: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
    """ŷ (B, d_y) = W x_q for W (B, d_y, d), x_query (B, d)."""
    return (W @ x_query[..., None])[..., 0]


def _require_steps(n_steps: int) -> None:
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 0:
        raise ConfigError(f"the number of iterations must be a non-negative integer, got {n_steps!r}")


# ---------------------------------------------------------------------------------------------------- Newton
def gram(x: torch.Tensor) -> torch.Tensor:
    """S = XᵀX (B, d, d) of context inputs x (B, N, d)."""
    return x.transpose(1, 2) @ x


def newton_alpha(S: torch.Tensor) -> torch.Tensor:
    """α = 2 / ‖S Sᵀ‖_F per task (B,): Fu et al.'s code's initial scale (module docstring)."""
    return 2.0 / torch.linalg.matrix_norm(S @ S.transpose(1, 2))


def newton_inverses_per_step(S: torch.Tensor, n_steps: int) -> list[torch.Tensor]:
    """[M_0, ..., M_n] (each (B, d, d)): n Newton-Schulz iterations towards S⁺ from M_0 = α S."""
    _require_steps(n_steps)
    if S.shape[-1] < 2:
        # ‖S Sᵀ‖_F = s² when d = 1, so α s = 2 / s, 1 - α s² = -1 and the iteration never converges.
        raise ConfigError("Iterative Newton with Fu et al.'s α = 2 / ‖S Sᵀ‖_F needs d ≥ 2 (at d = 1 it never converges)")
    M = newton_alpha(S)[:, None, None] * S
    eye2 = 2.0 * torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)
    out = [M]
    for _ in range(n_steps):
        M = M @ (eye2 - S @ M)
        out.append(M)
    return out


def newton_weights_per_step(x: torch.Tensor, y: torch.Tensor, n_steps: int) -> list[torch.Tensor]:
    """[W_0, ..., W_n] (each (B, d_y, d)), W_k = (M_k Xᵀ Y)ᵀ, from x (B, N, d), y (B, N, d_y)."""
    b = x.transpose(1, 2) @ y  # (B, d, d_y) = Xᵀ Y
    return [(M @ b).transpose(1, 2) for M in newton_inverses_per_step(gram(x), n_steps)]


class NewtonPredictor(nn.Module):
    """``n_steps`` iterations of Iterative Newton on each task's context, then ŷ = W x_q: tokens (B, T, D) of any
    ``layout`` -> ŷ (B, d_y); float64 inside."""

    def __init__(self, layout: ContextLayout, n_steps: int) -> None:
        super().__init__()
        _require_steps(n_steps)
        self.layout, self.n_steps = layout, n_steps

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, x_query = _float64(*self.layout.split(tokens))
        return _predict(newton_weights_per_step(x, y, self.n_steps)[-1], x_query).to(tokens.dtype)


# ---------------------------------------------------------------------------------------------------- preconditioned GD
def preconditioned_gd_weights_per_step(
    x: torch.Tensor, y: torch.Tensor, P: torch.Tensor, etas: Sequence[float] | torch.Tensor,
    W0: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """[W_0, ..., W_K] (each (B, d_y, d)) for K = len(etas) steps W <- W - η_k ∇L(W) P; P (d, d) shared or (B, d, d)
    per task, symmetric."""
    if P.shape[-1] != x.shape[-1] or P.shape[-2] != x.shape[-1]:
        raise ConfigError(f"the preconditioner is {tuple(P.shape)}, the inputs have d = {x.shape[-1]}")
    W = initial_weights(x, y, W0)
    out = [W]
    for eta in etas:
        W = W - eta * regression_gradient(W, x, y) @ P
        out.append(W)
    return out


@dataclass(frozen=True)
class Preconditioner:
    """A preconditioned-GD schedule: P (d, d) symmetric and step sizes η_k (K = len(etas) steps)."""

    P: torch.Tensor
    etas: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.etas) == 0:
            raise ConfigError("preconditioned GD needs at least one step size")

    @property
    def n_steps(self) -> int:
        return len(self.etas)


class PreconditionedGDPredictor(nn.Module):
    """K preconditioned GD steps (``params``) from W0 on each task's context, then ŷ = W_K x_q: tokens (B, T, D) of
    any ``layout`` -> ŷ (B, d_y); float64 inside."""

    def __init__(self, layout: ContextLayout, params: Preconditioner, W0: torch.Tensor | None = None) -> None:
        super().__init__()
        self.layout, self.params, self.W0 = layout, params, W0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x, y, x_query = _float64(*self.layout.split(tokens))
        W0 = None if self.W0 is None else self.W0.double()
        W = preconditioned_gd_weights_per_step(x, y, self.params.P.to(x), self.params.etas, W0)[-1]
        return _predict(W, x_query).to(tokens.dtype)


@phased("tuning the preconditioner")
def tune_preconditioner(
    x: torch.Tensor, y: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor, n_steps: int, eta: float,
    max_iter: int = 100,
) -> Preconditioner:
    """One symmetric P (d, d), shared by every task and every one of ``n_steps`` steps (step size 1: the scale
    lives in P), minimising the mean query loss on the given (held-out) tasks: L-BFGS (float64) from η I, ``eta``
    being tuned GD's step size for as many steps, so the result is never worse than that GD on these tasks (the
    start is kept when L-BFGS ends higher). Raises DivergenceError on a non-finite result."""
    if not isinstance(n_steps, int) or n_steps <= 0:
        raise ConfigError(f"n_steps must be a positive integer, got {n_steps!r}")
    x, y, x_query, y_query = _float64(x, y, x_query, y_query)
    d = x.shape[-1]
    start = eta * torch.eye(d, dtype=torch.float64, device=x.device)
    A = start.clone().requires_grad_(True)
    ones = (1.0,) * n_steps

    def loss_of(P: torch.Tensor) -> torch.Tensor:
        W = preconditioned_gd_weights_per_step(x, y, P, ones)[-1]
        return query_loss(_predict(W, x_query), y_query)

    opt = torch.optim.LBFGS([A], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe", tolerance_grad=1e-10,
                            tolerance_change=1e-12)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = loss_of((A + A.T) / 2)
        value.backward()
        return value

    opt.step(closure)
    with torch.no_grad():
        found = (A + A.T) / 2
        if not torch.isfinite(found).all():
            raise DivergenceError("tuning the preconditioner diverged (non-finite P)")
        best = found if loss_of(found) <= loss_of(start) else start
    return Preconditioner(best.detach(), ones)


# ---------------------------------------------------------------------------------------------------- GD, many steps
def gd_weights_at_steps(x: torch.Tensor, y: torch.Tensor, eta: float, steps: Sequence[int]) -> torch.Tensor:
    """W after each count in ``steps`` of GD steps of size η from 0, (len(steps), B, d_y, d), in closed form:
    with S/N = V diag(s) Vᵀ, W_k = (Xᵀ Y / N)ᵀ V diag((1 - (1 - η s)^k) / s) Vᵀ (k η where s = 0), so thousands of
    steps cost one eigendecomposition (checked against the explicit loop in ``icl_gd.constructions.algorithms``)."""
    if any(not isinstance(k, int) or k < 0 for k in steps):
        raise ConfigError(f"step counts must be non-negative integers, got {list(steps)!r}")
    N = x.shape[1]
    s, V = torch.linalg.eigh(gram(x) / N)  # (B, d), (B, d, d)
    s = s.clamp_min(0.0)
    b = (x.transpose(1, 2) @ y / N).transpose(1, 2) @ V  # (B, d_y, d): (XᵀY/N)ᵀ V
    tiny = s <= 1e-300
    out = []
    for k in steps:
        # (1 - (1 - ηs)^k) / s without cancellation: -expm1(k log1p(-ηs)) / s when 1 - ηs > 0.
        positive = eta * s < 1.0
        stable = -torch.expm1(k * torch.log1p(-torch.where(positive, eta * s, torch.zeros_like(s))))
        factor = torch.where(positive, stable, 1.0 - torch.pow(1.0 - eta * s, k))
        gain = torch.where(tiny, torch.full_like(s, k * eta), factor / torch.where(tiny, torch.ones_like(s), s))
        out.append((b * gain[:, None, :]) @ V.transpose(1, 2))
    return torch.stack(out)


def descent_step_size(x: torch.Tensor) -> float:
    """η = 1 / L with L = the largest λ_max(XᵀX)/N over the given (held-out) contexts x (B, N, d): the classical
    step for an L-smooth loss, so GD descends on every one of those tasks however many steps it takes."""
    L = float(torch.linalg.eigvalsh(gram(x.double()) / x.shape[1])[:, -1].max())
    if not L > 0:
        raise ConfigError("cannot choose a GD step size: every context is zero")
    return 1.0 / L


# ---------------------------------------------------------------------------------------------------- matching
@dataclass(frozen=True)
class Probe:
    """The comparison set: contexts x (B, N, d), y (B, N, d_y), true weights w (B, d_y, d), queries (B, M, d) drawn
    from the task's input law, and their clean targets (B, M, d_y) (float64)."""

    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor
    queries: torch.Tensor
    targets: torch.Tensor

    def tokens(self, layout: Any, dtype: torch.dtype) -> torch.Tensor:
        """(B·M, N+1, D): each context once per query, the query last with a zero y slot."""
        B, M, d = self.queries.shape
        context = torch.cat([self.x, self.y], dim=-1).repeat_interleave(M, dim=0)
        query = torch.cat([self.queries.reshape(B * M, 1, d), self.y.new_zeros(B * M, 1, layout.d_y)], dim=-1)
        return torch.cat([context, query], dim=1).to(dtype)


def probe_set(task: LinearRegressionTask, n_contexts: int, n_queries: int, seed: int, device) -> Probe:
    """``n_contexts`` test contexts (Stream.TEST, step 1: not the training-curve test tasks) and ``n_queries``
    fresh queries each (step 2), float64."""
    batch = task.sample(n_contexts, seed, 1, Stream.TEST, device, torch.float64)
    gen = make_generator(seed, 2, Stream.TEST, device)
    queries = task.inputs.sample((n_contexts, n_queries + 1, task.d), gen, device, torch.float64)[:, :-1]
    targets = queries @ batch.w.transpose(1, 2)
    return Probe(batch.x_context, batch.y_context, batch.w, queries, targets)


# Fu et al. (2023) compare a model with an algorithm through its errors and its induced weights on the same prompts,
# and match each layer to the step count of the algorithm whose errors are most similar (their eval_similarity.py:
# the argmax over a grid of step counts of the mean cosine). Their errors run over a prompt's positions (context
# lengths 1..n); our models are trained at one context length N, so ours run over M query points drawn for each
# context instead (an error vector per context, (M, d_y)), and the induced weights are the least-squares fit of the
# predictions on those queries (exact for a predictor linear in x_q, as every LSA stack without clipping is).
def linear_in_query_weights(predict, batch: int, d: int, dtype: torch.dtype = torch.float64,
                            device: torch.device | str = "cpu") -> torch.Tensor:
    """W (B, d_y, d) of a context-fixed predictor ŷ = W x_q: ``predict(x_query (B, d)) -> (B, d_y)`` read at the d
    unit vectors (an algorithm such as GD++, whose weights are not formed explicitly)."""
    eye = torch.eye(d, dtype=dtype, device=device)
    return torch.stack([predict(eye[i].expand(batch, d)) for i in range(d)], dim=-1)


def induced_weights(predictions: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """The weights (B, d_y, d) that best explain ``predictions`` (B, M, d_y) on ``queries`` (B, M, d) by ŷ = W x_q,
    least squares over the M queries (M ≥ d; exact when the predictor is linear in the query)."""
    if queries.shape[1] < queries.shape[2]:
        raise ConfigError(f"induced weights need at least d = {queries.shape[2]} queries per context, got "
                          f"{queries.shape[1]}")
    # driver "gels" (QR without pivoting; the random queries have full column rank): the CPU default "gelsy" gave
    # last-digit differences between two processes on identical inputs, so the same seed gave other numbers.
    return torch.linalg.lstsq(queries, predictions, driver="gels").solution.transpose(1, 2)


def _unit(v: torch.Tensor) -> torch.Tensor:
    """Rows of v (B, ...) flattened and scaled to unit norm (a zero row stays zero)."""
    flat = v.flatten(1)
    return flat / flat.norm(dim=1, keepdim=True).clamp_min(torch.finfo(flat.dtype).tiny)


def mean_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean over the B rows of cos(a_i, b_i), each row flattened: a, b (B, ...) -> scalar."""
    return (_unit(a) * _unit(b)).sum(dim=1).mean()


def similarity_grid(model: Sequence[torch.Tensor], algorithm: Sequence[torch.Tensor]) -> torch.Tensor:
    """(L, S) mean cosines of every model layer's tensor (B, ...) with every algorithm step's (B, ...): SimE on
    errors, SimW on induced weights."""
    A = torch.stack([_unit(t) for t in algorithm])  # (S, B, F)
    return torch.stack([(_unit(m)[None] * A).sum(-1).mean(-1) for m in model])


def matched_steps(similarity: torch.Tensor, steps: Sequence[int]) -> list[int]:
    """For each layer (row of ``similarity`` (L, S)), the step count whose similarity is highest (Fu et al.)."""
    return [int(steps[i]) for i in similarity.argmax(dim=1).tolist()]


# ---------------------------------------------------------------------------------------------------- layers
@dataclass(frozen=True)
class AlgorithmRun:
    """One algorithm on the probe set: weights (S, B, d_y, d) after each of the step counts ``steps``."""

    steps: tuple[int, ...]
    weights: torch.Tensor


@phased("running the algorithms on the probe set")
def run_algorithms(probe: Probe, gdpp: Any, pgd: Preconditioner, gd_eta: float, newton_steps: int,
                   gd_steps: Sequence[int], tuned_steps: int) -> dict[str, AlgorithmRun]:
    """Every algorithm's weights at every step count of its grid: Iterative Newton for 0..``newton_steps``
    iterations, GD at the fixed step ``gd_eta`` for each count in ``gd_steps``, GD++ (the first (η, γ) of
    ``gdpp``) and preconditioned GD (``pgd``'s P and first η) for 1..``tuned_steps`` steps."""
    x, y = probe.x, probe.y
    newton = tuple(range(newton_steps + 1))
    tuned = tuple(range(1, tuned_steps + 1))
    B, d = x.shape[0], x.shape[-1]
    gdpp_weights = linear_in_query_weights(
        lambda q: gdpp_predictions_per_step(x, y, q, gdpp.etas[:1] * len(tuned), gdpp.gammas[:1] * len(tuned)),
        B, d, device=x.device)[1:]  # (S, B, d_y, d): drop step 0
    pgd_weights = preconditioned_gd_weights_per_step(x, y, pgd.P.to(x), pgd.etas[:1] * len(tuned))[1:]
    return {
        "newton": AlgorithmRun(newton, torch.stack(newton_weights_per_step(x, y, newton_steps))),
        "gd": AlgorithmRun(tuple(gd_steps), gd_weights_at_steps(x, y, gd_eta, gd_steps)),
        "gdpp": AlgorithmRun(tuned, gdpp_weights),
        "pgd": AlgorithmRun(tuned, torch.stack(pgd_weights)),
    }


def errors_of(weights: torch.Tensor, probe: Probe) -> torch.Tensor:
    """Errors ŷ - y (…, B, M, d_y) on the probe's queries of weights (…, B, d_y, d)."""
    return probe.queries @ weights.transpose(-1, -2) - probe.targets


def match_layers(predictions: torch.Tensor, probe: Probe, runs: dict[str, AlgorithmRun]
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics (per algorithm: matched steps per layer, SimE / SimW / loss there) and tidy rows (every layer x
    algorithm x step count) from a model's per-layer predictions (K, B, M, d_y) on the probe's queries."""
    errors = predictions - probe.targets  # (K, B, M, d_y)
    weights = torch.stack([induced_weights(p, probe.queries) for p in predictions])  # (K, B, d_y, d)
    layer_loss = [0.5 * float((e ** 2).sum(-1).mean()) for e in errors]
    metrics: dict[str, Any] = {"loss_trained_per_layer": layer_loss}
    rows: list[dict[str, Any]] = []
    for name, run in runs.items():
        algo_errors = errors_of(run.weights, probe)
        sim_e = similarity_grid(list(errors), list(algo_errors))  # (K, S)
        sim_w = similarity_grid(list(weights), list(run.weights))
        loss = [0.5 * float((e ** 2).sum(-1).mean()) for e in algo_errors]
        matched = matched_steps(sim_e, run.steps)
        at = [run.steps.index(k) for k in matched]
        metrics[f"matched_steps_{name}"] = matched
        metrics[f"sim_errors_{name}"] = [float(sim_e[j, i]) for j, i in enumerate(at)]
        metrics[f"sim_weights_{name}"] = [float(sim_w[j, i]) for j, i in enumerate(at)]
        metrics[f"loss_{name}_matched"] = [loss[i] for i in at]
        # A match at the grid's last step count may lie beyond it (censored): flagged per layer.
        metrics[f"matched_at_grid_end_{name}"] = [float(i == len(run.steps) - 1) for i in at]
        rows += [{"layer": j + 1, "algorithm": name, "steps": k, "sim_errors": float(sim_e[j, i]),
                  "sim_weights": float(sim_w[j, i]), "loss_algorithm": loss[i], "loss_layer": layer_loss[j],
                  "matched": int(at[j] == i)} for j in range(len(errors)) for i, k in enumerate(run.steps)]
    return metrics, rows
