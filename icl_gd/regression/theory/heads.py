"""Linear attention with merged or with separate key and query weights (Zhang, Singh, Latham & Saxe 2025),
trained from small initialisation on the law of their repository, and the rule that reads the plateaus of the loss
curves against the closed-form levels of ``plateaus``.

Both models read the project's concatenated tokens (``tokens.ConcatLayout``: rows (x_i, y_i), the query (x_q, 0)
last) and answer the one predictor call, tokens (B, N+1, d+1) in, ŷ (B, 1) out. With h = (1/N) Σ_i y_i x_i (d,):

    merged, H heads:              ŷ = Σ_h v_h hᵀ U_h x_q            = x_qᵀ Γ h,   Γ = Σ_h v_h U_hᵀ,
    separate, H rank-one heads:   ŷ = Σ_h v_h (hᵀ k_h)(q_hᵀ x_q)  = x_qᵀ Γ h,   Γ = Σ_h v_h q_h k_hᵀ,

v_h scalars, U_h (d, d), k_h and q_h (d,). These are their ATTN_M and rank-one ATTN_S read at the query's label,
with the blocks their code initialises at zero held at zero (the value's x part of the label row, the key's label
column; their ``net.py``), so ŷ depends on the weights only through the effective Γ, and the expected loss of either
is ``lsa_risk(Γ)``. The merged layer is the project's LSA layer (``lsa.LSAWeights``) with its key-query product
QK = W_Qᵀ W_K restricted to the inputs' block, QK_xx = Γ, and its value product P W_V to reading the label,
(P W_V)_yy = -1/N: that layer's query update is -(1/N) Σ_i y_i x_qᵀ Γ x_i, and ŷ is minus it (a check in
``constructions/theory_plateaus.py``).

Training is full-batch gradient descent on a fixed set of tasks, as their ``train.py`` runs it (plain
``torch.optim.SGD`` over the whole training set each step); gradient flow, which the paper analyses, is its
small-step limit. The loss over the set is a quadratic form in Γ (``EmpiricalLoss``), so a step costs d⁴ products
whatever the set's size. The regression family's ``training.train`` runs AdamW on fresh batches, whose normalised
steps change the plateaus' lengths.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.core.config import (check_settings, positive_int, require_non_negative, require_open_unit, require_positive,
                                setting)
from icl_gd.core.errors import ConfigError, DivergenceError
from icl_gd.core.optim import make_optimizer
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.theory.one_layer import lsa_risk
from icl_gd.regression.theory.plateaus import (gamma_eigenvalues, linear_spectrum_covariance, plateau_levels,
                                               principal_components)
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask


# ------------------------------------------------------------------------------------------------ the two layers
@dataclass(frozen=True)
class MergedWeights:
    """H merged heads: ``value`` (H,) the v_h, ``kq`` (H, d, d) the U_h; Γ = Σ_h v_h U_hᵀ."""

    value: torch.Tensor
    kq: torch.Tensor

    @staticmethod
    def small(d: int, n_heads: int, scale: float, seed: int) -> MergedWeights:
        """v_h ~ N(0, s²) and U_h's entries N(0, s²/d²) for s = ``scale``: every factor of a head of norm about s."""
        gen = torch.Generator().manual_seed(seed)
        return MergedWeights(scale * torch.randn(n_heads, generator=gen),
                             scale / d * torch.randn(n_heads, d, d, generator=gen))

    def gamma(self) -> torch.Tensor:
        return torch.einsum("h,hij->ji", self.value, self.kq)


@dataclass(frozen=True)
class SeparateWeights:
    """H rank-one heads: ``value`` (H,) the v_h, ``key`` and ``query`` (H, d) the k_h and q_h; Γ = Σ_h v_h q_h k_hᵀ."""

    value: torch.Tensor
    key: torch.Tensor
    query: torch.Tensor

    @staticmethod
    def small(d: int, n_heads: int, scale: float, seed: int) -> SeparateWeights:
        """v_h ~ N(0, s²), k_h and q_h with entries N(0, s²/d) for s = ``scale``: v_h, k_h, q_h of norm about s."""
        gen = torch.Generator().manual_seed(seed)
        return SeparateWeights(scale * torch.randn(n_heads, generator=gen),
                               scale / math.sqrt(d) * torch.randn(n_heads, d, generator=gen),
                               scale / math.sqrt(d) * torch.randn(n_heads, d, generator=gen))

    def gamma(self) -> torch.Tensor:
        return torch.einsum("h,hi,hj->ij", self.value, self.query, self.key)


def pcr_heads(covariance: torch.Tensor, n_context: int, m: int, n_heads: int,
              label_noise: float = 0.0) -> SeparateWeights:
    """The fixed point M_m of Zhang et al.'s separate layer: heads 1..m with k_h = q_h = v_h e_h and v_h = γ_h^{1/3}
    (e_h the h-th principal component, γ_h Γ*'s eigenvalue), the other heads zero; its Γ is ``pcr_preconditioner``'s
    Γ_m, in-context principal-component regression on m components. Float64, (n_heads,) and (n_heads, d)."""
    values, vectors = principal_components(covariance)
    if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= min(n_heads, len(values)):
        raise ConfigError(f"m must be an integer in 0..min(n_heads, d)={min(n_heads, len(values))}, got {m!r}")
    value = torch.zeros(n_heads, dtype=torch.float64)
    value[:m] = gamma_eigenvalues(values, n_context, label_noise)[:m].to(torch.float64) ** (1 / 3)
    key = torch.zeros(n_heads, len(values), dtype=torch.float64)
    key[:m] = value[:m, None] * vectors[:, :m].T.to(torch.float64)
    return SeparateWeights(value, key, key.clone())


class _Heads(nn.Module):
    """What both layers share: the context statistic h, ŷ from it, and the parameters' effective Γ."""

    def __init__(self, layout: ConcatLayout) -> None:
        super().__init__()
        if layout.d_y != 1:
            raise ConfigError(f"the heads predict one label (d_y = 1), got d_y = {layout.d_y}")
        self.layout = layout

    def statistics(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(h (B, d), x_q (B, d)) from tokens (B, N+1, d+1): h = (1/N) Σ_i y_i x_i."""
        x, y, x_query = self.layout.split(tokens)
        return (y * x).mean(1), x_query

    def predict(self, h: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        """ŷ (B, 1) from the statistics (B, d) and (B, d): what the weights do with the context."""
        raise NotImplementedError

    def gamma(self) -> torch.Tensor:
        """The effective Γ (d, d) of the parameters, differentiable: ŷ = x_qᵀ Γ h."""
        raise NotImplementedError

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (B, 1) from tokens (B, N+1, d+1)."""
        return self.predict(*self.statistics(tokens))


class MergedAttention(_Heads):
    """ŷ = Σ_h v_h hᵀ U_h x_q (B, 1): H heads with merged key and query (module docstring)."""

    def __init__(self, weights: MergedWeights) -> None:
        super().__init__(ConcatLayout(weights.kq.shape[-1]))
        self.value = nn.Parameter(weights.value.clone())
        self.kq = nn.Parameter(weights.kq.clone())

    def predict(self, h: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        summed = torch.einsum("h,hij->ij", self.value, self.kq)  # Σ_h v_h U_h: one product per batch, not per head
        return ((h @ summed) * x_query).sum(-1, keepdim=True)

    def gamma(self) -> torch.Tensor:
        return MergedWeights(self.value, self.kq).gamma()


class SeparateAttention(_Heads):
    """ŷ = Σ_h v_h (hᵀ k_h)(q_hᵀ x_q) (B, 1): H rank-one heads with separate key and query (module docstring)."""

    def __init__(self, weights: SeparateWeights) -> None:
        super().__init__(ConcatLayout(weights.key.shape[-1]))
        self.value = nn.Parameter(weights.value.clone())
        self.key = nn.Parameter(weights.key.clone())
        self.query = nn.Parameter(weights.query.clone())

    def predict(self, h: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        return ((h @ self.key.T) * (x_query @ self.query.T) * self.value).sum(-1, keepdim=True)

    def gamma(self) -> torch.Tensor:
        return SeparateWeights(self.value, self.key, self.query).gamma()


# ------------------------------------------------------------------------------------------------ the plateau rule
@dataclass(frozen=True)
class LossCurve:
    """A loss curve: ``loss`` at the training ``steps`` (both (T,)), ascending steps, positive losses."""

    steps: tuple[int, ...]
    loss: tuple[float, ...]


@dataclass(frozen=True)
class PlateauRule:
    """What counts as a plateau of a loss curve, read from the curve alone (no level is consulted until a plateau is
    found): a run of consecutive evaluations (1) whose largest loss is at most 1 + ``spread`` times its smallest,
    (2) of at least ``min_points`` evaluations, lasting at least ``min_share`` of the steps up to its end (a
    scale-free duration: a plateau from step 900 to 1400 counts as one from 90 000 to 140 000 does), (3) flat, not a
    slow descent: the median loss of its last third within ``drift`` (relative) of that of its first third. Runs
    are found greedily from the left, each as long as (1) allows; a start that fails (2) or (3) moves one evaluation
    on; consecutive runs whose medians are within 1 + ``spread`` are one plateau (noise had cut it). A plateau's
    level is its median loss; it is read as L_m for the closed-form level nearest to it in ratio, when within
    ``match`` (relative) of it, else as no level."""

    spread: float = setting(0.05, "a plateau's largest loss is at most 1 + spread times its smallest",
                            check=require_positive)
    min_points: int = positive_int(5, "a plateau spans at least this many evaluations")
    min_share: float = setting(0.2, "a plateau lasts at least this share of the steps up to its end",
                               check=require_open_unit)
    drift: float = setting(0.02, "the median of a plateau's last third is within this (relative) of its first "
                                 "third's", check=require_positive)
    match: float = setting(0.10, "a plateau is read as the level L_m nearest to it when within this (relative)",
                           check=require_positive)

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class Plateau:
    """One detected plateau: from step ``start`` to ``end``, its median ``level``, the nearest closed-form level
    ``closed`` = L_``nearest``, and ``m``: ``nearest`` when the level is read as it, else None."""

    start: int
    end: int
    level: float
    nearest: int
    closed: float
    m: int | None

    @property
    def relative_error(self) -> float:
        return self.level / self.closed - 1


def _within(a: float, b: float, spread: float) -> bool:
    """Whether the larger of two positive losses is at most 1 + ``spread`` times the smaller."""
    return max(a, b) <= (1 + spread) * min(a, b)


def _is_flat(losses: list[float], start: int, end: int, rule: PlateauRule) -> bool:
    third = max(1, len(losses) // 3)
    first, last = statistics.median(losses[:third]), statistics.median(losses[-third:])
    return (len(losses) >= rule.min_points and end - start >= rule.min_share * end
            and abs(last / first - 1) <= rule.drift)


def detect_plateaus(curve: LossCurve, levels: torch.Tensor | Sequence[float],
                    rule: PlateauRule = PlateauRule()) -> tuple[Plateau, ...]:
    """The plateaus of ``curve`` by ``rule`` (``PlateauRule``'s docstring), in order, each beside the closed-form
    level of (L_0, ..., L_d) = ``levels`` (d + 1,) nearest to it."""
    steps, losses = list(curve.steps), list(curve.loss)
    if len(steps) != len(losses) or len(steps) < 2:
        raise ConfigError(f"a curve needs as many steps as losses, at least two, got {len(steps)} and {len(losses)}")
    if not all(math.isfinite(v) and v > 0 for v in losses):
        raise ConfigError("a curve's losses must be positive and finite")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ConfigError("a curve's steps must be increasing")
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(losses):
        j, low, high = i, losses[i], losses[i]
        while j + 1 < len(losses) and _within(max(high, losses[j + 1]), min(low, losses[j + 1]), rule.spread):
            j += 1
            low, high = min(low, losses[j]), max(high, losses[j])
        if _is_flat(losses[i:j + 1], steps[i], steps[j], rule):
            if runs and _within(statistics.median(losses[runs[-1][0]:runs[-1][1] + 1]),
                                statistics.median(losses[i:j + 1]), rule.spread):
                runs[-1] = (runs[-1][0], j)  # the same plateau, cut by noise: one
            else:
                runs.append((i, j))
            i = j + 1
        else:
            i += 1
    closed = [float(v) for v in levels]
    found = []
    for i, j in runs:
        level = statistics.median(losses[i:j + 1])
        nearest = min(range(len(closed)), key=lambda m: abs(math.log(level / closed[m])))
        read = abs(level / closed[nearest] - 1) <= rule.match
        found.append(Plateau(steps[i], steps[j], level, nearest, closed[nearest], nearest if read else None))
    return tuple(found)


def every_level(plateaus: Sequence[Plateau], d: int) -> bool:
    """Whether ``plateaus`` are read as L_0, L_1, ..., L_d, one each, in this order, and nothing else."""
    return [p.m for p in plateaus] == list(range(d + 1))


def increasing(plateaus: Sequence[Plateau]) -> bool:
    """Whether every one of ``plateaus`` is read as some L_m and m increases along the curve."""
    read = [p.m for p in plateaus]
    return bool(read) and None not in read and all(a < b for a, b in zip(read, read[1:]))  # type: ignore[operator]


def single_drop(plateaus: Sequence[Plateau], d: int) -> bool:
    """Whether ``plateaus`` are read as L_0 and L_d, in this order, and nothing else: one drop."""
    return [p.m for p in plateaus] == [0, d]


# ----------------------------------------------------------------------------------------------------- the run
@dataclass(frozen=True)
class PlateauConfig:
    """Both layers trained on the law of Zhang et al.'s repository (``linear_spectrum_covariance``: d inputs,
    eigenvalues ∝ 1..d with trace 1 in the basis of ``basis_seed``; N context pairs; w ~ N(0, I); no label noise):
    full-batch gradient descent on ½ (ŷ - y)² over ``train_tasks`` fixed tasks, as the authors' ``train.py`` runs
    (their ``--trainset_size``), from each layer's own small initialisation; the exact expected loss of the weights
    (``lsa_risk`` of their Γ) every ``eval_every`` steps, and the sampled loss on ``n_test`` fresh test tasks at
    the end."""

    d: int = positive_int(5, "input dimension")
    n_context: int = positive_int(20, "context pairs per task, N")
    basis_seed: int = setting(0, "seed of the random basis of Λ", check=require_non_negative)
    merged_heads: int = positive_int(8, "heads of the merged layer")
    separate_heads: int = positive_int(6, "rank-one heads of the separate layer (at least d: one per component)")
    steps: int = positive_int(12_000, "gradient steps of each layer")
    train_tasks: int = positive_int(20_000, "the fixed training set: tasks every full-batch step sees (the authors' "
                                             "trainset_size)")
    eval_every: int = positive_int(10, "steps between evaluations of the exact expected loss")
    n_test: int = positive_int(16_384, "test tasks the final sampled loss is measured on")
    merged_lr: float = setting(0.2, "learning rate of the merged layer", check=require_positive)
    merged_init: float = setting(1e-5, "initial scale of every factor of a merged head", check=require_positive)
    separate_lr: float = setting(3.0, "learning rate of the separate layer", check=require_positive)
    separate_init: float = setting(0.03, "initial scale of v_h, k_h and q_h of a separate head",
                                   check=require_positive)
    rule: PlateauRule = setting(doc="what counts as a plateau", factory=PlateauRule)

    def __post_init__(self) -> None:
        check_settings(self)
        if self.separate_heads < self.d:
            raise ConfigError(f"separate_heads={self.separate_heads} is below d={self.d}: rank-one heads can then "
                              "not learn every component")
        if self.eval_every > self.steps:
            raise ConfigError(f"eval_every={self.eval_every} exceeds steps={self.steps}: the curve would be one point")

    def covariance(self) -> torch.Tensor:
        """Λ (d, d), float64."""
        return linear_spectrum_covariance(self.d, self.basis_seed)

    def task(self) -> ConcatTokenTask:
        law = NormalInputs(covariance=tuple(map(tuple, self.covariance().tolist())))
        return ConcatTokenTask(LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=law))

    def levels(self) -> torch.Tensor:
        """(L_0, ..., L_d) (d + 1,), float64."""
        return plateau_levels(self.covariance(), self.n_context)


@dataclass(frozen=True)
class _SGD:
    """The optimiser keys ``make_optimizer("sgd", ...)`` reads: plain gradient descent."""

    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0


@dataclass(frozen=True)
class HeadsRun:
    """One trained layer: its exact loss ``curve``, its effective Γ at the end (d, d, float64), its ``plateaus``,
    its sampled ``test_loss`` at the end, and the seconds its steps took."""

    curve: LossCurve
    gamma: torch.Tensor
    plateaus: tuple[Plateau, ...]
    test_loss: float
    seconds: float


def make_heads(config: PlateauConfig, layer: str, seed: int) -> _Heads:
    """The ``layer`` ("merged" or "separate") of ``config`` at its small initialisation of ``seed``."""
    if layer == "merged":
        return MergedAttention(MergedWeights.small(config.d, config.merged_heads, config.merged_init, seed))
    if layer == "separate":
        return SeparateAttention(SeparateWeights.small(config.d, config.separate_heads, config.separate_init, seed))
    raise ConfigError(f"layer must be merged or separate, got {layer!r}")


@dataclass(frozen=True)
class EmpiricalLoss:
    """The mean of ½ (x_qᵀ Γ h - y_q)² over a fixed set of tasks, as the quadratic form it is in Γ:

        L(Γ) = ½ vec(Γ)ᵀ A vec(Γ) - bᵀ vec(Γ) + c,   z = vec(x_q hᵀ) (d²,),  A = mean z zᵀ,  b = mean y_q z,
        c = ½ mean y_q²,

    z the cubic feature of Zhang et al.'s merged layer (their repository's README: the merged layer is a 2-layer
    fully-connected linear network on it). Either layer's loss over the tasks' tokens equals
    ``value(layer.gamma())``; a step costs d⁴ products whatever the number of tasks. ``second`` (d², d²), ``first``
    (d²,), ``constant`` 0-d; float64."""

    second: torch.Tensor
    first: torch.Tensor
    constant: torch.Tensor

    @staticmethod
    def of(h: torch.Tensor, x_query: torch.Tensor, y_query: torch.Tensor) -> EmpiricalLoss:
        """From the statistics h (B, d), x_q (B, d) and the labels y_q (B, 1) of B tasks."""
        z = torch.einsum("bi,bj->bij", x_query.double(), h.double()).flatten(1)  # (B, d²), vec row-major: Γ_ij
        y = y_query.double()[:, 0]
        return EmpiricalLoss(z.T @ z / len(z), z.T @ y / len(z), 0.5 * (y ** 2).mean())

    def value(self, gamma: torch.Tensor) -> torch.Tensor:
        """L(Γ) (0-d), differentiable in Γ (d, d)."""
        flat = gamma.reshape(-1)
        return 0.5 * flat @ self.second @ flat - self.first @ flat + self.constant


def train_heads(config: PlateauConfig, layer: str, seed: int, device: torch.device | str = "cpu") -> HeadsRun:
    """Train ``layer`` of ``config`` from ``seed`` (its initial weights; its ``train_tasks`` training tasks, the
    TRAIN stream of ``seed``, the same for both layers) by full-batch gradient descent for ``config.steps`` steps,
    in float64, on their loss in its exact quadratic form (``EmpiricalLoss``); the exact expected loss R(Γ) of its
    weights every ``eval_every`` steps and at the end, its plateaus by ``config.rule``, its sampled loss on
    ``n_test`` test tasks (the TEST stream of ``seed``)."""
    device = torch.device(device)
    task, covariance = config.task(), config.covariance()
    model = make_heads(config, layer, seed).double().to(device)
    lr = config.merged_lr if layer == "merged" else config.separate_lr
    optimizer = make_optimizer("sgd", model.parameters(), _SGD(lr))
    tokens, targets = task.train_batch(config.train_tasks, seed, 0, device, torch.float64)
    empirical = EmpiricalLoss.of(*model.statistics(tokens), targets)
    steps: list[int] = []
    risks: list[float] = []
    start = time.perf_counter()
    for step in range(config.steps + 1):
        if step % config.eval_every == 0 or step == config.steps:
            with torch.no_grad():
                steps.append(step)
                risks.append(float(lsa_risk(model.gamma().cpu(), covariance, config.n_context)))
        if step == config.steps:
            break
        loss = empirical.value(model.gamma())
        if not math.isfinite(loss.item()):
            raise DivergenceError(f"the {layer} heads diverged at step {step} (loss {loss.item()}); a smaller "
                                  f"{layer}_lr may train")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    test, test_tokens = task.batch_tokens(config.n_test, seed, 0, Stream.TEST, device, torch.float64)
    with torch.no_grad():
        test_loss = float(query_loss(model(test_tokens), test.y_query))
    curve = LossCurve(tuple(steps), tuple(risks))
    gamma = model.gamma().detach().cpu()
    return HeadsRun(curve, gamma, detect_plateaus(curve, config.levels(), config.rule), test_loss, seconds)
