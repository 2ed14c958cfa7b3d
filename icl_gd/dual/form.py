"""A trained network in dual form (Irie, Csordás & Schmidhuber 2022, §2): one object from a key store to answers.

``DualForm`` opens the key store a ``DualRecorder`` wrote beside the model whose linear layers it recorded and
answers every question the analyses ask of it:

- ``layer(name)``: that layer in dual form, W_T = a W_0 + Σ_u v_u k_uᵀ (``icl_gd.dual.layer``), built once;
- ``inputs(x)``: each recorded layer's input on a batch (the dual form's queries) and its read-out direction, from
  one forward pass (the library's one forward hook for layer inputs);
- ``verify(name, queries)``: the rebuilt weights and the dual outputs against the primal layer, in float64;
- ``scan(name, queries, readouts, scorers)`` / ``score(...)``: every unit against the queries in one blocked pass
  that any number of scorers ride on (``icl_gd.dual.scan``);
- ``removed({name: selection})`` / ``restricted(names, stop)`` / ``without_rows(name, rows)`` / ``subtracted``: the
  model with a set of units subtracted from its layers, restored on exit (``icl_gd.dual.removal``).

An analysis (images, language models, attribution, the recorder's identity checks) opens one ``DualForm`` and asks;
it never reopens the store or rebuilds a layer itself::

    form = DualForm(run_dir / "store" / "single" / "seed-0", model, dict(zip(LAYERS, model.layers)))
    batch = form.inputs(x)                                # (nq, in) queries and (nq, out) read-outs per layer
    check = form.verify("hidden", batch.query("hidden"))  # float64, against the stored final weights
    scores = form.score("hidden", batch.query("hidden"), batch.readout("hidden"), n_classes=10)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.dual.layer import DualLayer, dual_layer
from icl_gd.dual.removal import UnitSelection, keys_removed, removal_delta
from icl_gd.dual.scan import QueryScores, Scorer, UnitScan, scan_units, score_queries
from icl_gd.dual.store_reader import LayerStore, open_store
from icl_gd.dual.verification import DualVerification, verify_layer

Delta = tuple[np.ndarray, "np.ndarray | None"]


@dataclass(frozen=True)
class LayerInputs:
    """The model on a batch of ``nq`` inputs: its ``logits (nq, C)``; per recorded layer its input ``(nq, in)``
    (the dual form's query) and, when asked for, its read-out ``(nq, out)`` = ∂ logit_pred / ∂ (layer output),
    pred = the argmax of the logits. Tensors on the model's device, detached."""

    logits: torch.Tensor
    inputs: dict[str, torch.Tensor]
    readouts: dict[str, torch.Tensor] | None

    def query(self, name: str) -> np.ndarray:
        """Layer ``name``'s queries as a CPU array ``(nq, in)``."""
        return self.inputs[name].cpu().numpy()

    def readout(self, name: str) -> np.ndarray:
        """Layer ``name``'s read-outs as a CPU array ``(nq, out)``."""
        if self.readouts is None:
            raise ConfigError("these layer inputs were captured without read-outs; call inputs(x, readouts=True)")
        return self.readouts[name].cpu().numpy()


@dataclass(frozen=True)
class Reading:
    """What ``DualForm.read`` gives per recorded layer: its verification and its query scores."""

    verification: dict[str, DualVerification]
    scores: dict[str, QueryScores]


class DualForm:
    """A trained model's recorded layers in dual form. ``store`` is a key-store directory (or the opened store);
    ``modules`` names the model's recorded ``nn.Linear`` layers as the store names them, in forward order;
    ``upto`` reads every layer after that many optimizer steps (all by default)."""

    def __init__(self, store: Path | str | Mapping[str, LayerStore], model: nn.Module,
                 modules: Mapping[str, nn.Linear], upto: int | None = None) -> None:
        self.stores = open_store(store) if isinstance(store, (str, Path)) else dict(store)
        missing = [name for name in modules if name not in self.stores]
        if missing:
            raise ConfigError(f"layers {', '.join(missing)} are not in the key store (it holds "
                              f"{', '.join(self.stores)})")
        self.model, self.modules, self.upto = model, dict(modules), upto
        self._layers: dict[str, DualLayer] = {}
        self._deltas: dict[tuple[str, UnitSelection], Delta] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.modules)

    def layer(self, name: str) -> DualLayer:
        """Layer ``name`` in dual form (its step coefficients computed on first use)."""
        if name not in self.modules:
            raise ConfigError(f"unknown layer {name!r}; recorded: {', '.join(self.modules)}")
        if name not in self._layers:
            self._layers[name] = dual_layer(self.stores[name], self.upto)
        return self._layers[name]

    # ------------------------------------------------------------------ queries
    def inputs(self, x: torch.Tensor, readouts: bool = True) -> LayerInputs:
        """Run the model on ``x (nq, ...)`` and capture each recorded layer's input (and read-out)."""
        names = self.names
        captured: dict[str, torch.Tensor] = {}
        outputs: dict[str, torch.Tensor] = {}

        def hook(name: str):
            def capture(module, args, output):
                captured[name] = args[0].detach()
                outputs[name] = output
            return capture

        handles = [self.modules[name].register_forward_hook(hook(name)) for name in names]
        try:
            with torch.enable_grad() if readouts else torch.no_grad():
                logits = self.model(x)
                if len(outputs) != len(names):
                    raise ConfigError("a recorded layer was not used by the model's forward pass")
                grads = None
                if readouts:
                    picked = logits.gather(1, logits.argmax(1, keepdim=True)).sum()
                    grads = torch.autograd.grad(picked, [outputs[n] for n in names], allow_unused=False)
        finally:
            for h in handles:
                h.remove()
        return LayerInputs(logits.detach(), {n: captured[n] for n in names},
                           None if grads is None else {n: g.detach() for n, g in zip(names, grads)})

    # ------------------------------------------------------------------ verification
    def verify(self, name: str, queries: np.ndarray, against: Literal["stored", "model"] = "stored",
               block_rows: int = 32768) -> DualVerification:
        """Layer ``name``'s rebuilt weights and dual outputs on ``queries (nq, in)`` against the primal layer: the
        final weights the store kept (``stored``) or the model's current parameters (``model``)."""
        weight = bias = None
        if against == "model":
            module = self.modules[name]
            weight = module.weight.detach().double().cpu().numpy()
            bias = None if module.bias is None else module.bias.detach().double().cpu().numpy()
        return verify_layer(self.layer(name), queries, weight, bias, block_rows=block_rows)

    # ------------------------------------------------------------------ scanning
    def scan(self, name: str, queries: np.ndarray | torch.Tensor, readouts: np.ndarray | torch.Tensor,
             scorers: Sequence[Scorer] = (), k: int = 10, block_rows: int = 32768,
             dtype: torch.dtype = torch.float32, matmul_dtype: torch.dtype | None = None,
             opponents: bool = False) -> UnitScan:
        """Every unit of layer ``name`` against ``queries (nq, in)`` with ``readouts (nq, out)``, one blocked pass
        feeding each of ``scorers`` (``icl_gd.dual.scan.scan_units``)."""
        layer = self.layer(name)
        return scan_units(layer, queries, readouts, k, block_rows, scorers, dtype, matmul_dtype, opponents)

    def score(self, name: str, queries: np.ndarray | torch.Tensor, readouts: np.ndarray | torch.Tensor,
              scorers: Sequence[Scorer] = (), **options) -> QueryScores:
        """``scan`` with the class, task and epoch totals (``icl_gd.dual.scan.score_queries``; ``options``: k,
        n_classes, n_tasks, n_epochs, n_examples, block_rows, dtype, matmul_dtype)."""
        layer = self.layer(name)
        return score_queries(layer, queries, readouts, scorers=scorers, **options)

    def read(self, batch: LayerInputs, scorers: Mapping[str, Sequence[Scorer]] | None = None,
             verify_queries: int | None = None, **options) -> Reading:
        """Every recorded layer on the queries of ``batch``: first each layer verified on the first
        ``verify_queries`` queries (None: all), then each scored (``score``, with ``options``) with that layer's
        ``scorers`` riding on its pass."""
        scorers = scorers or {}
        verification = {name: self.verify(name, batch.query(name)[:verify_queries]) for name in self.names}
        scores = {name: self.score(name, batch.query(name), batch.readout(name), scorers.get(name, ()), **options)
                  for name in self.names}
        return Reading(verification, scores)

    # ------------------------------------------------------------------ removal
    def delta(self, name: str, selection: UnitSelection) -> Delta:
        """``(ΔW, Δb)``: what the units ``selection`` picks added to layer ``name`` (computed once)."""
        key = (name, selection)
        if key not in self._deltas:
            self._deltas[key] = removal_delta(self.layer(name), selection)
        return self._deltas[key]

    @contextmanager
    def removed(self, selections: Mapping[str, UnitSelection]) -> Iterator[nn.Module]:
        """Within the block the model lacks, in each named layer, the units its selection picks (restored
        exactly on exit)."""
        with keys_removed([(self.modules[name], *self.delta(name, selection))
                           for name, selection in selections.items()]):
            yield self.model

    def restricted(self, names: Sequence[str], stop: int):
        """``removed`` of the units of steps ``stop`` onwards from each of ``names``: their attention restricted to
        the keys of the steps before ``stop`` (``stop=0``: the initial weights; every step: the trained layer)."""
        steps = {name: self.layer(name).n_steps for name in names}
        return self.removed({name: UnitSelection(steps=(stop, max(stop, steps[name]))) for name in names})

    @contextmanager
    def subtracted(self, name: str, delta_w: np.ndarray, delta_b: np.ndarray | None = None) -> Iterator[nn.Module]:
        """Within the block layer ``name``'s weights lack ``delta_w (out, in)`` (and its bias ``delta_b (out,)``):
        what some of its units added (restored exactly on exit)."""
        with keys_removed([(self.modules[name], delta_w, delta_b)]):
            yield self.model

    def without_rows(self, name: str, rows: np.ndarray):
        """``subtracted`` of the units at ``rows (n,)`` of layer ``name``'s rows table: Σ v kᵀ and Σ v^b."""
        key, value, bias = self.layer(name).gather(np.asarray(rows))
        return self.subtracted(name, value.T @ key, None if bias is None else bias.sum(0))

