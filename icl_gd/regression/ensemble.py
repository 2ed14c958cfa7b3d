"""Seeds stacked along a leading axis: S models of one architecture evaluated as one vmapped model.

The S models' parameters are stacked (``torch.func.stack_module_state``) and the forward pass is the template
model's, vmapped over seeds (``functional_call``). ``training.train`` trains several seeds through this, with
per-seed gradient clipping (``clip_grad_norm_per_member``), so each seed equals its lone run. Shapes: S seeds,
B tasks, T tokens, D token width.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state

from icl_gd.core.errors import ConfigError


class SeedEnsemble:
    """S models of one architecture with stacked parameters (each tensor (S, ...)).

    ``forward(tokens (S, B, T, D))`` gives each member's output on its own slice, stacked: (S, B, d_y) for an
    LSA model. ``member(i)`` is an ordinary ``nn.Module`` holding a copy of member i's current parameters.
    """

    def __init__(self, models: Sequence[nn.Module]) -> None:
        models = list(models)
        if not models:
            raise ConfigError("a seed ensemble needs at least one model")
        shapes = [[(n, p.shape) for n, p in m.named_parameters()] for m in models]
        if any(s != shapes[0] for s in shapes):
            raise ConfigError("every model of a seed ensemble must have the same parameters and shapes")
        self.template = copy.deepcopy(models[0])
        params, buffers = stack_module_state(models)
        self.params: dict[str, torch.Tensor] = params  # name -> (S, ...) leaf tensors
        self.buffers: dict[str, torch.Tensor] = buffers

    @property
    def n_members(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def parameters(self) -> list[torch.Tensor]:
        return list(self.params.values())

    def forward(self, tokens: torch.Tensor, **kwargs: Any) -> Any:
        """Member s applied to tokens[s]; ``kwargs`` pass through to the template's forward."""
        if tokens.shape[0] != self.n_members:
            raise ConfigError(f"tokens have {tokens.shape[0]} seed slices, the ensemble has {self.n_members}")

        def call(params: dict, buffers: dict, x: torch.Tensor) -> Any:
            return functional_call(self.template, (params, buffers), (x,), kwargs)

        return torch.func.vmap(call)(self.params, self.buffers, tokens)

    __call__ = forward

    def member(self, index: int) -> nn.Module:
        """A standalone copy of member ``index`` (in eval mode)."""
        model = copy.deepcopy(self.template)
        model.load_state_dict({name: t[index].clone() for name, t in self.state_dict().items()})
        return model.eval()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters and buffers by name, each (S, ...), detached."""
        return {name: t.detach() for name, t in {**self.params, **self.buffers}.items()}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Overwrite the stacked parameters and buffers with ``state`` (as ``state_dict`` gives it)."""
        for name, stacked in {**self.params, **self.buffers}.items():
            stacked.copy_(state[name])


def clip_grad_norm_per_member(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Clip each member's gradient to global norm ``max_norm`` as ``nn.utils.clip_grad_norm_`` would for a
    lone model (same 1e-6 guard, same clamp at 1). Returns the (S,) norms before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        raise ConfigError("no gradients to clip")
    S = grads[0].shape[0]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(S, -1), dim=1) for g in grads])  # (P, S)
    total = torch.linalg.vector_norm(norms, dim=0)  # (S,)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(S, *([1] * (g.dim() - 1))))
    return total
