"""Record the dual form of chosen ``nn.Linear`` layers during an ordinary training loop.

For a linear layer y = W x + b and a loss L, the gradient of one mini-batch is Σ_i δ_i [x_i; 1]ᵀ with
δ_i = ∂L/∂y_i (the 1/B of a mean loss is already inside δ_i). The recorder stores, per example and step, the key
x_i (the layer input) and the raw error δ_i, with provenance (example id, label, task, step, epoch), and per
optimizer step the scalars that turn raw errors into values: learning rate, momentum, dampening, Nesterov, weight
decay, whether the momentum buffer was fresh, and the gradient's scale (gradient clipping). Because SGD with all of
these is linear in the gradients with scalar coefficients, W_T = a_T W_0 + Σ_s c_s Σ_i δ_{s,i} x_{s,i}ᵀ exactly,
with coefficients c_s computed after training from the step table (``verification.step_coefficients``). Values
are therefore never rewritten: storage stays append-only even though momentum and decay change old values' weights.

The gradient scale is not read from the clipping call (any clipping routine works): at each step the recorder
projects the parameter's actual gradient onto the recorded Σ δ xᵀ along its largest row, which recovers a global
rescaling to round-off. ``check_gradients=True`` also measures the full residual ‖grad - scale·Σ δ xᵀ‖ / ‖grad‖,
which exposes layers used twice per example, gradient accumulation across steps, or per-element clipping.

Optimizers other than ``torch.optim.SGD`` (Adam, AdamW, ...) have no exact dual form. For them each step's
coefficient is the least-squares scalar c_t = <ΔW_t, G_t> / ‖G_t‖² between the actual update and the recorded
gradient; the dual residual W_T - W_0 - Σ v kᵀ is then non-zero and is reported by ``verification.verify_layer``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from icl_gd.core.errors import ConfigError, VerificationError
from icl_gd.dual.storage import KEY_DTYPES, Column, StoreWriter

# Step kinds in the step table.
KIND_SGD = 0  # exact: torch.optim.SGD recurrence
KIND_PROJECTED = 1  # approximate: least-squares scalar per step (Adam-type optimizers)
KIND_SKIPPED = 2  # the parameter had no gradient: SGD leaves it (and its momentum) untouched

STEP_FIELDS = ("kind", "lr", "momentum", "dampening", "weight_decay", "nesterov", "fresh", "scale")
PARAMS = ("w", "b")  # weight and bias; the bias column is the augmented key's constant 1


@dataclass(frozen=True)
class RecordedLayer:
    """A layer to record. ``compress_by_example``: the key of an example never changes (the input layer
    without augmentation), so one key per example is stored and its values can be summed over steps."""

    name: str
    module: nn.Linear
    compress_by_example: bool = False
    # False: no forward hook; the model hands its rows to ``DualRecorder.record`` itself (a recurrent cell's gate
    # map, applied once per time step, records a whole window at once).
    hooked: bool = True


@dataclass(frozen=True)
class Provenance:
    """Who the rows of the current mini-batch are: ``example (B,)``, ``label (B,)``, ``task`` (one id, or
    ``(B,)`` when a batch mixes tasks) and the epoch."""

    example: torch.Tensor
    label: torch.Tensor
    task: int | torch.Tensor
    epoch: int


@dataclass(frozen=True)
class RecorderCheckpoint:
    """Where recording stood at a checkpoint: the store's manifest (every chunk flushed) and the step count."""

    manifest: dict
    step: int


def _to_numpy(t: torch.Tensor, dtype: str) -> np.ndarray:
    return t.detach().to("cpu").numpy().astype(dtype, copy=False)


class _LayerState:
    def __init__(self, spec: RecordedLayer) -> None:
        self.spec = spec
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (x (B, in), δ (B, out)) of this step
        self.key_checksums: dict[int, float] = {}  # compressed layers: example -> Σ key, to catch changing keys
        self.max_gradient_residual = 0.0
        self.weight_before: torch.Tensor | None = None
        self.bias_before: torch.Tensor | None = None


class DualRecorder:
    """Attach to ``layers`` of a model trained by ``optimizer``; write the key store under ``root``.

    Usage::

        recorder = DualRecorder(layers, optimizer, root)
        for epoch ...:
            with recorder.batch(Provenance(ids, labels, task, epoch)):
                loss = loss_fn(model(x), y)
                loss.backward()
            clip_grad_norm_(...)   # optional, any routine that rescales gradients
            optimizer.step(); scheduler.step()
        recorder.close()

    Forward passes outside ``batch`` (evaluation) or without gradients are not recorded.
    """

    def __init__(
        self,
        layers: Sequence[RecordedLayer],
        optimizer: torch.optim.Optimizer,
        root: Path | str,
        key_dtype: str = "float32",
        value_dtype: str | None = None,
        chunk_rows: int = 16384,
        check_gradients: bool = False,
        resume: RecorderCheckpoint | None = None,
        background_writes: bool = False,
    ) -> None:
        """``resume``: what ``checkpoint()`` returned in an interrupted run with the same layers and optimizer
        (restored to that point); recording continues from there and later rows of that run are dropped.
        ``background_writes``: full chunks go to disk on a worker thread while training continues."""
        if not layers:
            raise ConfigError("DualRecorder needs at least one layer")
        if key_dtype not in KEY_DTYPES:
            raise ConfigError(f"key_dtype={key_dtype!r} is not one of {', '.join(KEY_DTYPES)}")
        names = [layer.name for layer in layers]
        if len(set(names)) != len(names):
            raise ConfigError(f"recorded layer names must be unique, got {names}")
        for layer in layers:
            if not isinstance(layer.module, nn.Linear):
                raise ConfigError(f"layer {layer.name!r} is a {type(layer.module).__name__}, not nn.Linear")
        self.optimizer = optimizer
        self.exact = type(optimizer) is torch.optim.SGD
        if self.exact and any(g.get("maximize", False) for g in optimizer.param_groups):
            raise ConfigError("SGD(maximize=True) is not supported by the dual recorder")
        model_dtype = layers[0].module.weight.dtype
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype or ("float64" if model_dtype == torch.float64 else "float32")
        self.check_gradients = check_gradients
        self.writer = StoreWriter(root, chunk_rows=chunk_rows, resume=None if resume is None else resume.manifest,
                                   background=background_writes)
        self.root = self.writer.root
        self.step = 0 if resume is None else resume.step  # optimizer steps taken since recording began
        self._provenance: Provenance | None = None
        self._layers = [_LayerState(spec) for spec in layers]
        self._by_name = {state.spec.name: state for state in self._layers}
        self._handles = []
        for state in self._layers:
            if resume is None:
                self._declare(state.spec)
            elif state.spec.name not in resume.manifest["layers"]:
                raise ConfigError(f"cannot resume: layer {state.spec.name!r} is not in the recorded store")
            if state.spec.hooked:
                self._handles.append(state.spec.module.register_forward_hook(self._forward_hook(state)))
        self._handles.append(optimizer.register_step_pre_hook(self._before_step))
        self._handles.append(optimizer.register_step_post_hook(self._after_step))
        self._closed = False

    # -- declaration -----------------------------------------------------------------------------------------
    def _declare(self, spec: RecordedLayer) -> None:
        m = spec.module
        provenance = [Column("example", "int64"), Column("label", "int64"), Column("task", "int64")]
        row_columns = [Column("error", self.value_dtype, m.out_features), *provenance,
                       Column("step", "int64"), Column("epoch", "int64")]
        tables = {}
        if spec.compress_by_example:
            tables["keys"] = [Column("key", self.key_dtype, m.in_features), *provenance]
        else:
            row_columns.insert(0, Column("key", self.key_dtype, m.in_features))
        tables["rows"] = row_columns
        tables["steps"] = [Column(f"{p}_{f}", "float64") for p in PARAMS for f in STEP_FIELDS]
        arrays = {"initial_weight": _to_numpy(m.weight, "float64")}
        if m.bias is not None:
            arrays["initial_bias"] = _to_numpy(m.bias, "float64")
        info = {
            "in_features": m.in_features,
            "out_features": m.out_features,
            "has_bias": m.bias is not None,
            "compressed": spec.compress_by_example,
            "key_dtype": self.key_dtype,
            "value_dtype": self.value_dtype,
            "optimizer": type(self.optimizer).__name__,
            "exact": self.exact,
        }
        self.writer.add_layer(spec.name, info, tables, arrays)

    # -- recording -------------------------------------------------------------------------------------------
    @contextmanager
    def batch(self, provenance: Provenance) -> Iterator[None]:
        """Record the forward and backward passes run inside this block as the rows of one mini-batch."""
        if self._closed:
            raise ConfigError("the recorder is closed")
        shapes = [provenance.label.shape] + (
            [provenance.task.shape] if isinstance(provenance.task, torch.Tensor) else [])
        if provenance.example.ndim != 1 or any(shape != provenance.example.shape for shape in shapes):
            raise ConfigError(
                f"provenance example/label/task must be 1-D of equal length, got {tuple(provenance.example.shape)} "
                f"and {[tuple(s) for s in shapes]}"
            )
        self._provenance = provenance
        try:
            yield
        finally:
            self._provenance = None

    def _forward_hook(self, state: _LayerState):
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
            provenance = self._provenance
            if provenance is None or not torch.is_grad_enabled() or not output.requires_grad:
                return
            x = inputs[0].detach()
            if x.ndim != 2 or x.shape[0] != provenance.example.shape[0]:
                raise ConfigError(
                    f"layer {state.spec.name!r}: input of shape {tuple(x.shape)} does not match a batch of "
                    f"{provenance.example.shape[0]} examples (the recorder needs (B, in) inputs)"
                )
            output.register_hook(lambda grad: self._record(state, x, grad.detach(), provenance))

        return hook

    def record(self, name: str, keys: torch.Tensor, errors: torch.Tensor, provenance: Provenance) -> None:
        """Record rows of an un-hooked layer: its inputs ``keys (B, in)`` and the errors ∂L/∂(outputs)
        ``errors (B, out)`` of one backward pass, row i from ``provenance``'s example i."""
        state = self._by_name.get(name)
        if state is None or state.spec.hooked:
            raise ConfigError(f"{name!r} is not an un-hooked recorded layer")
        m = state.spec.module
        n = provenance.example.shape[0]
        if keys.shape != (n, m.in_features) or errors.shape != (n, m.out_features):
            raise ConfigError(f"layer {name!r}: keys {tuple(keys.shape)} and errors {tuple(errors.shape)} do not "
                              f"match ({n}, {m.in_features}) and ({n}, {m.out_features})")
        self._record(state, keys.detach(), errors.detach(), provenance)

    def checkpoint(self) -> RecorderCheckpoint:
        """Between optimizer steps: flush every table and return what ``DualRecorder(resume=...)`` needs."""
        if any(state.pending for state in self._layers):
            raise ConfigError("checkpoint() between a backward pass and its optimizer step")
        return RecorderCheckpoint(self.writer.snapshot(), self.step)

    def _record(self, state: _LayerState, x: torch.Tensor, error: torch.Tensor, provenance: Provenance) -> None:
        spec = state.spec
        example = _to_numpy(provenance.example, "int64")
        label = _to_numpy(provenance.label, "int64")
        task = (_to_numpy(provenance.task, "int64") if isinstance(provenance.task, torch.Tensor)
                else np.full(len(example), provenance.task, dtype=np.int64))
        rows = {
            "error": _to_numpy(error, self.value_dtype),
            "example": example,
            "label": label,
            "task": task,
            "step": np.full(len(example), self.step, dtype=np.int64),
            "epoch": np.full(len(example), provenance.epoch, dtype=np.int64),
        }
        keys = _to_numpy(x, self.key_dtype)
        if spec.compress_by_example:
            sums = x.to(torch.float64).sum(dim=1).cpu().numpy()
            new = []
            for i, ident in enumerate(example.tolist()):
                seen = state.key_checksums.get(ident)
                if seen is None:
                    state.key_checksums[ident] = float(sums[i])
                    new.append(i)
                elif seen != float(sums[i]):
                    raise VerificationError(
                        f"layer {spec.name!r}: the key of example {ident} changed between steps; "
                        f"compress_by_example needs inputs that never change (no augmentation)"
                    )
            if new:
                idx = np.asarray(new)
                self.writer.append(
                    spec.name, "keys", {"key": keys[idx], "example": example[idx], "label": label[idx],
                                        "task": task[idx]}
                )
        else:
            rows["key"] = keys
        self.writer.append(spec.name, "rows", rows)
        state.pending.append((x, error))

    # -- optimizer steps -------------------------------------------------------------------------------------
    def _group_of(self, param: torch.Tensor) -> dict:
        for group in self.optimizer.param_groups:
            if any(p is param for p in group["params"]):
                return group
        raise ConfigError("a recorded layer's parameter is not in the optimizer")

    def _before_step(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        for state in self._layers:
            m = state.spec.module
            if not self.exact:
                state.weight_before = m.weight.detach().clone()
                state.bias_before = None if m.bias is None else m.bias.detach().clone()
                continue
            row = {}
            for p, param in zip(PARAMS, (m.weight, m.bias)):
                row.update(self._sgd_fields(state, p, param))
            self.writer.append(state.spec.name, "steps", {k: np.asarray([v], dtype=np.float64) for k, v in row.items()})

    def _sgd_fields(self, state: _LayerState, p: str, param: torch.Tensor | None) -> dict[str, float]:
        fields = dict.fromkeys(STEP_FIELDS, 0.0)
        if param is None or param.grad is None:
            fields["kind"] = KIND_SKIPPED
            return {f"{p}_{k}": v for k, v in fields.items()}
        group = self._group_of(param)
        buffer = self.optimizer.state.get(param, {}).get("momentum_buffer")
        fields.update(
            kind=KIND_SGD,
            lr=float(group["lr"]),
            momentum=float(group["momentum"]),
            dampening=float(group["dampening"]),
            weight_decay=float(group["weight_decay"]),
            nesterov=float(bool(group["nesterov"])),
            fresh=float(buffer is None),
            scale=self._gradient_scale(state, p, param.grad),
        )
        return {f"{p}_{k}": v for k, v in fields.items()}

    def _recorded_gradient_rows(self, state: _LayerState, p: str, row: int | None) -> torch.Tensor:
        """Σ δ xᵀ restricted to one output row (``p == "w"``), or Σ δ (the bias gradient), in float64."""
        total = None
        for x, error in state.pending:
            e = error.to(torch.float64)
            part = e.sum(dim=0) if p == "b" else e[:, row] @ x.to(torch.float64)
            total = part if total is None else total + part
        return total

    def _gradient_scale(self, state: _LayerState, p: str, grad: torch.Tensor) -> float:
        if not state.pending:
            raise VerificationError(
                f"layer {state.spec.name!r} has a gradient at step {self.step} but nothing was recorded: "
                f"run forward and backward inside recorder.batch(...)"
            )
        g = grad.detach().to(torch.float64)
        if p == "w":
            row = int(torch.argmax(g.pow(2).sum(dim=1)))
            recorded, actual = self._recorded_gradient_rows(state, p, row), g[row]
        else:
            recorded, actual = self._recorded_gradient_rows(state, p, None), g
        norm2 = float(recorded @ recorded)
        scale = float(actual @ recorded) / norm2 if norm2 > 0 else 1.0
        if self.check_gradients and p == "w":
            full = sum(e.to(torch.float64).T @ x.to(torch.float64) for x, e in state.pending)
            denom = float(g.norm())
            if denom > 0:
                residual = float((g - scale * full).norm()) / denom
                state.max_gradient_residual = max(state.max_gradient_residual, residual)
        return scale

    def _after_step(self, optimizer: torch.optim.Optimizer, args, kwargs) -> None:
        if not self.exact:
            for state in self._layers:
                self._record_projected_step(state)
        for state in self._layers:
            state.pending.clear()
        self.step += 1

    def _record_projected_step(self, state: _LayerState) -> None:
        m = state.spec.module
        row = {}
        for p, param, before in zip(PARAMS, (m.weight, m.bias), (state.weight_before, state.bias_before)):
            fields = dict.fromkeys(STEP_FIELDS, 0.0)
            if param is None or not state.pending:
                fields["kind"] = KIND_SKIPPED
            else:
                update = (param.detach() - before).to(torch.float64)
                if p == "w":
                    recorded = sum(e.to(torch.float64).T @ x.to(torch.float64) for x, e in state.pending)
                else:
                    recorded = sum(e.to(torch.float64).sum(dim=0) for _, e in state.pending)
                norm2 = float((recorded * recorded).sum())
                fields.update(kind=KIND_PROJECTED, lr=float(self._group_of(param)["lr"]),
                              scale=float((update * recorded).sum()) / norm2 if norm2 > 0 else 0.0)
            row.update({f"{p}_{k}": v for k, v in fields.items()})
        self.writer.append(state.spec.name, "steps", {k: np.asarray([v], dtype=np.float64) for k, v in row.items()})
        state.weight_before = state.bias_before = None

    # -- finishing -------------------------------------------------------------------------------------------
    def close(self) -> Path:
        """Detach the hooks, store the final weights, flush every table and mark the store complete."""
        if self._closed:
            return self.root
        for handle in self._handles:
            handle.remove()
        for state in self._layers:
            m = state.spec.module
            self.writer.save_array(state.spec.name, "final_weight", _to_numpy(m.weight, "float64"))
            if m.bias is not None:
                self.writer.save_array(state.spec.name, "final_bias", _to_numpy(m.bias, "float64"))
            self.writer.set_info(
                state.spec.name, n_steps=self.step,
                max_gradient_residual=state.max_gradient_residual if self.check_gradients else None,
            )
        self.writer.close()
        self._closed = True
        return self.root

    def __enter__(self) -> DualRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
