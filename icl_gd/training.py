"""Training on fresh tasks every step, with exact resume from checkpoints.

A ``TokenTask`` hands out the batch for any step as a pure function of (seed, step), so a resumed run sees the
same data as an uninterrupted one, and, with the model and optimiser state restored, ends with the same numbers.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from torch import nn

from .config import require_non_negative, require_positive, require_positive_ints
from .errors import ConfigError, DivergenceError
from .results import atomic_write_bytes, to_jsonable


class TokenTask(Protocol):
    """Anything that yields (tokens (B, T, D), targets (B, d_y)) for a (seed, step)."""

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; defaults are the authors' (PROTOCOL §1) for one or two layers."""

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

    def __post_init__(self) -> None:
        require_positive_ints(self, "steps", "batch_size", "eval_every", "checkpoint_every")
        if not isinstance(self.compile, bool):
            raise ConfigError(f"compile must be true or false, got {self.compile!r}")
        require_positive("lr", self.lr)
        require_non_negative("weight_decay", self.weight_decay)
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
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


def query_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """0.5 · mean over tasks of ‖ŷ - y‖² (PROTOCOL's loss)."""
    return 0.5 * ((prediction - target) ** 2).sum(-1).mean()


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


def config_fingerprint(*configs: Any) -> str:
    """A hash of the configs a checkpoint belongs to; a checkpoint from other settings is never resumed."""
    text = json.dumps(to_jsonable(list(configs)), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, state: TrainState,
                    fingerprint: str) -> None:
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": state.step,
                "history": state.history, "fingerprint": fingerprint}, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                    fingerprint: str) -> TrainState | None:
    """Restore model and optimiser from ``path`` if it exists and belongs to the same settings."""
    if path is None or not Path(path).exists():
        return None
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if payload.get("fingerprint") != fingerprint:
        return None
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    return TrainState(step=payload["step"], history=payload["history"])


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2),
                             weight_decay=config.weight_decay)


@contextmanager
def progress_bar(total: int, description: str, enabled: bool) -> Iterator[Callable[[int, float], None]]:
    """A rich progress bar showing step and loss; a no-op when disabled."""
    if not enabled:
        yield lambda step, loss: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:.4f}"), TimeRemainingColumn())
    with Progress(*columns, transient=False) as bar:
        task_id = bar.add_task(description, total=total, loss=float("nan"))
        yield lambda step, loss: bar.update(task_id, completed=step, loss=loss)


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


def train(
    model: nn.Module,
    task: TokenTask,
    config: TrainConfig,
    seed: int,
    *,
    device: torch.device = torch.device("cpu"),
    evaluate: Callable[[nn.Module, int], list[dict[str, Any]]] | None = None,
    checkpoint_path: Path | None = None,
    fingerprint: str = "",
    progress: bool = False,
    description: str = "train",
) -> TrainState:
    """Train ``model`` (already on ``device``) for ``config.steps`` steps on fresh batches of ``task``.

    ``evaluate(model, step)`` runs at step 0, every ``eval_every`` steps and at the end; it returns tidy rows
    (dicts) that are collected in ``TrainState.history``. Checkpoints every ``checkpoint_every`` steps and at the
    end; an existing checkpoint with the same ``fingerprint`` is resumed. A non-finite loss raises
    ``DivergenceError``.
    """
    optimizer = make_optimizer(model, config)
    dtype = next(model.parameters()).dtype
    state = load_checkpoint(checkpoint_path, model, optimizer, fingerprint) or TrainState()
    params = [p for p in model.parameters() if p.requires_grad]

    def run_eval(step: int) -> None:
        if evaluate is not None and not any(r.get("step") == step for r in state.history):
            model.eval()
            state.history.extend(evaluate(model, step))
            model.train()

    if state.step == 0:
        run_eval(0)
    model.train()
    batch_loss = compiled_if(config.compile, lambda tokens, target: query_loss(model(tokens), target))
    with progress_bar(config.steps, description, progress) as update:
        update(state.step, float("nan"))
        def fetch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
            return task.train_batch(config.batch_size, seed, step, device, dtype)

        with closing(prefetched(fetch, range(state.step, config.steps))) as batches:
            for tokens, target in batches:
                loss = batch_loss(tokens, target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip is not None:
                    nn.utils.clip_grad_norm_(params, config.grad_clip, foreach=True)
                optimizer.step()
                state.step += 1
                if state.step % config.eval_every == 0 or state.step == config.steps:
                    value = loss.item()
                    if not math.isfinite(value):
                        raise DivergenceError(
                            f"training diverged at step {state.step} (loss={value}); lower lr or set grad_clip")
                    update(state.step, value)
                    run_eval(state.step)
                if checkpoint_path is not None and (
                    state.step % config.checkpoint_every == 0 or state.step == config.steps
                ):
                    save_checkpoint(checkpoint_path, model, optimizer, state, fingerprint)
    model.eval()
    return state
