"""Seeds in one batch: S copies of a model trained as one, each on its own seed's data, with one optimiser step.

The S models' parameters are stacked along a leading seed axis (``torch.func.stack_module_state``) and the
forward pass is the template model's, vmapped over seeds (``functional_call``). The loss is the sum of the
per-seed losses, so each seed's gradient is exactly its lone run's; gradient clipping is per seed (each seed's
own global norm) and Adam(W) is elementwise, so every seed follows the same trajectory as a lone ``train`` run
with that seed, up to floating-point round-off in the batched kernels. Shapes: S seeds, B tasks, T tokens.
"""

from __future__ import annotations

import copy
import io
from contextlib import closing
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state

from .errors import ConfigError, DivergenceError
from .results import atomic_write_bytes
from .training import TokenTask, TrainConfig, TrainState, compiled_if, prefetched, progress_bar


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
        state = {name: t[index].detach().clone() for name, t in {**self.params, **self.buffers}.items()}
        model.load_state_dict(state)
        return model.eval()

    def members(self) -> list[nn.Module]:
        return [self.member(i) for i in range(self.n_members)]

    @torch.no_grad()
    def load_members(self, models: Sequence[nn.Module]) -> None:
        """Overwrite the stacked parameters with those of ``models`` (one per member)."""
        for name, stacked in {**self.params, **self.buffers}.items():
            stacked.copy_(torch.stack([dict(m.state_dict())[name] for m in models]))


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


def stacked_train_batch(task: TokenTask, batch_size: int, seeds: Sequence[int], step: int, device: torch.device,
                        dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (S, B, T, D), targets (S, B, d_y)): each seed's own batch for ``step``, as a lone run sees it."""
    pairs = [task.train_batch(batch_size, seed, step, device, dtype) for seed in seeds]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def _save(path: Path, ensemble: SeedEnsemble, optimizer: torch.optim.Optimizer, states: list[TrainState],
          fingerprint: str) -> None:
    buffer = io.BytesIO()
    torch.save({"params": {k: v.detach() for k, v in ensemble.params.items()}, "optimizer": optimizer.state_dict(),
                "step": states[0].step, "histories": [s.history for s in states], "fingerprint": fingerprint},
               buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _load(path: Path | None, ensemble: SeedEnsemble, optimizer: torch.optim.Optimizer,
          fingerprint: str) -> list[TrainState] | None:
    if path is None or not Path(path).exists():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("fingerprint") != fingerprint or len(payload["histories"]) != ensemble.n_members:
        return None
    with torch.no_grad():
        for name, value in payload["params"].items():
            ensemble.params[name].copy_(value)
    optimizer.load_state_dict(payload["optimizer"])
    return [TrainState(step=payload["step"], history=h) for h in payload["histories"]]


def train_ensemble(
    models: Sequence[nn.Module],
    task: TokenTask,
    config: TrainConfig,
    seeds: Sequence[int],
    *,
    device: torch.device = torch.device("cpu"),
    evaluate: Callable[[nn.Module, int, int], list[dict[str, Any]]] | None = None,
    checkpoint_path: Path | None = None,
    fingerprint: str = "",
    progress: bool = False,
    description: str = "train",
) -> list[TrainState]:
    """Train ``models[i]`` (in place) on the data of ``seeds[i]``, all at once; return each seed's state.

    Equivalent, seed by seed, to ``training.train(models[i], task, config, seeds[i])``: same batches, same
    per-seed gradient clipping, same Adam(W). ``evaluate(model, step, seed)`` runs on a standalone copy of each
    member at step 0, every ``eval_every`` steps and at the end; its rows go to that seed's history.
    Checkpoints (all seeds in one file) every ``checkpoint_every`` steps and at the end; an existing checkpoint
    with the same ``fingerprint`` is resumed exactly. A non-finite loss raises ``DivergenceError``.
    """
    seeds = list(seeds)
    if len(seeds) != len(models):
        raise ConfigError(f"got {len(models)} models for {len(seeds)} seeds")
    ensemble = SeedEnsemble(models)
    params = ensemble.parameters()
    dtype = params[0].dtype
    optimizer = torch.optim.AdamW(params, lr=config.lr, betas=(config.beta1, config.beta2),
                                  weight_decay=config.weight_decay)
    states = _load(checkpoint_path, ensemble, optimizer, fingerprint) or [TrainState() for _ in seeds]
    step = states[0].step

    def run_eval(at: int) -> None:
        if evaluate is None:
            return
        for i, (seed, state) in enumerate(zip(seeds, states)):
            if not any(r.get("step") == at for r in state.history):
                state.history.extend(evaluate(ensemble.member(i), at, seed))

    if step == 0:
        run_eval(0)
    ensemble.template.train()

    def per_seed_loss(tokens: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(S,) losses, each lone run's: 0.5 · mean over its tasks of ‖ŷ - y‖²."""
        return 0.5 * ((ensemble(tokens) - target) ** 2).sum(-1).mean(-1)

    seed_losses = compiled_if(config.compile, per_seed_loss)
    with progress_bar(config.steps, description, progress) as update:
        update(step, float("nan"))
        def fetch(at: int) -> tuple[torch.Tensor, torch.Tensor]:
            return stacked_train_batch(task, config.batch_size, seeds, at, device, dtype)

        with closing(prefetched(fetch, range(step, config.steps))) as batches:
            for tokens, target in batches:
                per_seed = seed_losses(tokens, target)
                for p in params:
                    p.grad = None
                per_seed.sum().backward()
                if config.grad_clip is not None:
                    clip_grad_norm_per_member(params, config.grad_clip)
                optimizer.step()
                step += 1
                for state in states:
                    state.step = step
                if step % config.eval_every == 0 or step == config.steps:
                    values = per_seed.detach().tolist()
                    bad = [s for s, v in zip(seeds, values) if not math.isfinite(v)]
                    if bad:
                        raise DivergenceError(f"training diverged at step {step} for seed(s) {bad}; lower lr or "
                                              "set grad_clip")
                    update(step, sum(values) / len(values))
                    run_eval(step)
                if checkpoint_path is not None and (step % config.checkpoint_every == 0 or step == config.steps):
                    _save(checkpoint_path, ensemble, optimizer, states, fingerprint)
    with torch.no_grad():  # the models end trained in place, as ``training.train`` leaves its model
        for i, model in enumerate(models):
            model.load_state_dict(ensemble.member(i).state_dict())
            model.eval()
    return states
