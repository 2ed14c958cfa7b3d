"""Sine regression tasks (von Oswald et al. 2023, §3, App. A.7): y = a sin(x + φ), x ~ U(-r/2, r/2).

A task is a frozen dataclass; a batch is a pure function of ``(task, seed, step, stream)``. The authors' code
draws a and φ from one random number (so they are perfectly correlated); here they are independent by default
and ``correlated=True`` restores the authors' law: a = a_lo + u (a_hi - a_lo), φ = φ_lo + u (φ_hi - φ_lo), one u.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from icl_gd.core.config import require_positive_ints, require_scale, setting
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import AddressedTask
from icl_gd.regression.tokens import ConcatLayout, LayoutTokenTask


@dataclass(frozen=True)
class SineBatch:
    """B sine tasks: x (B, N+1, 1), y (B, N+1, 1) (query last), amplitude (B,), phase (B,)."""

    x: torch.Tensor
    y: torch.Tensor
    amplitude: torch.Tensor
    phase: torch.Tensor

    @property
    def x_context(self) -> torch.Tensor:  # (B, N, 1)
        return self.x[:, :-1]

    @property
    def y_context(self) -> torch.Tensor:  # (B, N, 1)
        return self.y[:, :-1]

    @property
    def x_query(self) -> torch.Tensor:  # (B, 1)
        return self.x[:, -1]

    @property
    def y_query(self) -> torch.Tensor:  # (B, 1)
        return self.y[:, -1]

    def function(self, x: torch.Tensor) -> torch.Tensor:
        """Each task's true function on inputs x (B, M) -> (B, M)."""
        return self.amplitude[:, None] * torch.sin(x + self.phase[:, None])


@dataclass(frozen=True)
class SineTask(AddressedTask):
    """y = a sin(x + φ) with a ~ U(amplitude), φ ~ U(phase), x ~ U(-input_range/2, input_range/2); N pairs + query.

    Defaults are the authors': a ∈ [0.1, 0.5], φ ∈ [0, π], x ∈ [-5, 5], N = 10.
    """

    n_context: int = 10
    input_range: float = 10.0
    amplitude: tuple[float, float] = (0.1, 0.5)
    phase: tuple[float, float] = (0.0, torch.pi)
    correlated: bool = False

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_context")
        require_scale("input_range", self.input_range)
        for name in ("amplitude", "phase"):
            lo, hi = getattr(self, name)
            if not lo <= hi:
                raise ConfigError(f"{name} range must be (low, high) with low <= high, got {(lo, hi)!r}")

    @property
    def d(self) -> int:
        return 1

    @property
    def d_y(self) -> int:
        return 1

    def draw(self, batch_size: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> SineBatch:
        B, N = batch_size, self.n_context
        u_amp = torch.rand(B, generator=gen, device=device, dtype=dtype)
        u_phase = u_amp if self.correlated else torch.rand(B, generator=gen, device=device, dtype=dtype)
        (a_lo, a_hi), (p_lo, p_hi) = self.amplitude, self.phase
        amplitude = a_lo + u_amp * (a_hi - a_lo)
        phase = p_lo + u_phase * (p_hi - p_lo)
        x = (torch.rand(B, N + 1, 1, generator=gen, device=device, dtype=dtype) - 0.5) * self.input_range
        y = amplitude[:, None, None] * torch.sin(x + phase[:, None, None])
        return SineBatch(x, y, amplitude, phase)


@dataclass(frozen=True)
class SineTaskConfig:
    """The sine tasks as config keys (``--set n_context=20``); ``build`` gives the ``SineTask``."""

    n_context: int = setting(10, "context pairs per task, N")
    input_range: float = setting(10.0, "inputs x ~ U(-r/2, r/2) with r = input_range (the authors': [-5, 5])")
    correlated: bool = setting(False, "the authors' law: amplitude and phase from one uniform number per task")
    amplitude: tuple[float, float] = setting((0.1, 0.5), "amplitude a ~ U(low, high) (the authors' code: 0.1,0.5; "
                                                         "App. A.7's text: 0.1,5 with correlated=false)")

    def __post_init__(self) -> None:
        self.build()

    def build(self) -> SineTask:
        return SineTask(n_context=self.n_context, input_range=self.input_range, correlated=self.correlated,
                        amplitude=self.amplitude)


@dataclass(frozen=True)
class SineTokenTask(LayoutTokenTask):
    """Sine tasks in the concatenated layout: tokens (x_i, y_i), query (x_q, 0); the ``TokenTask`` for training."""

    task: SineTask

    @property
    def layout(self) -> ConcatLayout:
        return ConcatLayout(1, 1)

