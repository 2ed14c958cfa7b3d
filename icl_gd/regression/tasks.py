"""In-context linear regression tasks (von Oswald et al. 2023, §3).

A task is a frozen dataclass; a batch is a pure function of ``(task, seed, step, stream)``, so any batch can be
regenerated exactly, training resumes exactly and test sets never drift.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import numpy as np
import torch

from icl_gd.core.config import require_positive, require_positive_ints, require_scale
from icl_gd.core.errors import ConfigError


class Stream(enum.IntEnum):
    """Independent random streams: training batches, held-out tuning sets and test sets never coincide."""

    TRAIN = 0
    TEST = 1
    TUNE = 2
    POOL = 3  # a fixed training set, drawn once per seed (``LinearRegressionTask.train_tasks``)
    ROLLOUT = 4  # further test draws, step k the k-th (the single layer's roll-out, ``rollout_draws``)


def make_generator(seed: int, step: int, stream: Stream, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator whose state is a hash of (seed, step, stream): batches are addressable, not sequential."""
    if seed < 0 or step < 0:
        raise ConfigError(f"seed and step must be non-negative, got seed={seed}, step={step}")
    state = np.random.SeedSequence([int(seed), int(step), int(stream)]).generate_state(1, np.uint64)[0]
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(state) & 0x7FFF_FFFF_FFFF_FFFF)
    return gen


# ---------------------------------------------------------------------------------------------------- input laws
@dataclass(frozen=True)
class UniformInputs:
    """x ~ U(-width/2, width/2)^d. The authors' code (and every published figure) uses width 1."""

    width: float = 1.0

    def __post_init__(self) -> None:
        require_scale("input_range (uniform width)", self.width)

    def sample(self, shape: tuple[int, ...], gen: torch.Generator, device, dtype) -> torch.Tensor:
        # In place, and no multiply by width 1 (exact): the same values as (u - 0.5) * width in one pass, not three.
        x = torch.rand(shape, generator=gen, device=device, dtype=dtype).sub_(0.5)
        return x if self.width == 1.0 else x.mul_(self.width)


@dataclass(frozen=True)
class NormalInputs:
    """x ~ N(0, std² I), or N(0, Σ) when ``covariance`` (a d×d matrix as nested tuples) is given."""

    std: float = 1.0
    covariance: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        require_positive("input std", self.std)
        if self.covariance is not None:
            cov = np.asarray(self.covariance, dtype=float)
            if cov.ndim != 2 or cov.shape[0] != cov.shape[1] or not np.allclose(cov, cov.T):
                raise ConfigError("input covariance must be a symmetric square matrix")
            if np.linalg.eigvalsh(cov).min() <= 0:
                raise ConfigError("input covariance must be positive definite")

    def sample(self, shape: tuple[int, ...], gen: torch.Generator, device, dtype) -> torch.Tensor:
        z = torch.randn(shape, generator=gen, device=device, dtype=dtype)
        if self.covariance is None:
            return z if self.std == 1.0 else z.mul_(self.std)
        chol = torch.linalg.cholesky(torch.tensor(self.covariance, device=device, dtype=torch.float64))
        if chol.shape[0] != shape[-1]:
            raise ConfigError(f"input covariance is {chol.shape[0]}x{chol.shape[0]} but d={shape[-1]}")
        return z @ (self.std * chol).to(dtype).T


@dataclass(frozen=True)
class NormalisedInputs:
    """Inputs from an exponential, normal or Laplace law, divided by the Frobenius norm of the task's context
    inputs and scaled by ``scale`` (von Oswald et al. 2023, App. A.2, Fig. 6's right columns). The query shares its
    task's normaliser."""

    law: Literal["exponential", "normal", "laplace"] = "normal"
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.law not in ("exponential", "normal", "laplace"):
            raise ConfigError(f"input law {self.law!r} is not one of exponential, normal, laplace")
        require_positive("input scale", self.scale)

    def sample(self, shape: tuple[int, ...], gen: torch.Generator, device, dtype) -> torch.Tensor:
        u = torch.rand(shape, generator=gen, device=device, dtype=dtype).clamp_min(torch.finfo(dtype).tiny)
        if self.law == "exponential":
            x = -torch.log(u)
        elif self.law == "laplace":
            sign = torch.where(torch.rand(shape, generator=gen, device=device, dtype=dtype) < 0.5, -1.0, 1.0)
            x = -torch.log(u) * sign
        else:
            x = torch.randn(shape, generator=gen, device=device, dtype=dtype)
        norm = x[..., :-1, :].flatten(-2).norm(dim=-1)[..., None, None]
        return self.scale * x / norm


InputLaw = Union[UniformInputs, NormalInputs, NormalisedInputs]


# ---------------------------------------------------------------------------------------------------- batches
@dataclass(frozen=True)
class RegressionBatch:
    """B tasks of N context pairs plus one query, the query last.

    x: (B, N+1, d) inputs; y: (B, N+1, d_y) targets (distractors and noise applied to the context);
    w: (B, d_y, d) each task's true weights.
    """

    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor

    @property
    def x_context(self) -> torch.Tensor:  # (B, N, d)
        return self.x[:, :-1]

    @property
    def y_context(self) -> torch.Tensor:  # (B, N, d_y)
        return self.y[:, :-1]

    @property
    def x_query(self) -> torch.Tensor:  # (B, d)
        return self.x[:, -1]

    @property
    def y_query(self) -> torch.Tensor:  # (B, d_y)
        return self.y[:, -1]

    def to(self, device=None, dtype=None) -> "RegressionBatch":
        return RegressionBatch(self.x.to(device, dtype), self.y.to(device, dtype), self.w.to(device, dtype))


class AddressedTask:
    """A task family whose batches are addressed, not sequential: ``sample`` draws the batch of (seed, step, stream)
    from that address's own generator (``draw``, the task's law)."""

    def sample(self, batch_size: int, seed: int, step: int = 0, stream: Stream = Stream.TRAIN,
               device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> Any:
        """The batch of ``batch_size`` tasks addressed by (seed, step, stream)."""
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        device = torch.device(device)
        return self.draw(batch_size, make_generator(seed, step, stream, device), device, dtype)

    def draw(self, batch_size: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class LinearRegressionTask(AddressedTask):
    """y = W x (+ noise): W ~ N(0, I) · weight_scale, x from ``inputs``; N context pairs and one query.

    ``n_distractors`` of the N context labels are replaced by N(0, 1) noise (positions drawn per task).
    ``train_tasks`` = M > 0 fixes the training set (von Oswald et al. App. A.12, Fig. 16): the training stream's
    batches then come from M tasks drawn once from the seed (stream POOL): the whole set, in a fixed order, when the
    batch size is M (their full-batch training), else a fresh random subset of it at every step. Test and tuning
    tasks stay fresh.
    """

    d: int = 10
    n_context: int = 10
    d_y: int = 1
    inputs: InputLaw = field(default_factory=UniformInputs)
    weight_scale: float = 1.0
    label_noise: float = 0.0
    n_distractors: int = 0
    train_tasks: int = 0

    def __post_init__(self) -> None:
        require_positive_ints(self, "d", "n_context", "d_y")
        require_scale("weight_scale", self.weight_scale)
        require_scale("label_noise", self.label_noise, positive=False)
        if not 0 <= self.n_distractors <= self.n_context:
            raise ConfigError(f"n_distractors must be in 0..n_context={self.n_context}, got {self.n_distractors}")
        if not isinstance(self.train_tasks, int) or isinstance(self.train_tasks, bool) or self.train_tasks < 0:
            raise ConfigError(f"train_tasks must be a non-negative integer (0: fresh tasks), got {self.train_tasks!r}")

    def sample(self, batch_size: int, seed: int, step: int = 0, stream: Stream = Stream.TRAIN,
               device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> RegressionBatch:
        """The batch of (seed, step, stream); with ``train_tasks`` = M, a training batch comes from the seed's M
        fixed tasks (the class docstring)."""
        if stream is not Stream.TRAIN or self.train_tasks == 0:
            return super().sample(batch_size, seed, step, stream, device, dtype)
        if batch_size > self.train_tasks:
            raise ConfigError(f"batch_size {batch_size} exceeds the fixed training set of train_tasks="
                              f"{self.train_tasks} tasks")
        pool = super().sample(self.train_tasks, seed, 0, Stream.POOL, device, dtype)
        if batch_size == self.train_tasks:
            return pool
        pick = torch.randperm(self.train_tasks, generator=make_generator(seed, step, stream, device),
                              device=device)[:batch_size]
        return RegressionBatch(pool.x[pick], pool.y[pick], pool.w[pick])

    def draw(self, batch_size: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> RegressionBatch:
        B, N, d, dy = batch_size, self.n_context, self.d, self.d_y
        w = torch.randn(B, dy, d, generator=gen, device=device, dtype=dtype)
        if self.weight_scale != 1.0:  # scaling by 1 is exact: skip the pass
            w.mul_(self.weight_scale)
        x = self.inputs.sample((B, N + 1, d), gen, device, dtype)
        y = x @ w.transpose(1, 2)
        if self.label_noise > 0:
            y = y + self.label_noise * torch.randn(B, N + 1, dy, generator=gen, device=device, dtype=dtype)
        if self.n_distractors > 0:
            ranks = torch.rand(B, N, generator=gen, device=device).argsort(dim=1).argsort(dim=1)
            noise = torch.randn(B, N, dy, generator=gen, device=device, dtype=dtype)
            ctx = torch.where((ranks < self.n_distractors)[..., None], noise, y[:, :-1])
            y = torch.cat([ctx, y[:, -1:]], dim=1)
        return RegressionBatch(x, y, w)
