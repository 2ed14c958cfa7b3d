"""Separate x and y tokens (von Oswald et al. 2023, §4, Prop. 3, App. A.5).

Layout: x_1, (0, y_1), x_2, (0, y_2), ..., x_N, (0, y_N), x_q: 2N+1 tokens, each [x | y | p_t] with the input
slot (d_x), the output slot (d_y) and a concatenated sinusoidal positional encoding p_t (2F). Token t of
an input holds (x_i, 0, p_t), of a label (0, y_i, p_t); the query (x_q, 0, p_2N) is last.

Positions are cyclic with period T (default 2N+1, the sequence length): p_t = (cos(ω_f t), sin(ω_f t))_f with
ω_f = 2π f / T, f = 1..F. Then p_{t+1} = R p_t for a fixed rotation R, so one attention layer can look up each
token's right neighbour, and the query's "right neighbour" wraps round to x_1, whose y slot is empty: the copy
layer of Proposition 3 leaves the query's y slot at zero.

Sign convention as in the concatenated layout: a model writes -ŷ into the query's y slot.
Shapes: B tasks, N context pairs, T = 2N+1 tokens, D = d_x + d_y + 2F. The model these tokens feed (a softmax copy
layer, then a GD layer) and the analyses of its copy layer: ``icl_gd.regression.separate.model``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icl_gd.core.config import require_positive_ints
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import LinearRegressionTask, RegressionBatch
from icl_gd.regression.tokens import LayoutTokenTask, query_prediction


# ---------------------------------------------------------------------------------------------------- positions
@dataclass(frozen=True)
class SinusoidalPositions:
    """p_t = (cos(2π f t / T), sin(2π f t / T)) for f = 1..n_frequencies; ``period`` T None means the sequence
    length 2N+1. ``n_frequencies`` None means N (all distinct frequencies of a period-(2N+1) signal)."""

    n_frequencies: int | None = None
    period: int | None = None

    def __post_init__(self) -> None:
        if self.n_frequencies is not None and (not isinstance(self.n_frequencies, int) or self.n_frequencies <= 0):
            raise ConfigError(f"n_frequencies must be a positive integer, got {self.n_frequencies!r}")
        if self.period is not None and (not isinstance(self.period, int) or self.period < 2):
            raise ConfigError(f"period must be an integer >= 2, got {self.period!r}")

    def resolved(self, n_context: int) -> tuple[int, int]:
        """(F, T) for N = ``n_context``."""
        return self.n_frequencies or n_context, self.period or 2 * n_context + 1

    def omegas(self, n_context: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:  # (F,)
        F, T = self.resolved(n_context)
        return 2 * math.pi * torch.arange(1, F + 1, dtype=dtype) / T

    def encode(self, n_tokens: int, n_context: int, dtype: torch.dtype = torch.float32,
               device: torch.device | str = "cpu") -> torch.Tensor:
        """(n_tokens, 2F) encodings of positions 0..n_tokens-1, pairs (cos, sin) per frequency."""
        angles = torch.arange(n_tokens, dtype=torch.float64)[:, None] * self.omegas(n_context)[None]
        return torch.stack([angles.cos(), angles.sin()], dim=-1).flatten(-2).to(device=device, dtype=dtype)

    def shift(self, n_context: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """R (2F, 2F) with p_{t+1} = R p_t: a rotation by ω_f in each (cos, sin) pair."""
        omegas = self.omegas(n_context)
        R = torch.zeros(2 * len(omegas), 2 * len(omegas), dtype=torch.float64)
        for f, w in enumerate(omegas):
            c, s = math.cos(w), math.sin(w)
            R[2 * f: 2 * f + 2, 2 * f: 2 * f + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
        return R.to(dtype)


# ---------------------------------------------------------------------------------------------------- layouts
class _AlternatingLayout:
    """What both separate layouts share: tokens x_1, (y_1), ..., x_N, (y_N), x_q (inputs at even positions, labels
    at odd ones, the query last), each with its position's encoding in ``pos_slot``. A layout says its widths and
    slots, ``n_context`` and ``encode_positions``."""

    n_context: int
    d_x: int
    d_y: int
    d_model: int
    y_slot: slice
    pos_slot: slice
    name = "layout"  # in error messages

    def encode_positions(self, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
        """(2N+1, d_pos) encodings of the token positions."""
        raise NotImplementedError

    @property
    def n_tokens(self) -> int:
        return 2 * self.n_context + 1

    @property
    def x_slot(self) -> slice:
        return slice(0, self.d_x)

    @property
    def x_positions(self) -> list[int]:
        """Token indices of the context inputs x_1..x_N (0, 2, ..., 2N-2)."""
        return list(range(0, 2 * self.n_context, 2))

    def tokens(self, batch: RegressionBatch) -> torch.Tensor:
        """(B, 2N+1, D) tokens of ``batch``: x_1, (0, y_1), ..., x_N, (0, y_N), x_q, each with p_t."""
        x, y = batch.x, batch.y
        B, N = x.shape[0], self.n_context
        if x.shape[1] != N + 1 or x.shape[-1] != self.d_x or y.shape[-1] != self.d_y:
            raise ConfigError(f"batch of shape x{tuple(x.shape)}, y{tuple(y.shape)} does not fit {self.name} "
                              f"d_x={self.d_x}, d_y={self.d_y}, N={N}")
        out = x.new_zeros(B, self.n_tokens, self.d_model)
        out[:, 0::2, self.x_slot] = x  # inputs at 0, 2, ..., 2N (the query's x at 2N)
        out[:, 1::2, self.y_slot] = y[:, :-1]
        out[:, :, self.pos_slot] = self.encode_positions(x.dtype, x.device)
        return out

    def split(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_context (B, N, d_x), y_context (B, N, d_y), x_query (B, d_x)) read back from input tokens."""
        return tokens[:, 0:-1:2, self.x_slot], tokens[:, 1::2, self.y_slot], tokens[:, -1, self.x_slot]


@dataclass(frozen=True)
class SeparateLayout(_AlternatingLayout):
    """Tokens (B, 2N+1, d_x + d_y + 2F): x tokens at even positions, y tokens at odd ones, the query last."""

    d_x: int
    d_y: int
    n_context: int
    positions: SinusoidalPositions = SinusoidalPositions()

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_x", "d_y", "n_context")

    @property
    def d_pos(self) -> int:
        return 2 * self.positions.resolved(self.n_context)[0]

    @property
    def d_model(self) -> int:
        return self.d_x + self.d_y + self.d_pos

    @property
    def y_slot(self) -> slice:
        return slice(self.d_x, self.d_x + self.d_y)

    @property
    def data_slot(self) -> slice:
        """The coordinates a task fills (x and y); the rest are positions, constants of the layout."""
        return slice(0, self.d_x + self.d_y)

    @property
    def pos_slot(self) -> slice:
        return slice(self.d_x + self.d_y, self.d_model)

    def encode_positions(self, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
        return self.positions.encode(self.n_tokens, self.n_context, dtype, device)

    def prediction(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (B, d_y) = minus the query's y slot."""
        return query_prediction(tokens, self.y_slot)


@dataclass(frozen=True)
class StandardPositions:
    """The Transformer's sinusoidal encoding of absolute positions t = 0, 1, ... (the authors'
    ``create_pos_encoding``): p_t[2i] = sin(t ω_i), p_t[2i+1] = cos(t ω_i), ω_i = 10000^(-2i/size), for the
    ``size`` coordinates (an odd size ends with a sine)."""

    size: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size <= 0:
            raise ConfigError(f"positional encoding size must be a positive integer, got {self.size!r}")

    def omegas(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:  # (ceil(size/2),)
        return torch.exp(torch.arange(0, self.size, 2, dtype=torch.float64) * (-math.log(10000.0) / self.size)
                         ).to(dtype)

    def encode(self, n_tokens: int, dtype: torch.dtype = torch.float32,
               device: torch.device | str = "cpu") -> torch.Tensor:
        """(n_tokens, size) encodings of positions 0..n_tokens-1, pairs (sin, cos) per frequency."""
        angles = torch.arange(n_tokens, dtype=torch.float64)[:, None] * self.omegas()[None]
        pairs = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
        return pairs[:, : self.size].to(device=device, dtype=dtype)

    def shift(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """R (size, size) with p_{t+1} = R p_t: a rotation by ω_i in each (sin, cos) pair (even sizes only)."""
        if self.size % 2:
            raise ConfigError(f"positions of odd size {self.size} have no shift matrix: a sine lacks its cosine")
        R = torch.zeros(self.size, self.size, dtype=torch.float64)
        for i, w in enumerate(self.omegas().tolist()):
            c, s = math.cos(w), math.sin(w)
            R[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        return R.to(dtype)


@dataclass(frozen=True)
class AuthorsSeparateLayout(_AlternatingLayout):
    """The authors' separate-token layout: tokens (B, 2N+1, d_x + P). An input token is (x_i, p_t), a label token
    ((0, ..., 0, y_i), p_t) (y in the last data coordinate, the one x_i's last entry uses), the query (x_q, p_2N);
    p_t the standard sinusoidal encoding (``StandardPositions``) concatenated. ŷ is minus the query's **last
    coordinate**, a positional one: a model must cancel its offset p_2N[-1] = cos(2N ω_last) itself.

    ``own_label_slot`` gives the label a data coordinate of its own (width d_x + 1 + P, y tokens (0, y_i, p_t)):
    the one change an exact Proposition 3 construction needs (``icl_gd.constructions.prop3``)."""

    d_x: int
    n_context: int
    positions: StandardPositions = StandardPositions()
    own_label_slot: bool = False
    name = "the authors' layout"

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_x", "n_context")

    @property
    def d_data(self) -> int:
        return self.d_x + int(self.own_label_slot)

    @property
    def d_y(self) -> int:
        return 1

    @property
    def d_pos(self) -> int:
        return self.positions.size

    @property
    def d_model(self) -> int:
        return self.d_data + self.d_pos

    @property
    def y_slot(self) -> slice:
        """Where a label token holds y_i: the last data coordinate."""
        return slice(self.d_data - 1, self.d_data)

    @property
    def data_slot(self) -> slice:
        """The coordinates a task fills (x or y); the rest are positions."""
        return slice(0, self.d_data)

    @property
    def pos_slot(self) -> slice:
        return slice(self.d_data, self.d_model)

    @property
    def readout_slot(self) -> slice:
        return slice(self.d_model - 1, self.d_model)

    def encode_positions(self, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
        return self.positions.encode(self.n_tokens, dtype, device)

    def prediction(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (B, 1) = minus the query's last coordinate."""
        return query_prediction(tokens, self.readout_slot)


@dataclass(frozen=True)
class AuthorsSeparateTokenTask(LayoutTokenTask):
    """A regression task (d_y = 1) in the authors' separate-token layout."""

    task: LinearRegressionTask
    positions: StandardPositions = StandardPositions()

    @property
    def layout(self) -> AuthorsSeparateLayout:
        if self.task.d_y != 1:
            raise ConfigError(f"the authors' separate layout holds one label per token, the task has "
                              f"d_y = {self.task.d_y}")
        return AuthorsSeparateLayout(self.task.d, self.task.n_context, self.positions)


@dataclass(frozen=True)
class SeparateTokenTask(LayoutTokenTask):
    """A regression task seen through the separate layout: the ``TokenTask`` that training consumes."""

    task: LinearRegressionTask
    positions: SinusoidalPositions = SinusoidalPositions()

    @property
    def layout(self) -> SeparateLayout:
        return SeparateLayout(self.task.d, self.task.d_y, self.task.n_context, self.positions)


@dataclass(frozen=True)
class InterleavedLayout(_AlternatingLayout):
    """Garg, Tsipras, Liang & Valiant (2022, §2 and their ``models.py`` ``_combine``): tokens (B, 2N+1, D),
    D = max(d_x, d_y), with no positions in the tokens (their GPT-2 adds learned ones): an input token is x_i, a
    label token (y_i, 0, ..., 0), the query x_q last. The model reads ŷ at the query with a read-out head of its
    own, so this layout has no ``prediction``."""

    d_x: int
    d_y: int
    n_context: int
    name = "the interleaved layout"

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_x", "d_y", "n_context")

    @property
    def d_model(self) -> int:
        return max(self.d_x, self.d_y)

    @property
    def y_slot(self) -> slice:
        return slice(0, self.d_y)

    @property
    def pos_slot(self) -> slice:
        return slice(self.d_model, self.d_model)  # empty: no positions in the tokens

    def encode_positions(self, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
        return torch.zeros(self.n_tokens, 0, dtype=dtype, device=device)


@dataclass(frozen=True)
class InterleavedTokenTask(LayoutTokenTask):
    """A regression task seen through Garg et al.'s interleaved layout: the ``TokenTask`` that training consumes."""

    task: LinearRegressionTask

    @property
    def layout(self) -> InterleavedLayout:
        return InterleavedLayout(self.task.d, self.task.d_y, self.task.n_context)
