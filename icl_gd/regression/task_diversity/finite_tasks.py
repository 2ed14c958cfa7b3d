"""Linear attention pretrained on K tasks at finite d, trained exactly, against Lu et al. (PNAS 2025)'s asymptotics.

The set-up is theirs (``asymptotics``' scaling): K = ⌊κ d⌋ tasks w_k ~ N(0, I_d) (K, d) drawn once; n = τ d²
pretraining contexts, each of a task drawn uniformly from the K with ℓ = α d fresh pairs x_i ~ N(0, I/d),
y_i = w_kᵀx_i + ε_i, ε_i ~ N(0, ρ), and a query; the layer ŷ = x_qᵀ Γ h, h = (d/ℓ) Σ_i y_i x_i, is linear in the
d² features x_q ⊗ h, so training it on the squared query error is (ridge) least squares, solved exactly
(``fit_preconditioner``). Gradient descent from Γ = 0 on the same loss stays in the span of the features and so
reaches the same Γ: the least-squares solution when n ≥ d², the minimum-norm one below (tests/
test_theory_asymptotics.py runs it). Errors over fresh contexts are exact for a given Γ (``layer_error``); the
baselines are scored on fresh test contexts, exactly over the query: ridge per context (the Bayes posterior mean
for fresh tasks w ~ N(0, I)) and dMMSE (Raventós et al. 2023: the posterior mean over the K tasks).

Every draw comes from ``make_generator(seed, step, stream)`` with step = draw · 10⁹ + d · 10⁶ + K: the tasks from
POOL, the pretraining contexts from TRAIN (both of ``seed``), the baselines' test contexts from TEST (of
``test_seed``), so a draw at one (d, κ) does not depend on which other d or κ are swept. All arithmetic is
float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icl_gd.core.config import (check_settings, positive_int, require_non_negative, require_positive, setting)
from icl_gd.core.errors import ConfigError
from icl_gd.core.stats import spread
from icl_gd.regression.tasks import Stream, make_generator
from icl_gd.regression.task_diversity.asymptotics import asymptotic_errors
from icl_gd.regression.task_diversity.lu_simulations import load_lu_simulations

F64 = torch.float64
# The κ of the authors' stored figure (mletey/incontext-cleanup, quick_and_easy_figure/run.py).
LU_KAPPAS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.6, 2.0, 4.0, 8.0, 16.0, 32.0)
_CHUNK = 512  # contexts sampled at once: (512, ℓ + 1, d) inputs, 42 MB at d = 32


def _require_kappas(name: str, kappas: tuple[float, ...]) -> None:
    if not isinstance(kappas, tuple) or not kappas:
        raise ConfigError(f"{name} must be a non-empty tuple of task diversities, got {kappas!r}")
    for kappa in kappas:
        require_positive(name, kappa)


def _require_dimension(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= 256:
        raise ConfigError(f"{name} must be an integer in 2..256 (the layer has d² features), got {value!r}")


@dataclass(frozen=True)
class FiniteTaskConfig:
    """One κ sweep at finite d in Lu et al.'s scaling; the defaults are their stored figure's (α = τ = 10,
    ρ = 0.01, the 12 κ of ``LU_KAPPAS``) at d = 20."""

    d: int = setting(20, "token dimension d", check=_require_dimension)
    alpha: float = setting(10.0, "context length ℓ = round(α d)", check=require_positive)
    tau: float = setting(10.0, "pretraining contexts n = round(τ d²)", check=require_positive)
    rho: float = setting(0.01, "label noise variance ρ (their scaling: x ~ N(0, I/d))", check=require_positive)
    ridge: float = setting(0.0, "ridge λ, penalty (n/d) λ ‖Γ‖² on the summed squared error; 0: least squares, "
                                "or the minimum-norm solution when n < d²", check=require_non_negative)
    kappas: tuple[float, ...] = setting(LU_KAPPAS, "task diversities κ; K = ⌊κ d⌋ tasks", check=_require_kappas)
    draws: int = positive_int(5, "independent draws (tasks, pretraining and test contexts) per κ")
    test_contexts: int = positive_int(1000, "fresh test contexts per κ, draw and law for the baselines")

    def __post_init__(self) -> None:
        check_settings(self)
        for kappa in self.kappas:
            self.n_tasks(kappa)
        if self.n_context < 1 or self.n_pretraining < 1:
            raise ConfigError(f"α d = {self.alpha * self.d:g} and τ d² = {self.tau * self.d ** 2:g} must each round "
                              "to at least 1")

    def n_tasks(self, kappa: float) -> int:
        """K = ⌊κ d⌋ (as the authors' simulations), at least 1 and below 10⁶ (the draw address holds K)."""
        count = math.floor(kappa * self.d + 1e-9)
        if not 1 <= count < 1_000_000:
            raise ConfigError(f"κ = {kappa:g} at d = {self.d} gives K = {count} tasks; K must be in 1..999999")
        return count

    @property
    def n_context(self) -> int:
        return round(self.alpha * self.d)

    @property
    def n_pretraining(self) -> int:
        return round(self.tau * self.d ** 2)


# ------------------------------------------------------------------------------------------------------ sampling
def draw_contexts(tasks: torch.Tensor, n_context: int, rho: float, gen: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Contexts of the given tasks (B, d): inputs x (B, ℓ, d) ~ N(0, I/d) and labels y = x w + ε (B, ℓ),
    ε ~ N(0, ρ)."""
    batch, d = tasks.shape
    x = torch.randn(batch, n_context, d, generator=gen, device=tasks.device, dtype=F64).div_(math.sqrt(d))
    noise = torch.randn(batch, n_context, generator=gen, device=tasks.device, dtype=F64).mul_(math.sqrt(rho))
    return x, torch.einsum("bld,bd->bl", x, tasks) + noise


def context_summary(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """h = (d/ℓ) Σ_i y_i x_i (B, d) of contexts x (B, ℓ, d), y (B, ℓ): E[h | w] = w."""
    return torch.einsum("bl,bld->bd", y, x).mul_(x.shape[2] / x.shape[1])


@dataclass(frozen=True)
class Pretraining:
    """n pretraining contexts reduced to what the layer reads: queries x_q (n, d), summaries h (n, d), query
    labels y_q (n,), and each context's task index (n,)."""

    x_query: torch.Tensor
    h: torch.Tensor
    y_query: torch.Tensor
    task_index: torch.Tensor


def draw_summaries(tasks: torch.Tensor, n_context: int, rho: float, gen: torch.Generator) -> torch.Tensor:
    """h = (d/ℓ) Xᵀ(X w + ε) (B, d) of a context of ℓ pairs for each task w of ``tasks`` (B, d), drawn exactly in
    law with 2ℓ + d normals instead of ℓ (d + 1): the inputs' law is rotation invariant, so in a basis whose first
    vector is ŵ = w/‖w‖, u = X ŵ ~ N(0, I_ℓ/d) and the rest X_⊥ (ℓ, d - 1) are independent, and with
    v = ‖w‖ u + ε,

        h = (d/ℓ) [(uᵀv) ŵ + X_⊥ᵀ v],   X_⊥ᵀ v | v ~ N(0, (‖v‖²/d) I_{d-1}),

    drawn as (‖v‖/√d) (I - ŵŵᵀ) g with g ~ N(0, I_d). ``context_summary`` of ``draw_contexts`` has the same law
    (constructions/theory_asymptotics.py checks the two moments of h given w)."""
    batch, d = tasks.shape
    u = torch.randn(batch, n_context, generator=gen, device=tasks.device, dtype=F64).div_(math.sqrt(d))
    noise = torch.randn(batch, n_context, generator=gen, device=tasks.device, dtype=F64).mul_(math.sqrt(rho))
    g = torch.randn(batch, d, generator=gen, device=tasks.device, dtype=F64)
    norm = tasks.norm(dim=1, keepdim=True)  # (B, 1)
    unit = tasks / norm
    v = norm * u + noise  # (B, ℓ)
    along = (u * v).sum(1, keepdim=True)  # uᵀv
    across = v.norm(dim=1, keepdim=True) / math.sqrt(d) * (g - (g * unit).sum(1, keepdim=True) * unit)
    return (along * unit + across).mul_(d / n_context)


def draw_pretraining(tasks: torch.Tensor, n_contexts: int, n_context: int, rho: float, gen: torch.Generator
                     ) -> Pretraining:
    """n contexts of ℓ pairs and a query, each of a task drawn uniformly from ``tasks`` (K, d): each context's
    summary h by ``draw_summaries``, its query x_q ~ N(0, I/d) and label wᵀx_q + ε, in chunks of 512."""
    index = torch.randint(0, tasks.shape[0], (n_contexts,), generator=gen, device=tasks.device)
    queries, summaries, labels = [], [], []
    for start in range(0, n_contexts, _CHUNK):
        w = tasks[index[start:start + _CHUNK]]
        summaries.append(draw_summaries(w, n_context, rho, gen))
        x, y = draw_contexts(w, 1, rho, gen)
        queries.append(x[:, 0])
        labels.append(y[:, 0])
    return Pretraining(torch.cat(queries), torch.cat(summaries), torch.cat(labels), index)


# ------------------------------------------------------------------------------------------------------ training
def attention_features(x_query: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The layer's features vec(x_q hᵀ) (n, d²), row-major, so ŷ = x_qᵀ Γ h = features @ Γ.flatten()."""
    return (x_query[:, :, None] * h[:, None, :]).flatten(1)


def fit_preconditioner(x_query: torch.Tensor, h: torch.Tensor, y_query: torch.Tensor, ridge: float = 0.0
                       ) -> torch.Tensor:
    """Γ (d, d) minimising Σ_μ (y_μ - x_μᵀ Γ h_μ)² + (n/d) λ ‖Γ‖_F² over the n contexts (Lu et al.'s objective):
    with Z the features (n, d²), (ZᵀZ + (n/d) λ I)⁻¹ Zᵀy by Cholesky when n ≥ d² (ZᵀZ summed in chunks), else
    Zᵀ (ZZᵀ + (n/d) λ I)⁻¹ y, the minimum-norm interpolant at λ = 0. A singular system (rank-deficient Z) falls
    back to the pseudo-inverse's minimum-norm solution."""
    require_non_negative("ridge", ridge)
    n, d = h.shape
    shift = n / d * ridge
    if n >= d * d:
        gram = torch.zeros(d * d, d * d, dtype=h.dtype, device=h.device)
        moment = torch.zeros(d * d, dtype=h.dtype, device=h.device)
        for start in range(0, n, 4 * _CHUNK):
            z = attention_features(x_query[start:start + 4 * _CHUNK], h[start:start + 4 * _CHUNK])
            gram.addmm_(z.T, z)
            moment.addmv_(z.T, y_query[start:start + 4 * _CHUNK])
        gram.diagonal().add_(shift)
        factor, info = torch.linalg.cholesky_ex(gram)
        if int(info) == 0:
            return torch.cholesky_solve(moment[:, None], factor)[:, 0].reshape(d, d)
        return (torch.linalg.pinv(gram, hermitian=True) @ moment).reshape(d, d)
    z = attention_features(x_query, h)
    kernel = z @ z.T
    kernel.diagonal().add_(shift)
    factor, info = torch.linalg.cholesky_ex(kernel)
    if int(info) == 0:
        return (z.T @ torch.cholesky_solve(y_query[:, None], factor)[:, 0]).reshape(d, d)
    return (torch.linalg.pinv(z) @ y_query).reshape(d, d)


# ---------------------------------------------------------------------------------------------------- its errors
def layer_error(gamma: torch.Tensor, task_second_moment: torch.Tensor, n_context: int, rho: float) -> torch.Tensor:
    """E(x_qᵀ Γ h - y_q)² over fresh contexts of ℓ = ``n_context`` pairs, tasks of second moment Σ_w = E[w wᵀ]
    (d, d), their scaling, exactly (a 0-d tensor):

        e = (1/d) [tr(Γ H Γᵀ) - 2 tr(Γ Σ_w) + tr Σ_w] + ρ,   H = E[h hᵀ] = (1 + 1/ℓ) Σ_w + (tr Σ_w/d + ρ)(d/ℓ) I,

    from E[h hᵀ | w] = (1 + 1/ℓ) w wᵀ + (|w|²/d + ρ)(d/ℓ) I (the Gaussian fourth moment) and E[h wᵀ] = Σ_w. It
    is (2/d) ``one_layer.lsa_risk``(Γ, I, ℓ, label_noise=√(dρ)) at Σ_w = I. Σ_w = I: fresh tasks (ICL);
    Σ_w = WᵀW/K: uniform over the K pretraining tasks (IDG)."""
    d = gamma.shape[0]
    if gamma.shape != (d, d) or task_second_moment.shape != (d, d):
        raise ConfigError(f"Γ {tuple(gamma.shape)} and Σ_w {tuple(task_second_moment.shape)} must both be (d, d)")
    require_non_negative("rho", rho)
    eye = torch.eye(d, dtype=gamma.dtype, device=gamma.device)
    power = torch.trace(task_second_moment)
    second = (1 + 1 / n_context) * task_second_moment + (power / d + rho) * (d / n_context) * eye
    return (torch.trace(gamma @ second @ gamma.T) - 2 * torch.trace(gamma @ task_second_moment) + power) / d + rho


# ------------------------------------------------------------------------------------------------------ baselines
def ridge_estimate(x: torch.Tensor, y: torch.Tensor, rho: float) -> torch.Tensor:
    """The posterior mean (XᵀX + ρ I)⁻¹ Xᵀy (B, d) of each context x (B, ℓ, d), y (B, ℓ) under the prior
    w ~ N(0, I_d) and noise variance ρ: the Bayes-optimal estimate for fresh tasks."""
    gram = x.transpose(1, 2) @ x
    gram.diagonal(dim1=1, dim2=2).add_(rho)
    return torch.linalg.solve(gram, torch.einsum("bld,bl->bd", x, y))


def dmmse_estimate(x: torch.Tensor, y: torch.Tensor, tasks: torch.Tensor, rho: float) -> torch.Tensor:
    """The discrete MMSE estimate (Raventós et al. 2023) Σ_k p_k w_k (B, d): the posterior mean when the task is
    uniform over ``tasks`` (K, d), p_k ∝ exp(-‖y - X w_k‖² / (2ρ)) (the Gaussian likelihood of the context),
    with ‖y - X w_k‖² = ‖y‖² - 2 w_kᵀXᵀy + w_kᵀ XᵀX w_k, normalised by a softmax (no overflow)."""
    require_positive("rho", rho)
    gram = x.transpose(1, 2) @ x  # (B, d, d)
    moment = torch.einsum("bld,bl->bd", x, y)  # (B, d)
    outer = (tasks[:, :, None] * tasks[:, None, :]).flatten(1)  # w_k w_kᵀ (K, d²)
    quadratic = gram.flatten(1) @ outer.T  # w_kᵀ XᵀX w_k (B, K), one product
    log_likelihood = (2 * moment @ tasks.T - quadratic - (y * y).sum(1, keepdim=True)) / (2 * rho)
    return torch.softmax(log_likelihood, dim=1) @ tasks


def estimate_error(estimate: torch.Tensor, w: torch.Tensor, rho: float) -> torch.Tensor:
    """E(x_qᵀ ŵ - y_q)² over the query alone, x_q ~ N(0, I/d): ‖ŵ - w‖²/d + ρ per context (B,)."""
    return ((estimate - w) ** 2).sum(1) / w.shape[1] + rho


# ------------------------------------------------------------------------------------------------------ the sweep
_ERRORS = ("icl", "idg", "ridge_icl", "ridge_idg", "dmmse_icl", "dmmse_idg")


@dataclass(frozen=True)
class FiniteTaskPoint:
    """One (κ, draw), their scaling: the trained layer's exact ``icl`` (fresh tasks) and ``idg`` (its K tasks)
    errors, and the baselines' mean errors over the test contexts (ridge per context, dMMSE), on fresh tasks and on
    the K tasks."""

    kappa: float
    draw: int
    n_tasks: int
    icl: float
    idg: float
    ridge_icl: float
    ridge_idg: float
    dmmse_icl: float
    dmmse_idg: float


@dataclass(frozen=True)
class FiniteTaskResult:
    """A κ sweep: its ``config``, ``seed`` and ``points`` (κ-major, draws within)."""

    config: FiniteTaskConfig
    seed: int
    points: tuple[FiniteTaskPoint, ...]

    def rows(self) -> list[dict]:
        """One tidy row per (κ, draw): κ, draw, d, K, ℓ, n, the six errors of ``FiniteTaskPoint`` and
        ``task_generalisation`` = icl - idg, then the d → ∞ values at the nominal κ: ``theory_icl``,
        ``theory_idg``, ``theory_task_generalisation`` (None for λ > 0) and ``theory_bayes_icl``. Their scaling
        (plain squared error, x ~ N(0, I/d)); ``asymptotics.project_risk`` converts."""
        config, out = self.config, []
        for point in self.points:
            theory = asymptotic_errors(config.alpha, point.kappa, config.tau, config.rho, config.ridge)
            row = {"kappa": point.kappa, "draw": point.draw, "d": config.d, "n_tasks": point.n_tasks,
                   "n_context": config.n_context, "n_pretraining": config.n_pretraining}
            row |= {name: getattr(point, name) for name in _ERRORS}
            row |= {"task_generalisation": point.icl - point.idg, "theory_icl": theory.icl,
                    "theory_idg": theory.idg, "theory_task_generalisation": theory.task_generalisation,
                    "theory_bayes_icl": theory.bayes_icl}
            out.append(row)
        return out

    def summary(self) -> list[dict]:
        """One row per κ: the mean and 95% t-interval over draws (``core.stats.spread``) of every error of
        ``rows`` (``<name>``, ``<name>_low``, ``<name>_high``), the d → ∞ values, and the authors' stored
        g_task at this d (``authors_task_generalisation`` and its single-draw spread; None where not stored)."""
        stored = load_lu_simulations().series_of("linear attention", self.config.d)
        rows, out = self.rows(), []
        for kappa in dict.fromkeys(p.kappa for p in self.points):
            group = [r for r in rows if r["kappa"] == kappa]
            entry = {key: group[0][key] for key in ("kappa", "d", "n_tasks", "theory_icl", "theory_idg",
                                                    "theory_task_generalisation", "theory_bayes_icl")}
            entry["draws"] = len(group)
            for name in (*_ERRORS, "task_generalisation"):
                values = spread([r[name] for r in group])
                entry |= {name: values.mean, f"{name}_low": values.low, f"{name}_high": values.high}
            theirs = stored.at(kappa) if stored is not None else None
            entry["authors_task_generalisation"] = None if theirs is None else theirs[0]
            entry["authors_task_generalisation_spread"] = None if theirs is None else theirs[1]
            out.append(entry)
        return out


def _address(d: int, n_tasks: int, draw: int) -> int:
    return draw * 1_000_000_000 + d * 1_000_000 + n_tasks


def run_point(config: FiniteTaskConfig, kappa: float, draw: int, seed: int, device: str | torch.device = "cpu",
              test_seed: int | None = None) -> FiniteTaskPoint:
    """One draw at one κ: K tasks, n pretraining contexts, the exactly trained Γ and its exact errors, and the
    baselines on ``test_contexts`` fresh contexts (of ``test_seed``; None: ``seed``) of fresh tasks and as many of
    the K tasks."""
    d, n_tasks = config.d, config.n_tasks(kappa)
    step = _address(d, n_tasks, draw)
    tasks = torch.randn(n_tasks, d, generator=make_generator(seed, step, Stream.POOL, device), device=device,
                        dtype=F64)
    data = draw_pretraining(tasks, config.n_pretraining, config.n_context, config.rho,
                            make_generator(seed, step, Stream.TRAIN, device))
    gamma = fit_preconditioner(data.x_query, data.h, data.y_query, config.ridge)
    eye = torch.eye(d, dtype=F64, device=device)
    errors = {"icl": float(layer_error(gamma, eye, config.n_context, config.rho)),
              "idg": float(layer_error(gamma, tasks.T @ tasks / n_tasks, config.n_context, config.rho))}
    test = make_generator(seed if test_seed is None else test_seed, step, Stream.TEST, device)
    for law in ("icl", "idg"):
        ridge_sum = dmmse_sum = 0.0
        for start in range(0, config.test_contexts, _CHUNK):
            batch = min(_CHUNK, config.test_contexts - start)
            if law == "icl":
                w = torch.randn(batch, d, generator=test, device=device, dtype=F64)
            else:
                w = tasks[torch.randint(0, n_tasks, (batch,), generator=test, device=device)]
            x, y = draw_contexts(w, config.n_context, config.rho, test)
            ridge_sum += float(estimate_error(ridge_estimate(x, y, config.rho), w, config.rho).sum())
            dmmse_sum += float(estimate_error(dmmse_estimate(x, y, tasks, config.rho), w, config.rho).sum())
        errors[f"ridge_{law}"] = ridge_sum / config.test_contexts
        errors[f"dmmse_{law}"] = dmmse_sum / config.test_contexts
    return FiniteTaskPoint(kappa=kappa, draw=draw, n_tasks=n_tasks, **errors)


def run_finite_tasks(config: FiniteTaskConfig, seed: int, device: str | torch.device = "cpu",
                     test_seed: int | None = None) -> FiniteTaskResult:
    """The κ sweep of ``config``: ``draws`` independent draws at every κ of ``kappas`` (``run_point``)."""
    for name, value in (("seed", seed), ("test_seed", 0 if test_seed is None else test_seed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    points = tuple(run_point(config, kappa, draw, seed, device, test_seed) for kappa in config.kappas
                   for draw in range(config.draws))
    return FiniteTaskResult(config=config, seed=seed, points=points)
