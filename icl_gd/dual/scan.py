"""Which training patterns does a prediction attend to? Blocked scoring of queries against the stored keys.

For a layer in dual form, a query q (the layer's input on a test example) attends to unit u with the
unnormalised score a_u = k_u·q (+1 for the bias's augmented key). Its *contribution* to a read-out direction r
(the gradient of the predicted class's logit with respect to the layer's output) is
c_u = (r·v_u)(k_u·q) + r·v^b_u. For the last layer r is a one-hot vector and Σ_u c_u plus the initial weights'
part is exactly the predicted logit; for hidden layers it is the first-order effect of the unit on that logit.

Scoring is blocked over units (``scan_units``, for images and text alike), so the queries × units matrix is never
held whole: top-k lists are merged block by block and totals are accumulated with one-hot matrix products. What
predictions do without a set of units: ``icl_gd.dual.removal``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.dual.layer import PROVENANCE_FIELDS, DualLayer, UnitBlock, UnitProvenance


@dataclass(frozen=True)
class TopUnits(UnitProvenance):
    """The k best units per query: every field is ``(nq, k)``; ``row`` indexes the layer's rows table."""

    score: np.ndarray
    row: np.ndarray


@dataclass(frozen=True)
class QueryScores:
    """Per-query results for one layer; ``nq`` queries, C classes, T tasks, E epochs, N examples."""

    attention_top: TopUnits  # largest |k·q|
    proponents: TopUnits  # largest signed contribution to the read-out
    opponents: TopUnits  # most negative contribution
    attention_total: np.ndarray  # (nq,) Σ_u |a_u|
    contribution_total: np.ndarray  # (nq,) Σ_u c_u
    entropy: np.ndarray  # (nq,) of p_u = |a_u| / Σ|a|, in nats
    attention_by_class: np.ndarray  # (nq, C) Σ |a_u| over units whose example has that label
    contribution_by_class: np.ndarray  # (nq, C)
    attention_by_task: np.ndarray  # (nq, T)
    contribution_by_task: np.ndarray  # (nq, T)
    attention_by_epoch: np.ndarray  # (nq, E)
    contribution_by_epoch: np.ndarray  # (nq, E)
    attention_by_task_epoch: np.ndarray  # (nq, T, E): attention over training time, split by task
    attention_by_example: np.ndarray | None  # (nq, N) when asked for
    contribution_by_example: np.ndarray | None

    @property
    def effective_keys(self) -> np.ndarray:
        """exp(entropy): how many keys the attention is spread over, (nq,)."""
        return np.exp(self.entropy)


class _TopK:
    """Running top-k over blocks, per query (largest ``score``); blocks are ``(nq, b)``, rows along dim 1."""

    def __init__(self, nq: int, k: int) -> None:
        self.k = k
        self.score = torch.full((nq, 0), -torch.inf, dtype=torch.float64)
        self.row = torch.zeros((nq, 0), dtype=torch.int64)

    def merge(self, score: torch.Tensor, first_row: int, largest: bool = True) -> None:
        """Merge a block; ``largest=False`` keeps the smallest scores, stored negated (no negated copy)."""
        k = min(self.k, score.shape[1])
        top, idx = torch.topk(score, k, dim=1, largest=largest)
        top = top.to(torch.float64) if largest else -top.to(torch.float64)
        cand_score = torch.cat([self.score, top], 1)
        cand_row = torch.cat([self.row, idx + first_row], 1)
        keep = torch.topk(cand_score, min(self.k, cand_score.shape[1]), dim=1).indices
        self.score = torch.gather(cand_score, 1, keep)
        self.row = torch.gather(cand_row, 1, keep)

    def result(self, provenance: dict[str, np.ndarray], sign: float = 1.0) -> TopUnits:
        rows = self.row.numpy()
        return TopUnits(score=sign * self.score.numpy(), row=rows,
                        **{f: provenance[f][rows] for f in PROVENANCE_FIELDS})


def readonly_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing memory with a read-only memory map (never written to), without torch's warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def one_hot(ids: np.ndarray, n: int, what: str, dtype: torch.dtype) -> torch.Tensor:
    """(len(ids), n) one-hot rows of ``ids``; ConfigError naming ``what`` when an id is outside 0..n-1."""
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise ConfigError(f"{what} id {int(ids.max())} is outside 0..{n - 1}; pass a larger n_{what}")
    onehot = torch.zeros(len(ids), n, dtype=dtype)
    onehot[torch.arange(len(ids)), torch.from_numpy(ids.astype(np.int64))] = 1
    return onehot


@dataclass(frozen=True)
class UnitScan:
    """What every scorer keeps from one blocked pass over a layer's units: the top-k units per query by attention
    and by contribution (and the most negative contributions when asked for), and Σ_u |a_u| log |a_u| per query
    ``xlogx (nq,)`` (float64), from which ``entropy`` follows given the total attention."""

    attention_top: TopUnits
    proponents: TopUnits
    opponents: TopUnits | None
    xlogx: torch.Tensor

    def entropy(self, attention_total: torch.Tensor) -> torch.Tensor:
        """(nq,) entropy of p_u = |a_u| / S in nats, H = log S - Σ|a| log|a| / S, for the totals S ``(nq,)``."""
        safe = torch.where(attention_total > 0, attention_total, torch.ones_like(attention_total))
        return torch.log(safe) - self.xlogx / safe


class Scorer(Protocol):
    """What a pass over a layer's units feeds, block by block: ``add(block, attention, contribution)`` gets the
    block of units (read-only) with its ``(nq, b)`` attention |a_u| and contribution c_u (overwritten after the
    call: copy what must outlive it). A scorer whose ``add`` also takes ``dot`` gets the plain products k_u·q
    (no +1 for the bias's augmented key) as well, read-only, so it need not compute them again. Any number of
    scorers ride on one pass, so the units are read, and k·q computed, once."""

    def add(self, block: UnitBlock, attention: torch.Tensor, contribution: torch.Tensor) -> None: ...


@dataclass(frozen=True)
class ScoreFunction:
    """A plain function ``add(block, attention, contribution)`` (or with ``dot`` too) as a ``Scorer``."""

    add: Callable[..., None]


def _takes_dot(scorer: Scorer) -> bool:
    """Whether ``scorer.add`` accepts the ``dot`` keyword (the plain k·q products)."""
    try:
        return "dot" in inspect.signature(scorer.add).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def scan_units(
    layer: DualLayer,
    queries: np.ndarray | torch.Tensor,
    readouts: np.ndarray | torch.Tensor,
    k: int,
    block_rows: int,
    scorers: Sequence[Scorer] = (),
    dtype: torch.dtype = torch.float32,
    matmul_dtype: torch.dtype | None = None,
    opponents: bool = False,
) -> UnitScan:
    """The blocked scorer of images and text: every unit u of ``layer`` against ``queries (nq, in)`` with
    read-outs ``readouts (nq, out)``, block by block, in ``dtype`` on the CPU; each of ``scorers`` gets every
    block with its attention and contribution (``Scorer``); the top-k lists and Σ|a| log|a| are kept here.

    ``matmul_dtype=torch.bfloat16`` computes the k·q products in bfloat16 (about 4x faster on CPUs with
    AVX512-BF16, scores good to about 3 significant digits, so near-ties in the top-k may swap); the default
    computes them in ``dtype``."""
    if matmul_dtype not in (None, dtype, torch.bfloat16, torch.float16):
        raise ConfigError(f"matmul_dtype must be None, {dtype}, bfloat16 or float16, got {matmul_dtype}")
    q = torch.as_tensor(np.asarray(queries), dtype=dtype)
    q_low = None if matmul_dtype in (None, dtype) else q.to(matmul_dtype)
    r = torch.as_tensor(np.asarray(readouts), dtype=dtype)
    d_in, d_out = int(layer.store.info["in_features"]), int(layer.store.info["out_features"])
    if q.ndim != 2 or q.shape[1] != d_in:
        raise ConfigError(f"queries must be (nq, {d_in}), got {tuple(q.shape)}")
    if r.shape != (q.shape[0], d_out):
        raise ConfigError(f"readouts must be ({q.shape[0]}, {d_out}), got {tuple(r.shape)}")
    for name, value in (("k", k), ("block_rows", block_rows)):
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    nq = q.shape[0]
    offset = 1.0 if layer.has_bias else 0.0
    shared_coefficients = bool(np.array_equal(layer.coef_w, layer.coef_b))
    top_att, top_pro = _TopK(nq, k), _TopK(nq, k)
    top_opp = _TopK(nq, k) if opponents else None
    xlogx = torch.zeros(nq, dtype=torch.float64)
    provenance: dict[str, list[np.ndarray]] = {f: [] for f in PROVENANCE_FIELDS}
    # Blocks are laid out (nq, b): per-query reductions and top-k then run along contiguous memory. The (nq, b)
    # work matrices are allocated once: fresh 100 MB tensors per block cost more in page faults than the
    # arithmetic on them.
    takes_dot = [_takes_dot(scorer) for scorer in scorers]
    raw_buffer = torch.empty(nq * block_rows, dtype=dtype)
    attention_buffer = torch.empty(nq * block_rows, dtype=dtype)
    contribution_buffer = torch.empty(nq * block_rows, dtype=dtype)
    bias_buffer = torch.empty(nq * block_rows if layer.has_bias and not shared_coefficients else 0, dtype=dtype)
    for block in layer.blocks(block_rows, dtype=str(dtype).removeprefix("torch.")):
        first, b = int(block.row[0]), len(block.row)
        for f in provenance:
            provenance[f].append(np.array(getattr(block, f)))
        key = readonly_tensor(block.key)
        raw = raw_buffer[: nq * b].view(nq, b)  # (nq, b) k_u · q
        if q_low is None:
            torch.mm(q, key.T, out=raw)
        else:
            raw.copy_(torch.mm(q_low, key.to(q_low.dtype).T))
        contribution = torch.mm(r, torch.from_numpy(block.value).T, out=contribution_buffer[: nq * b].view(nq, b))
        # k·q stays in ``raw`` for the scorers; a_u = k_u·q + 1 (+1 for the bias's augmented key) beside it.
        signed = torch.add(raw, offset, out=attention_buffer[: nq * b].view(nq, b))
        if block.bias_value is not None and not shared_coefficients:
            bias = torch.mm(r, torch.from_numpy(block.bias_value).T, out=bias_buffer[: nq * b].view(nq, b))
            contribution.mul_(raw).add_(bias)  # (r·v_u)(k_u·q) + r·v^b_u
        else:
            # Weight and bias share coefficients (v^b = v): c_u = (r·v_u)([k_u; 1]·[q; 1]) = (r·v_u) a_u.
            contribution.mul_(signed)
        attention = signed.abs_()  # |a_u|
        top_att.merge(attention, first)
        top_pro.merge(contribution, first)
        if top_opp is not None:
            top_opp.merge(contribution, first, largest=False)
        for scorer, dot in zip(scorers, takes_dot):
            if dot:
                scorer.add(block, attention, contribution, dot=raw)
            else:
                scorer.add(block, attention, contribution)
        xlogx += attention.xlogy_(attention).sum(1).to(torch.float64)  # last: overwrites attention
    prov = {f: np.concatenate(v) if v else np.zeros(0, np.int64) for f, v in provenance.items()}
    return UnitScan(top_att.result(prov), top_pro.result(prov),
                    None if top_opp is None else top_opp.result(prov, -1.0), xlogx)


class GroupTotals:
    """Σ |a_u| and Σ c_u per class, task, epoch and (task, epoch) of the units' examples for ``nq`` queries,
    accumulated in float64 from one-hot products of each block (in the working ``dtype``); with ``n_examples``
    also per example ``(nq, N)``."""

    def __init__(self, nq: int, n_classes: int, n_tasks: int, n_epochs: int, n_examples: int | None,
                 dtype: torch.dtype) -> None:
        for name, value in (("n_classes", n_classes), ("n_tasks", n_tasks), ("n_epochs", n_epochs)):
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        self.nq, self.n_classes, self.n_tasks, self.n_epochs = nq, n_classes, n_tasks, n_epochs
        self.n_examples, self.dtype = n_examples, dtype
        groups = n_classes + n_tasks + n_epochs + n_tasks * n_epochs
        self.attention = torch.zeros(nq, groups, dtype=torch.float64)
        self.contribution = torch.zeros(nq, groups, dtype=torch.float64)
        per_example = n_examples is not None
        self.attention_example = torch.zeros(nq, n_examples or 0, dtype=torch.float64) if per_example else None
        self.contribution_example = torch.zeros(nq, n_examples or 0, dtype=torch.float64) if per_example else None

    def add(self, block: UnitBlock, attention: torch.Tensor, contribution: torch.Tensor) -> None:
        n_epochs, dtype = self.n_epochs, self.dtype
        onehot = torch.cat([one_hot(block.label, self.n_classes, "classes", dtype),
                            one_hot(block.task, self.n_tasks, "tasks", dtype),
                            one_hot(block.epoch, n_epochs, "epochs", dtype),
                            one_hot(block.task * n_epochs + block.epoch, self.n_tasks * n_epochs, "task-epochs",
                                    dtype),
                            ], 1)  # (b, groups)
        self.attention.add_((attention @ onehot).to(torch.float64))  # block sums in the working dtype
        self.contribution.add_((contribution @ onehot).to(torch.float64))
        if self.attention_example is not None:
            if block.example.max() >= self.n_examples:
                raise ConfigError(f"example id {int(block.example.max())} >= n_examples={self.n_examples}")
            index = torch.from_numpy(block.example.astype(np.int64))
            self.attention_example.index_add_(1, index, attention.to(torch.float64))
            self.contribution_example.index_add_(1, index, contribution.to(torch.float64))

    def scores(self, scan: UnitScan) -> QueryScores:
        """The ``QueryScores`` of the pass ``scan`` these totals rode on."""
        nq, n_classes, n_tasks, n_epochs = self.nq, self.n_classes, self.n_tasks, self.n_epochs
        # Every unit has exactly one class, so the class totals sum to the overall totals.
        att_total = self.attention[:, :n_classes].sum(1)
        con_total = self.contribution[:, :n_classes].sum(1)

        def split(m: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            m = m.numpy()
            ends = np.cumsum([n_classes, n_tasks, n_epochs])
            return (m[:, :ends[0]], m[:, ends[0]:ends[1]], m[:, ends[1]:ends[2]],
                    m[:, ends[2]:].reshape(nq, n_tasks, n_epochs))

        att_c, att_t, att_e, att_te = split(self.attention)
        con_c, con_t, con_e, _ = split(self.contribution)
        return QueryScores(
            attention_top=scan.attention_top, proponents=scan.proponents, opponents=scan.opponents,
            attention_total=att_total.numpy(), contribution_total=con_total.numpy(),
            entropy=scan.entropy(att_total).numpy(),
            attention_by_class=att_c, contribution_by_class=con_c, attention_by_task=att_t,
            contribution_by_task=con_t, attention_by_epoch=att_e, contribution_by_epoch=con_e,
            attention_by_task_epoch=att_te,
            attention_by_example=None if self.attention_example is None else self.attention_example.numpy(),
            contribution_by_example=None if self.contribution_example is None else self.contribution_example.numpy(),
        )


def score_queries(
    layer: DualLayer,
    queries: np.ndarray | torch.Tensor,
    readouts: np.ndarray | torch.Tensor,
    k: int = 10,
    n_classes: int = 10,
    n_tasks: int = 1,
    n_epochs: int = 1,
    n_examples: int | None = None,
    block_rows: int = 32768,
    dtype: torch.dtype = torch.float32,
    matmul_dtype: torch.dtype | None = None,
    scorers: Sequence[Scorer] = (),
) -> QueryScores:
    """Score ``queries (nq, in)`` against every unit of ``layer`` (``scan_units``); ``readouts (nq, out)`` give
    the read-out direction per query. Totals per class, task, epoch and (task, epoch) (``GroupTotals``);
    ``n_examples`` also returns per-example totals ``(nq, N)``; ``scorers`` ride on the same pass."""
    totals = GroupTotals(len(queries), n_classes, n_tasks, n_epochs, n_examples, dtype)
    scan = scan_units(layer, queries, readouts, k, block_rows, [totals, *scorers], dtype, matmul_dtype,
                      opponents=True)
    return totals.scores(scan)
