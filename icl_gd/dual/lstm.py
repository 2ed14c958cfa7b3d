"""An LSTM language model whose linear maps are the dual form's stores: each layer's gate map and the output layer.

Layer l computes its four gates' pre-activations z_t = W_l [x_t; h_{t-1}] + b_l (``gates[l]``, one ``nn.Linear``
of (in + hidden) → 4·hidden, gate order i, f, g, o as in ``torch.nn.LSTM``), so ∂L/∂W_l = Σ_t δ_t [x_t; h_{t-1}]ᵀ
over the BPTT window with δ_t = ∂L/∂z_t: one key [x_t; h_{t-1}; 1] serves all four gates and both the input and
recurrent weight matrices. The cell runs as an explicit loop; with ``capture`` each z_t keeps a hook that writes
δ_t into a window buffer, which ``record_window`` hands to the recorder after the backward pass. The output layer
is an ordinary hooked ``nn.Linear`` applied to every h_t of the window at once (``record_output=False`` leaves it
out of the store: its value is vocabulary-wide). Dropout on the embeddings (as the authors' ``RNNLanguageModel``)
multiplies x_t by a given mask before x_t enters the gate map, so the recorded key is the dropped x_t and the dual
form stays exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icl_gd.dual.recorder import DualRecorder, Provenance, RecordedLayer

State = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (h (B, H), c (B, H))


def gate_layer_name(layer: int) -> str:
    return f"gates{layer}"


OUTPUT = "output"


@dataclass
class Capture:
    """What a captured forward pass keeps per layer: keys ``(L, B, in)``, the errors buffer ``(L, B, 4H)`` that
    the z_t hooks fill during backward, and the pre-activations z_t themselves (with their graph)."""

    keys: list[torch.Tensor]
    errors: list[torch.Tensor]
    preactivations: list[list[torch.Tensor]]


class LSTMLanguageModel(nn.Module):
    """Embedding → ``layers`` LSTM layers → output layer over the vocabulary."""

    def __init__(self, vocab_size: int, embed: int, hidden: int, layers: int, generator: torch.Generator,
                 record_output: bool = True) -> None:
        super().__init__()
        self.hidden = hidden
        self.record_output = record_output
        self.embedding = nn.Embedding(vocab_size, embed)
        self.gates = nn.ModuleList(nn.Linear((embed if l == 0 else hidden) + hidden, 4 * hidden)
                                   for l in range(layers))
        self.output = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            self.embedding.weight.uniform_(-0.1, 0.1, generator=generator)
            for linear in [*self.gates, self.output]:
                bound = 1.0 / np.sqrt(hidden)  # torch.nn.LSTM's init, from our generator
                linear.weight.uniform_(-bound, bound, generator=generator)
                linear.bias.uniform_(-bound, bound, generator=generator)

    def initial_state(self, batch: int) -> State:
        like = self.output.weight
        return [(like.new_zeros(batch, self.hidden), like.new_zeros(batch, self.hidden)) for _ in self.gates]

    def recorded_layers(self) -> list[RecordedLayer]:
        """The gate maps (un-hooked: ``record_window`` hands their rows over) and, with ``record_output``, the hooked
        output layer."""
        gates = [RecordedLayer(gate_layer_name(l), g, hooked=False) for l, g in enumerate(self.gates)]
        return [*gates, RecordedLayer(OUTPUT, self.output)] if self.record_output else gates

    def hidden_states(self, tokens: torch.Tensor, state: State, capture: bool = False,
                      embedding_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, State, Capture | None]:
        """``tokens (L, B)`` → top-layer ``h (L, B, H)``, the final state, and with ``capture`` the keys, error
        buffers and pre-activations of every layer. ``embedding_mask (L, B, E)``: dropout on the embeddings (already
        scaled by 1/(1-p))."""
        x = self.embedding(tokens)  # (L, B, E)
        if embedding_mask is not None:
            x = x * embedding_mask
        L, B = tokens.shape
        H = self.hidden
        cap = Capture([], [], []) if capture else None
        new_state: State = []
        for l, gate in enumerate(self.gates):
            h, c = state[l]
            d_in = x.shape[-1]
            # The input part of every step's pre-activation in one matmul; the recurrent part per step. Both use
            # slices of the one weight, so its gradient is Σ_t δ_t [x_t; h_{t-1}]ᵀ.
            z_input = torch.nn.functional.linear(x, gate.weight[:, :d_in], gate.bias)  # (L, B, 4H)
            w_h = gate.weight[:, d_in:]
            outputs, previous = [], []
            if capture:
                errors = x.new_zeros(L, B, 4 * H)
                cap.errors.append(errors)
                cap.preactivations.append([])
            for t in range(L):
                previous.append(h)
                z = z_input[t] + h @ w_h.T
                if capture:
                    cap.preactivations[l].append(z)
                    if z.requires_grad:
                        z.register_hook(_store(errors, t))
                i, f, g, o = z.chunk(4, dim=1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                outputs.append(h)
            if capture:
                cap.keys.append(torch.cat([x.detach(), torch.stack(previous).detach()], dim=2))
            x = torch.stack(outputs)
            new_state.append((h, c))
        return x, new_state, cap

    def forward(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """``tokens (L, B)`` → logits ``(L·B, V)`` (rows in (t, b) order) and the final state."""
        h, state, _ = self.hidden_states(tokens, state)
        return self.output(h.reshape(-1, self.hidden)), state


def _store(buffer: torch.Tensor, t: int):
    def hook(grad: torch.Tensor) -> None:
        buffer[t].copy_(grad)
    return hook


def record_window(recorder: DualRecorder, capture: Capture, provenance: Provenance) -> None:
    """Hand every gate layer's keys and errors of one window to the recorder (rows in (t, b) order)."""
    for l, (keys, errors) in enumerate(zip(capture.keys, capture.errors)):
        recorder.record(gate_layer_name(l), keys.reshape(-1, keys.shape[-1]), errors.reshape(-1, errors.shape[-1]),
                        provenance)


def dropout_mask(shape: tuple[int, ...], p: float, seed: int, step: int, dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor | None:
    """Inverted-dropout mask ``shape`` for optimizer step ``step`` of seed ``seed`` (None when p = 0): a pure function
    of (seed, step), so a resumed run draws the masks of an uninterrupted one."""
    if p <= 0:
        return None
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    keep = torch.rand(shape, generator=generator, dtype=torch.float64) >= p
    return (keep.to(dtype) / (1.0 - p)).to(device)


def detach(state: State) -> State:
    return [(h.detach(), c.detach()) for h, c in state]


def layer_modules(model: LSTMLanguageModel) -> dict[str, nn.Linear]:
    """Recorded layer name → its module, in recording order (the output layer only with ``record_output``)."""
    return {spec.name: spec.module for spec in model.recorded_layers()}


def layer_names(n_layers: int) -> Sequence[str]:
    return [*(gate_layer_name(l) for l in range(n_layers)), OUTPUT]
