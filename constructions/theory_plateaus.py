"""The plateau levels of separate key and query weights (``icl_gd.regression.theory.plateaus``) against restricted
minima solved independently, against the authors' own numbers and Monte Carlo; the hand-set heads of the fixed
point M_m (``icl_gd.regression.theory.heads.pcr_heads``) as in-context principal-component regression.

The laws: Zhang et al.'s (eigenvalues ∝ 1..d with trace 1 in a random basis) at d = 4, N = 31 and at d = 5, N = 20
with label noise τ = 0.5, and a random covariance at d = 3, N = 2.

Exact, in float64:
- every level L_m against the minimum of ``lsa_risk`` over Γ = E_m A E_mᵀ (E_m the top-m eigenvectors, ordered here
  by their own eigenvalues), A (m, m) solved from the quadratic's autograd Hessian and gradient: no closed form;
- L_0 = ½ (tr Λ + τ²), L_d = R(Γ*), Γ_d = Γ*, and R(Γ_m) = L_m;
- the paper's 2^d fixed points: over every subset S of the eigenvectors, the restricted minimum of R; the best
  of each size m is L_m (the top m), every other subset costs more;
- 2 L_m against ``loss_at_saddle`` as printed in the authors' notebook (no ½ in their loss);
- the heads of ``pcr_heads(m)``: their prediction, summed head by head, is x_qᵀ Γ_m h (1e-12), and they are a
  fixed point: the autograd gradient of R with respect to every v_h, k_h, q_h vanishes;
- the merged layer with Γ is the project's LSA layer with QK_xx = Γ and (P W_V)_yy = -1/N (1e-12);
- the loss training descends (``heads.EmpiricalLoss``, a quadratic form in Γ) equals each layer's loss over the
  same tasks' tokens (1e-12);
- float32 against float64 at 1e-5.

Statistical: every level L_0, ..., L_4 of the authors' law at d = 4, N = 31 against the sampled query loss of Γ_m
on the project's sampler (``LinearRegressionTask`` with ``NormalInputs(covariance=...)``, 100 000 tasks in
float64, one line each); each passes when its relative error is below both 4 of its standard errors and 3%.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import torch

from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.theory.heads import (EmpiricalLoss, MergedAttention, MergedWeights, SeparateAttention,
                                           SeparateWeights, pcr_heads)
from icl_gd.regression.theory.one_layer import lsa_risk, one_layer_optimum, optimal_preconditioner
from icl_gd.regression.theory.plateaus import linear_spectrum_covariance, pcr_preconditioner, plateau_levels
from icl_gd.regression.tokens import ConcatLayout

from icl_gd.constructions.prop1 import stacked_model
from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare, merge

SEED = 2025
EXACT = 1e-10

# The authors' notebook prints loss_at_saddle(D=4) at N = 31, the losses E(ŷ - y_q)² of M_0..M_4 (no ½):
# yedizhang/linattn-icl, commit 9a481d5901275b34866cfc12260fc4ec5c891b16, plot_loss.ipynb, the output of
# `saddle = loss_at_saddle(D); print(saddle)`. Printed to 8 decimals.
AUTHORS_LOSS_AT_SADDLE = (1.0, 0.64057971, 0.37737216, 0.2098046, 0.13599507)

Levels = Callable[..., torch.Tensor]  # plateau_levels' signature


def _random_covariance(seed: int, d: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(d, d, generator=gen, dtype=torch.float64)
    return a @ a.T / d + 0.1 * torch.eye(d, dtype=torch.float64)


def _laws(seed: int = SEED) -> list[tuple[torch.Tensor, int, float]]:
    """(Λ, N, τ): the authors' law at d = 4, N = 31; at d = 5, N = 20 with τ = 0.5; a random Λ at d = 3, N = 2."""
    return [(linear_spectrum_covariance(4, seed), 31, 0.0), (linear_spectrum_covariance(5, seed + 1), 20, 0.5),
            (_random_covariance(seed + 2, 3), 2, 0.0)]


def restricted_minimum(covariance: torch.Tensor, n_context: int, basis: torch.Tensor,
                       label_noise: float = 0.0) -> torch.Tensor:
    """min over A (k, k) of R(B A Bᵀ), B = ``basis`` (d, k): R is quadratic in A, so A* = -Hess⁻¹ ∇ at A = 0, both
    by autograd (a 0-d tensor; R(0) when k = 0)."""
    k = basis.shape[1]

    def risk(flat: torch.Tensor) -> torch.Tensor:
        return lsa_risk(basis @ flat.view(k, k) @ basis.T, covariance, n_context, label_noise=label_noise)

    zero = torch.zeros(k * k, dtype=torch.float64)
    if k == 0:
        return risk(zero)
    gradient, hessian = torch.func.grad(risk)(zero), torch.func.hessian(risk)(zero)
    return risk(torch.linalg.solve(hessian, -gradient))


def _descending(covariance: torch.Tensor) -> torch.Tensor:
    """Λ's unit eigenvectors as columns, ordered by their eigenvalues, largest first (sorted here, not by eigh)."""
    values, vectors = torch.linalg.eigh(covariance)
    return vectors[:, torch.argsort(values, descending=True)]


def check_levels_are_restricted_minima(seed: int = SEED, tolerance: float = EXACT,
                                       levels: Levels = plateau_levels) -> CheckResult:
    """``levels`` (the closed form by default) against ``restricted_minimum`` over the top-m eigenvectors, m = 0..d,
    on the laws of ``_laws``."""
    results = []
    for covariance, n, tau in _laws(seed):
        vectors = _descending(covariance)
        solved = torch.stack([restricted_minimum(covariance, n, vectors[:, :m], tau)
                              for m in range(covariance.shape[0] + 1)])
        results.append(compare(levels(covariance, n, tau), solved, tolerance))
    return merge(results)


def check_ends_and_preconditioners(seed: int = SEED, tolerance: float = EXACT,
                                   levels: Levels = plateau_levels) -> CheckResult:
    """L_0 = ½ (tr Λ + τ²); L_d = R(Γ*) (``lsa_risk`` and ``one_layer_optimum``); Γ_d = Γ*; R(Γ_m) = L_m for every
    m; on the laws of ``_laws``."""
    results = []
    for covariance, n, tau in _laws(seed):
        d, closed = covariance.shape[0], levels(covariance, n, tau)
        star = optimal_preconditioner(covariance, n, tau)
        results += [compare(closed[0], 0.5 * (torch.trace(covariance) + tau ** 2), tolerance),
                    compare(closed[-1], lsa_risk(star, covariance, n, label_noise=tau), tolerance),
                    compare(closed[-1], torch.tensor(one_layer_optimum(covariance, n, tau).lsa_loss,
                                                     dtype=torch.float64), tolerance),
                    compare(pcr_preconditioner(covariance, n, d, tau), star, tolerance),
                    compare(torch.stack([lsa_risk(pcr_preconditioner(covariance, n, m, tau), covariance, n,
                                                  label_noise=tau) for m in range(d + 1)]), closed, tolerance)]
    return merge(results)


def check_every_subset(seed: int = SEED, tolerance: float = EXACT, levels: Levels = plateau_levels) -> CheckResult:
    """Zhang et al.'s 2^d fixed points M(S_m): the restricted minimum over span{e_k : k ∈ S} for every subset S;
    the least over the subsets of each size m against L_m. ``detail``: the smallest excess of a subset that is not
    the top m."""
    results, excess, counted = [], math.inf, 0
    for covariance, n, tau in _laws(seed):
        vectors, d = _descending(covariance), covariance.shape[0]
        best = []
        for m in range(d + 1):
            minima = {subset: restricted_minimum(covariance, n, vectors[:, list(subset)], tau)
                      for subset in itertools.combinations(range(d), m)}
            counted += len(minima)
            best.append(min(minima.values()))
            top = tuple(range(m))
            others = [float(v - minima[top]) for s, v in minima.items() if s != top]
            excess = min([excess, *others])
        results.append(compare(levels(covariance, n, tau), torch.stack(best), tolerance))
    return merge(results, f"{counted} subsets; the cheapest that is not the top m costs {excess:+.2e} above L_m")


def check_authors_values(tolerance: float = 1e-7, levels: Levels = plateau_levels) -> CheckResult:
    """2 L_m at d = 4, N = 31 on their eigenvalues (4, 3, 2, 1)/10 against ``AUTHORS_LOSS_AT_SADDLE`` (printed to 8
    decimals: tolerance 1e-7)."""
    covariance = linear_spectrum_covariance(4, SEED)
    expected = torch.tensor(AUTHORS_LOSS_AT_SADDLE, dtype=torch.float64)
    result = compare(2 * levels(covariance, 31), expected, tolerance)
    return CheckResult(result.max_abs_error, result.max_rel_error, tolerance,
                       "2 L_m = " + ", ".join(f"{v:.8f}" for v in (2 * levels(covariance, 31)).tolist()))


def _batch(covariance: torch.Tensor, n_context: int, label_noise: float, n_tasks: int, seed: int, step: int = 0):
    task = LinearRegressionTask(d=covariance.shape[0], n_context=n_context, label_noise=label_noise,
                                inputs=NormalInputs(covariance=tuple(map(tuple, covariance.tolist()))))
    return task.sample(n_tasks, seed, step, Stream.TEST, dtype=torch.float64)


def _preconditioned(batch, gamma: torch.Tensor) -> torch.Tensor:
    """x_qᵀ Γ h (B,), h = (1/N) Σ_i y_i x_i: the prediction of Γ, read from the batch without tokens."""
    h = (batch.y_context * batch.x_context).mean(1)
    return torch.einsum("bi,ij,bj->b", batch.x_query, gamma, h)


def check_pcr_heads_predict(seed: int = SEED, tolerance: float = 1e-12, n_tasks: int = 2000,
                            heads: Callable[..., object] = pcr_heads) -> CheckResult:
    """``SeparateAttention`` loaded with ``heads(Λ, N, m, d + 1)`` on the project's tokens (float64) against
    x_qᵀ Γ_m h computed from the batch, for every m, on the laws of ``_laws``."""
    results = []
    for covariance, n, tau in _laws(seed):
        d = covariance.shape[0]
        batch = _batch(covariance, n, tau, n_tasks, seed)
        tokens = ConcatLayout(d).tokens(batch)
        for m in range(d + 1):
            model = SeparateAttention(heads(covariance, n, m, d + 1, tau))
            expected = _preconditioned(batch, pcr_preconditioner(covariance, n, m, tau))
            results.append(compare(model(tokens)[:, 0].detach(), expected, tolerance))
    return merge(results)


def check_pcr_heads_are_fixed_points(seed: int = SEED, tolerance: float = EXACT,
                                     heads: Callable[..., object] = pcr_heads) -> CheckResult:
    """At ``heads(Λ, N, m, d + 1)``, the autograd gradient of R(Σ_h v_h q_h k_hᵀ) with respect to every v_h, k_h
    and q_h, relative to the same gradient at the same heads against the risk's linear term alone
    (-tr(Λ Γ Λ)): zero, a fixed point of gradient flow (the paper's (C1)-(C3)), for every m."""
    results = []
    for covariance, n, tau in _laws(seed):
        for m in range(covariance.shape[0] + 1):
            weights = heads(covariance, n, m, covariance.shape[0] + 1, tau)
            params = [t.clone().requires_grad_(True) for t in (weights.value, weights.key, weights.query)]
            gamma = torch.einsum("h,hi,hj->ij", params[0], params[2], params[1])
            full = torch.autograd.grad(lsa_risk(gamma, covariance, n, label_noise=tau), params, retain_graph=True)
            linear = torch.autograd.grad(-torch.trace(covariance @ gamma @ covariance), params, allow_unused=True)
            error = max(g.abs().max().item() for g in full)
            scale = max(g.abs().max().item() for g in linear) if m else 1.0
            results.append(CheckResult(error, error / scale, tolerance))
    return merge(results)


def check_merged_is_the_lsa_layer(seed: int = SEED, tolerance: float = 1e-12) -> CheckResult:
    """``MergedAttention`` with one head (v = 1, U = Γᵀ) against the project's LSA layer with QK_xx = Γ and
    (P W_V)_yy = -1/N (``LSAWeights.from_products``), and against x_qᵀ Γ h, for Γ* and a random Γ."""
    results = []
    for covariance, n, tau in _laws(seed)[:2]:
        d = covariance.shape[0]
        batch = _batch(covariance, n, tau, 1000, seed, step=1)
        tokens = ConcatLayout(d).tokens(batch)
        gen = torch.Generator().manual_seed(seed)
        random = torch.randn(d, d, generator=gen, dtype=torch.float64)
        for gamma in (optimal_preconditioner(covariance, n, tau), random):
            merged = MergedAttention(MergedWeights(torch.ones(1, dtype=torch.float64), gamma.T[None]))
            qk = torch.zeros(1, d + 1, d + 1, dtype=torch.float64)
            qk[0, :d, :d] = gamma
            pv = torch.zeros(1, d + 1, d + 1, dtype=torch.float64)
            pv[0, d, d] = -1 / n
            lsa = stacked_model([LSAWeights.from_products(qk, pv)], d_y=1)
            expected = _preconditioned(batch, gamma)
            results += [compare(merged(tokens)[:, 0].detach(), expected, tolerance),
                        compare(lsa(tokens)[:, 0].detach(), expected, tolerance)]
    return merge(results)


def check_empirical_loss(seed: int = SEED, tolerance: float = 1e-12, n_tasks: int = 2000) -> CheckResult:
    """The loss training descends, ``EmpiricalLoss.value(Γ)`` (the quadratic form in Γ over a fixed set of tasks),
    against the mean ½ (ŷ - y_q)² of each layer over the same tasks' tokens, for random heads of both layers
    (float64), on the laws of ``_laws``: the training of ``heads.train_heads`` is full-batch gradient descent on the
    tokens' loss."""
    results = []
    gen = torch.Generator().manual_seed(seed)
    for covariance, n, tau in _laws(seed):
        d = covariance.shape[0]
        batch = _batch(covariance, n, tau, n_tasks, seed, step=2)
        tokens = ConcatLayout(d).tokens(batch)
        layers = (MergedAttention(MergedWeights(torch.randn(3, generator=gen, dtype=torch.float64),
                                                torch.randn(3, d, d, generator=gen, dtype=torch.float64))),
                  SeparateAttention(SeparateWeights(*(torch.randn(*shape, generator=gen, dtype=torch.float64)
                                                      for shape in ((d + 1,), (d + 1, d), (d + 1, d))))))
        for layer in layers:
            empirical = EmpiricalLoss.of(*layer.statistics(tokens), batch.y_query)
            with torch.no_grad():
                results.append(compare(empirical.value(layer.gamma()), query_loss(layer(tokens), batch.y_query),
                                       tolerance))
    return merge(results)


def check_float32(seed: int = SEED, tolerance: float = 1e-5) -> CheckResult:
    """The levels and every Γ_m computed in float32 against float64, on the laws of ``_laws``."""
    results = []
    for covariance, n, tau in _laws(seed):
        for m in range(covariance.shape[0] + 1):
            single = pcr_preconditioner(covariance.float(), n, m, tau)
            results.append(compare(single.double(), pcr_preconditioner(covariance, n, m, tau), tolerance))
        results.append(compare(plateau_levels(covariance.float(), n, tau).double(), plateau_levels(covariance, n, tau),
                               tolerance))
    return merge(results)


def check_monte_carlo(m: int = 2, n_tasks: int = 100_000, seed: int = SEED, tolerance: float = 3e-2,
                      levels: Levels = plateau_levels, chunk: int = 25_000) -> CheckResult:
    """L_m in closed form (``levels``) against the mean sampled ½ (x_qᵀ Γ_m h - y_q)² of ``n_tasks`` tasks of the
    project's sampler (TEST stream of ``seed``, float64) on the authors' law at d = 4, N = 31. Passes when the
    relative error is below 4 of its standard errors and below ``tolerance``."""
    covariance, n = linear_spectrum_covariance(4, seed), 31
    gamma = pcr_preconditioner(covariance, n, m)
    losses = []
    for step in range(math.ceil(n_tasks / chunk)):
        batch = _batch(covariance, n, 0.0, min(chunk, n_tasks - step * chunk), seed, step)
        losses.append(0.5 * (_preconditioned(batch, gamma) - batch.y_query[:, 0]) ** 2)
    loss = torch.cat(losses)
    sampled, error = loss.mean(), loss.std() / len(loss) ** 0.5
    closed = levels(covariance, n)[m]
    result = compare(sampled, closed, min(tolerance, 4 * float(error / closed)))
    detail = (f"Γ_{m} on d = 4, N = 31: L_{m} {float(closed):.5f} (Monte Carlo {float(sampled):.5f} ± "
              f"{float(error):.5f}, {float((sampled - closed) / error):+.1f} SE; {len(loss)} tasks)")
    return CheckResult(result.max_abs_error, result.max_rel_error, result.tolerance, detail)


IDENTITY_CHECKS = (
    IdentityCheck("plateaus: L_m = min R over the top-m eigenvectors", check_levels_are_restricted_minima),
    IdentityCheck("plateaus: L_0 = ½(trΛ+τ²), L_d = R(Γ*), R(Γ_m) = L_m", check_ends_and_preconditioners),
    IdentityCheck("plateaus: every eigenvector subset, top m the least", check_every_subset),
    IdentityCheck("plateaus: 2 L_m = authors' loss_at_saddle (D = 4)", check_authors_values),
    IdentityCheck("plateaus: PCR heads predict x_qᵀ Γ_m h", check_pcr_heads_predict),
    IdentityCheck("plateaus: PCR heads are fixed points (∇R = 0)", check_pcr_heads_are_fixed_points),
    IdentityCheck("plateaus: merged heads = LSA layer with QK_xx = Γ", check_merged_is_the_lsa_layer),
    IdentityCheck("plateaus: training loss = its quadratic form in Γ", check_empirical_loss),
    IdentityCheck("plateaus: float32 levels and Γ_m = float64", check_float32),
    *(IdentityCheck(f"plateaus: L_{m} = Monte Carlo, d = 4, N = 31", functools.partial(check_monte_carlo, m))
      for m in range(5)),
)
