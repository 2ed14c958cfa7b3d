"""From stored rows to the dual form's keys and values: W_T = a_W W_0 + Σ_u v_u k_uᵀ, b_T = a_b b_0 + Σ_u v^b_u.

A *unit* is one (example, step) row: key k_u = x (the layer input; the bias is the augmented key's constant 1),
weight value v_u = c^W_{s(u)} δ_u and bias value v^b_u = c^b_{s(u)} δ_u, where c_s are the step coefficients below.
When weight and bias share their optimizer settings (the usual case) v^b = v and the bias is exactly the
augmented key [x; 1].
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.dual.recorder import KIND_PROJECTED, KIND_SGD, KIND_SKIPPED
from icl_gd.dual.store_reader import LayerStore, Table


def step_coefficients(steps: Table, param: str, upto: int | None = None) -> tuple[float, np.ndarray]:
    """Coefficients (a, c) with W_T = a W_0 + Σ_s c_s G_s for the first ``upto`` steps (all by default).

    G_s is the recorded Σ_i δ_{s,i} k_{s,i}ᵀ of step s. torch.optim.SGD is linear in the state (W, buffer):
    g = λW + scale·G;  buffer' = m·buffer + ρ g;  d = A g + B buffer';  W' = W - η d,
    with m = 0, ρ = 1 on the buffer's first step (PyTorch clones g), else m = μ, ρ = 1 - dampening, and
    (A, B) = (1, μ) for Nesterov, (0, 1) for heavy ball, (1, 0) without momentum. So (W, buffer) evolves by
    2×2 scalar matrices M_s and injections u_s; the coefficient of G_s in W_T is e_W M_{T-1}⋯M_{s+1} u_s, found by
    one backward sweep. Returns ``(a, c (T,))`` in float64.
    """
    columns = {f: steps.column(f"{param}_{f}") for f in ("kind", "lr", "momentum", "dampening", "weight_decay",
                                                         "nesterov", "fresh", "scale")}
    total = len(columns["kind"])
    T = total if upto is None else upto
    if not 0 <= T <= total:
        raise ConfigError(f"upto={upto} is outside the {total} recorded steps")
    coef = np.zeros(T, dtype=np.float64)
    r = np.array([1.0, 0.0])  # e_W propagated backwards
    for s in range(T - 1, -1, -1):
        kind = columns["kind"][s]
        scale = columns["scale"][s]
        if kind == KIND_SKIPPED:
            continue  # M = I, u = 0
        if kind == KIND_PROJECTED:
            coef[s] = r[0] * scale  # W' = W + scale·G
            continue
        if kind != KIND_SGD:
            raise ConfigError(f"unknown step kind {kind} at step {s}")
        eta, mu, lam = columns["lr"][s], columns["momentum"][s], columns["weight_decay"][s]
        fresh = columns["fresh"][s] != 0
        if mu == 0:
            A, B, m, rho = 1.0, 0.0, 0.0, 0.0
        else:
            m, rho = (0.0, 1.0) if fresh else (mu, 1.0 - columns["dampening"][s])
            A, B = (1.0, mu) if columns["nesterov"][s] != 0 else (0.0, 1.0)
        gain = A + B * rho
        M = np.array([[1.0 - eta * gain * lam, -eta * B * m], [rho * lam, m]])
        u = np.array([-eta * gain, rho])
        coef[s] = (r @ u) * scale
        r = r @ M
    return float(r[0]), coef


@dataclass(frozen=True)
class UnitProvenance:
    """Where units came from, one entry per unit: the training example, its label and task, the optimizer step
    and the epoch. Every field has the same shape: ``(b,)`` for a block, ``(nq, k)`` for per-query top-k lists."""

    example: np.ndarray
    label: np.ndarray
    task: np.ndarray
    step: np.ndarray
    epoch: np.ndarray


PROVENANCE_FIELDS = tuple(f.name for f in fields(UnitProvenance))


@dataclass(frozen=True)
class UnitBlock(UnitProvenance):
    """A block of units: ``key (b, in)``, ``value (b, out)``, ``bias_value (b, out)`` and provenance ``(b,)``.

    ``row`` is each unit's global row index in the layer's ``rows`` table.
    """

    row: np.ndarray
    key: np.ndarray
    value: np.ndarray
    bias_value: np.ndarray | None


@dataclass(frozen=True)
class DualLayer:
    """One recorded layer in dual form at step ``upto``: the stored rows plus their step coefficients."""

    store: LayerStore
    initial_scale_w: float
    initial_scale_b: float
    coef_w: np.ndarray  # (T,)
    coef_b: np.ndarray  # (T,)

    @property
    def name(self) -> str:
        return self.store.name

    @property
    def has_bias(self) -> bool:
        return bool(self.store.info["has_bias"])

    @property
    def n_steps(self) -> int:
        return len(self.coef_w)

    @property
    def initial_weight(self) -> np.ndarray:
        return self.store.array("initial_weight")

    @property
    def initial_bias(self) -> np.ndarray | None:
        return self.store.arrays.get("initial_bias")

    def _step_coef(self, coef: np.ndarray, step: np.ndarray) -> np.ndarray:
        # Rows recorded after step T (a backward pass with no optimizer step yet) do not count.
        out = np.zeros(len(step))
        inside = step < len(coef)
        out[inside] = coef[step[inside]]
        return out

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Uncompressed layers: keys ``(n, in)``, values ``(n, out)`` and bias values of the units at ``rows (n,)``
        (float64), read from the memory maps row by row (only the touched pages of each chunk are read)."""
        rows = np.asarray(rows, dtype=np.int64)
        table = self.store.table("rows")
        if rows.size and (rows.min() < 0 or rows.max() >= table.rows):
            raise ConfigError(f"unit rows must lie in 0..{table.rows - 1}")
        d_in, d_out = int(self.store.info["in_features"]), int(self.store.info["out_features"])
        key, error, step = np.zeros((len(rows), d_in)), np.zeros((len(rows), d_out)), np.zeros(len(rows), np.int64)
        starts = np.cumsum((0,) + table.chunk_rows)
        for index in range(len(table.chunks)):
            inside = (rows >= starts[index]) & (rows < starts[index + 1])
            if inside.any():
                local = rows[inside] - starts[index]
                chunk = table.open_chunk(index, ["key", "error", "step"])
                key[inside], error[inside], step[inside] = chunk["key"][local], chunk["error"][local], chunk["step"][local]
        value = error * self._step_coef(self.coef_w, step)[:, None]
        bias = error * self._step_coef(self.coef_b, step)[:, None] if self.has_bias else None
        return key, value, bias

    def compact_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Compressed layers: ``(example ids (E,), keys (E, in))`` sorted by example id, in RAM (read once per
        layer and kept: every pass over the units gathers from them). Read-only: callers copy what they change."""
        return self._compact_keys

    @cached_property
    def _compact_keys(self) -> tuple[np.ndarray, np.ndarray]:
        table = self.store.table("keys")
        ids = table.column("example")
        order = np.argsort(ids, kind="stable")
        ids, keys = ids[order], table.column("key")[order]
        ids.flags.writeable = keys.flags.writeable = False
        return ids, keys

    def blocks(self, block_rows: int = 32768, dtype: str = "float64",
               select: Callable[[UnitProvenance], np.ndarray] | None = None) -> Iterator[UnitBlock]:
        """Every unit, block by block; keys and values converted to ``dtype``. With ``select`` (a block's
        provenance -> a boolean mask ``(b,)``) only the units it picks, read and converted after the mask: a
        block it picks nothing from costs its provenance columns only."""
        rows = self.store.table("rows")
        compressed = bool(self.store.info["compressed"])
        names = ["error", *PROVENANCE_FIELDS] + ([] if compressed else ["key"])
        if compressed:
            ids, keys = self.compact_keys()
        for start, block in rows.blocks(names, block_rows):
            provenance = UnitProvenance(**{f: np.asarray(block[f]) for f in PROVENANCE_FIELDS})
            row = np.arange(start, start + len(provenance.step))
            error, key = block["error"], None if compressed else block["key"]
            if select is not None:
                picked = np.asarray(select(provenance), dtype=bool)
                if not picked.any():
                    continue
                if not picked.all():
                    provenance = UnitProvenance(**{f: getattr(provenance, f)[picked] for f in PROVENANCE_FIELDS})
                    row, error, key = row[picked], error[picked], None if compressed else key[picked]
            step, error = provenance.step, np.asarray(error, dtype=dtype)
            if compressed:
                key = keys[np.searchsorted(ids, provenance.example)]
            value = error * self._step_coef(self.coef_w, step).astype(dtype)[:, None]
            bias_value = error * self._step_coef(self.coef_b, step).astype(dtype)[:, None] if self.has_bias else None
            yield UnitBlock(row=row, key=np.asarray(key, dtype=dtype), value=value, bias_value=bias_value,
                            **{f: getattr(provenance, f) for f in PROVENANCE_FIELDS})

    def example_values(self, block_rows: int = 32768) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Compressed layers: ``(example ids (E,), Σ_s v (E, out), Σ_s v^b (E, out))``, summed in float64.

        This is the exact compression: since an example's key never changes, Σ_s v_s k_sᵀ = (Σ_s v_s) kᵀ.
        """
        ids, _ = self.compact_keys()
        out = int(self.store.info["out_features"])
        values = torch.zeros(len(ids), out, dtype=torch.float64)
        bias_values = torch.zeros(len(ids), out, dtype=torch.float64) if self.has_bias else None
        rows = self.store.table("rows")
        for _, block in rows.blocks(["error", "example", "step"], block_rows):
            step = np.asarray(block["step"])
            pos = torch.from_numpy(np.searchsorted(ids, np.asarray(block["example"])))
            error = np.asarray(block["error"], dtype=np.float64)
            # index_add_ along dim 0 adds the rows one after the other, as np.add.at does (same bits), 6x faster.
            values.index_add_(0, pos, torch.from_numpy(error * self._step_coef(self.coef_w, step)[:, None]))
            if bias_values is not None:
                bias_values.index_add_(0, pos, torch.from_numpy(error * self._step_coef(self.coef_b, step)[:, None]))
        return ids, values.numpy(), None if bias_values is None else bias_values.numpy()


def dual_layer(store: LayerStore, upto: int | None = None) -> DualLayer:
    """The dual form of ``store`` after its first ``upto`` optimizer steps (all recorded steps by default)."""
    steps = store.table("steps")
    a_w, coef_w = step_coefficients(steps, "w", upto)
    a_b, coef_b = step_coefficients(steps, "b", upto)
    return DualLayer(store, a_w, a_b, coef_w, coef_b)
