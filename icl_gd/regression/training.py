"""Training on fresh tasks every step, with exact resume from checkpoints: one loop for one model or many seeds.

A ``TokenTask`` hands out the batch for any step as a pure function of (seed, step), so a resumed run sees the
same data as an uninterrupted one, and, with the model and optimiser state restored, ends with the same numbers.
Several seeds train as one batched model (``ensemble.SeedEnsemble``): the loss is the sum of the per-seed losses,
so each seed's gradient is its lone run's; clipping is per seed and Adam(W) is elementwise, so every seed follows
its lone run's trajectory up to float round-off in the batched kernels. Shapes: S seeds, B tasks, T tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch import nn

from icl_gd.core.checkpoints import config_fingerprint, load_checkpoint, save_checkpoint
from icl_gd.core.config import require_positive, require_positive_ints
from icl_gd.core.optim import clip_gradients, make_optimizer, require_optimizer_keys
from icl_gd.core.progress import progress_bar
from icl_gd.regression.ensemble import SeedEnsemble, clip_grad_norm_per_member
from icl_gd.core.errors import ConfigError, DivergenceError
from icl_gd.regression.metrics import query_loss


class TokenTask(Protocol):
    """Anything that yields (tokens (B, T, D), targets (B, d_y)) for a (seed, step)."""

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; defaults are the authors' (von Oswald et al. 2023, App. A.12) for one or two layers."""

    steps: int = 5000
    batch_size: int = 2048
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.98
    weight_decay: float = 0.0
    grad_clip: float | None = 1e-3
    eval_every: int = 100
    checkpoint_every: int = 1000
    compile: bool = False  # torch.compile the loss (forward and backward): ~2x per step, ~15 s to build once
    warmup: float = 0.0  # fraction of the steps over which the learning rate rises linearly to lr (0: none)

    def __post_init__(self) -> None:
        require_positive_ints(self, "steps", "batch_size", "eval_every", "checkpoint_every")
        if not isinstance(self.warmup, (int, float)) or isinstance(self.warmup, bool) or not 0 <= self.warmup < 1:
            raise ConfigError(f"warmup must be a fraction of the steps in [0, 1), got {self.warmup!r}")
        if not isinstance(self.compile, bool):
            raise ConfigError(f"compile must be true or false, got {self.compile!r}")
        require_optimizer_keys(self)
        if self.grad_clip is not None:
            require_positive("grad_clip", self.grad_clip)


def authors_train_config(n_layers: int, recurrent: bool, **overrides: Any) -> TrainConfig:
    """The authors' settings by depth: clip 1e-3 for 1-2 layers, 10 beyond; lr 5e-4 beyond 3 layers;
    5000 steps for one layer and for recurrent models, 50 000 for deeper separate layers."""
    settings: dict[str, Any] = {
        "steps": 5000 if (n_layers == 1 or recurrent) else 50_000,
        "grad_clip": 1e-3 if n_layers <= 2 else 10.0,
        "lr": 5e-4 if n_layers > 3 else 1e-3,
    }
    settings.update(overrides)
    return TrainConfig(**settings)


# What a diverged training's message suggests (the learning rate is the usual cause; clipping bounds each step).
SMALLER_LR = "a smaller training.lr may train (or a training.grad_clip)"


def warmup_factor(step: int, steps: int, warmup: float) -> float:
    """The learning rate's factor at optimiser step ``step`` (0-based) of ``steps``: a linear rise over the first
    ``warmup`` fraction of the steps, (step + 1) / W for W = round(warmup · steps) steps, then 1. A pure function
    of the step, so a resumed run sets the same rates as an uninterrupted one."""
    ramp = round(warmup * steps)
    return 1.0 if ramp <= 0 or step >= ramp else (step + 1) / ramp


def compiled_if(enabled: bool, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` itself, or ``torch.compile(fn)`` when enabled. Inductor builds its kernels at the first call (about
    15 s on a 2-core CPU; cached on disk for later runs) and needs a C++ compiler there: a failure to build is
    a ``ConfigError`` naming the setting, not a compiler traceback. Compiled and eager steps agree to float32
    round-off, not bit for bit, so ``compile`` is part of a run's fingerprint."""
    if not enabled:
        return fn
    compiled = torch.compile(fn, dynamic=False)
    built = False

    def call(*args: torch.Tensor) -> torch.Tensor:
        nonlocal built
        if built:
            return compiled(*args)
        try:
            out = compiled(*args)
        except Exception as error:  # the backend's errors are many and untyped (compiler missing, headers, ...)
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ConfigError(f"compile=true failed, torch.compile could not build the step ({first[:200]}); "
                              "run with compile=false") from error
        built = True
        return out

    return call


@dataclass
class TrainState:
    """What a checkpoint holds; ``history`` is the tidy list of evaluation rows so far."""

    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


T = TypeVar("T")


def prefetched(fetch: Callable[[int], T], steps: range) -> Iterator[T]:
    """``fetch(step)`` for each step, the next one computed on a background thread while the caller trains.

    Sampling a batch is independent of the model (a pure function of seed and step), so overlapping it with
    the optimiser step changes no number; on a 2-core CPU it hides most of the sampling time.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="icl-gd-batches") as pool:
        pending = pool.submit(fetch, steps[0]) if len(steps) else None
        for i in range(len(steps)):
            batch = pending.result()
            if i + 1 < len(steps):
                pending = pool.submit(fetch, steps[i + 1])
            yield batch


class _Trainee(Protocol):
    """What the loop trains: S members, each with its own seed's data, loss and gradient clipping."""

    def parameters(self) -> list[torch.Tensor]: ...

    def batch(self, task: TokenTask, batch_size: int, seeds: Sequence[int], step: int,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor]: ...

    def losses(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each member's ``query_loss`` on its own batch: (S,) for stacked models, 0-d for a lone one."""

    def clip_(self, max_norm: float) -> None: ...

    def member(self, index: int) -> AbstractContextManager[nn.Module]:
        """Member ``index`` as an ordinary module in eval mode, for evaluation."""

    def state(self) -> dict[str, torch.Tensor]: ...

    def load_state(self, state: dict[str, torch.Tensor]) -> None: ...

    def train_mode(self) -> None: ...

    def finish(self) -> None:
        """Leave the trained weights in the caller's models, in eval mode."""


class _LoneModel:
    """One model, trained as a plain module (no vmap): tokens (B, T, D), targets (B, d_y)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.params = list(model.parameters())

    def parameters(self) -> list[torch.Tensor]:
        return self.params

    def batch(self, task: TokenTask, batch_size: int, seeds: Sequence[int], step: int,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        (seed,) = seeds
        return task.train_batch(batch_size, seed, step, device, self.params[0].dtype)

    def losses(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return query_loss(self.model(tokens), targets)  # 0-d: backward straight from it, no reshape or sum

    def clip_(self, max_norm: float) -> None:
        clip_gradients(self.params, max_norm, foreach=True)

    @contextmanager
    def member(self, index: int) -> Iterator[nn.Module]:
        self.model.eval()
        try:
            yield self.model
        finally:
            self.model.train()

    def state(self) -> dict[str, torch.Tensor]:
        return self.model.state_dict()

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)

    def train_mode(self) -> None:
        self.model.train()

    def finish(self) -> None:
        self.model.eval()


class _StackedModels:
    """S models stacked along a leading seed axis and vmapped: tokens (S, B, T, D), targets (S, B, d_y)."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        self.models = list(models)
        self.ensemble = SeedEnsemble(models)

    def parameters(self) -> list[torch.Tensor]:
        return self.ensemble.parameters()

    def batch(self, task: TokenTask, batch_size: int, seeds: Sequence[int], step: int,
              device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Each seed's own batch for ``step``, as its lone run sees it, stacked."""
        dtype = self.parameters()[0].dtype
        pairs = [task.train_batch(batch_size, seed, step, device, dtype) for seed in seeds]
        return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])

    def losses(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return query_loss(self.ensemble(tokens), targets)

    def clip_(self, max_norm: float) -> None:
        clip_grad_norm_per_member(self.parameters(), max_norm)

    @contextmanager
    def member(self, index: int) -> Iterator[nn.Module]:
        yield self.ensemble.member(index)

    def state(self) -> dict[str, torch.Tensor]:
        return self.ensemble.state_dict()

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.ensemble.load_state_dict(state)

    def train_mode(self) -> None:
        self.ensemble.template.train()

    @torch.no_grad()
    def finish(self) -> None:
        for i, model in enumerate(self.models):
            model.load_state_dict(self.ensemble.member(i).state_dict())
            model.eval()


def _save(path: Path, trainee: _Trainee, optimizer: torch.optim.Optimizer, states: list[TrainState],
          fingerprint: str) -> None:
    """One checkpoint for all members: parameters and buffers by name ((S, ...) when stacked), the optimiser, the
    step and each seed's history."""
    save_checkpoint(path, fingerprint, {"params": trainee.state(), "optimizer": optimizer.state_dict(),
                                        "step": states[0].step, "histories": [s.history for s in states]})


def _resume(path: Path | None, trainee: _Trainee, optimizer: torch.optim.Optimizer,
            fingerprint: str) -> list[TrainState] | None:
    """Restore ``trainee`` and ``optimizer`` from the checkpoint at ``path`` (``icl_gd.core.checkpoints``: an
    unreadable one or one of other settings is set aside with a notice); None: a fresh start."""
    saved = load_checkpoint(path, fingerprint)
    if saved is None:
        return None
    trainee.load_state(saved["params"])
    optimizer.load_state_dict(saved["optimizer"])
    return [TrainState(step=saved["step"], history=h) for h in saved["histories"]]


def train(
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
    """Train ``models[i]`` (already on ``device``; in place, ending in eval mode) for ``config.steps`` steps on
    fresh batches of ``task`` drawn with ``seeds[i]``; return each seed's state.

    One model trains as a plain module; several train at once as one stacked, vmapped model, each seed equal to
    its lone run. ``evaluate(model, step, seed)`` runs for each seed at step 0, every ``eval_every`` steps and
    at the end, on the model itself (lone) or a standalone copy of its member (stacked), in eval mode; its tidy
    rows go to that seed's ``TrainState.history``. Checkpoints (all seeds in one file) every
    ``checkpoint_every`` steps and at the end; an existing checkpoint with the same ``fingerprint`` and number
    of models is resumed exactly. A non-finite loss raises ``DivergenceError`` naming the step and the seeds.
    """
    models, seeds = list(models), list(seeds)
    if not models or len(models) != len(seeds):
        raise ConfigError(f"got {len(models)} models for {len(seeds)} seeds; need one model per seed")
    trainee: _Trainee = _LoneModel(models[0]) if len(models) == 1 else _StackedModels(models)
    optimizer = make_optimizer("adamw", trainee.parameters(), config)
    fingerprint = config_fingerprint(fingerprint, len(seeds))  # a checkpoint of another number of seeds is stale
    states = _resume(checkpoint_path, trainee, optimizer, fingerprint) or [TrainState() for _ in seeds]
    step = states[0].step

    def run_eval(at: int) -> None:
        if evaluate is None:
            return
        for i, (seed, state) in enumerate(zip(seeds, states)):
            if not any(r.get("step") == at for r in state.history):
                with trainee.member(i) as model:
                    state.history.extend(evaluate(model, at, seed))

    if step == 0:
        run_eval(0)
    trainee.train_mode()
    seed_losses = compiled_if(config.compile, trainee.losses)
    params = trainee.parameters()

    which = "" if description == "train" else f"{description}: "  # the model and seeds, as its progress bar says

    def fetch(at: int) -> tuple[torch.Tensor, torch.Tensor]:
        return trainee.batch(task, config.batch_size, seeds, at, device)

    with (progress_bar(config.steps, description, progress) as update,
          closing(prefetched(fetch, range(step, config.steps))) as batches):
        if progress:  # the bar starts at the loss the run starts (or resumes) from, not blank until an evaluation
            with torch.no_grad():
                update(step, trainee.losses(*fetch(min(step, config.steps - 1))).mean().item())
        try:
            for tokens, targets in batches:
                losses = seed_losses(tokens, targets)
                if step == 0 and not bool(torch.isfinite(losses.detach()).all()):  # one check, before any update
                    bad = [(s, v) for s, v in zip(seeds, losses.detach().reshape(-1).tolist()) if not math.isfinite(v)]
                    raise DivergenceError(f"{which}training diverged at step 0 for seed(s) {[s for s, _ in bad]} "
                                          f"(loss {[v for _, v in bad]}), before any update: the model's initial "
                                          "settings (the model.* keys) are out of range")
                for param in params:  # what zero_grad(set_to_none=True) does, without its per-call hooks and checks
                    param.grad = None
                (losses if losses.dim() == 0 else losses.sum()).backward()
                if config.grad_clip is not None:
                    trainee.clip_(config.grad_clip)
                if config.warmup:
                    for group in optimizer.param_groups:
                        group["lr"] = config.lr * warmup_factor(step, config.steps, config.warmup)
                optimizer.step()
                step += 1
                for state in states:
                    state.step = step
                if step % config.eval_every == 0 or step == config.steps:
                    values = losses.detach().reshape(-1).tolist()
                    bad = [(s, v) for s, v in zip(seeds, values) if not math.isfinite(v)]
                    if bad:
                        raise DivergenceError(f"{which}training diverged at step {step} for seed(s) "
                                              f"{[s for s, _ in bad]} "
                                              f"(loss {[v for _, v in bad]}); {SMALLER_LR}")
                    update(step, sum(values) / len(values))
                    run_eval(step)
                if checkpoint_path is not None and (step % config.checkpoint_every == 0 or step == config.steps):
                    _save(checkpoint_path, trainee, optimizer, states, fingerprint)
        except ConfigError:
            # The settings were checked and the first step ran: a layer that now refuses its own parameters (a
            # step size that became NaN, a regulariser that overflowed to inf) was driven there by training.
            if step == 0:
                raise
            raise DivergenceError(f"{which}training diverged at step {step}: a trained parameter became non-finite "
                                  f"or left its range; {SMALLER_LR}") from None
    trainee.finish()
    return states
