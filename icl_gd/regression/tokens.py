"""Token layouts. Concatenated layout (von Oswald et al. 2023, §3): context tokens e_i = (x_i, y_i), the query
(x_q, 0) last.

Sign convention, stated once: a model writes -ŷ into the query's y slot, so the prediction is minus the last
d_y coordinates of the last token (``query_prediction``, the one place that reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from icl_gd.regression.tasks import LinearRegressionTask, RegressionBatch, Stream


@dataclass(frozen=True)
class ConcatLayout:
    """Tokens (B, N+1, d_x + d_y): rows (x_i, y_i), the query row (x_q, 0) last."""

    d_x: int
    d_y: int = 1

    @property
    def d_model(self) -> int:
        return self.d_x + self.d_y

    @property
    def y_slot(self) -> slice:
        return slice(self.d_x, self.d_model)

    def tokens(self, batch: RegressionBatch) -> torch.Tensor:
        """(B, N+1, d_x+d_y) tokens of ``batch``; the query's y slot is zero."""
        y_with_blank_query = nn.functional.pad(batch.y[:, :-1], (0, 0, 0, 1))  # one pass, no clone then zero
        return torch.cat([batch.x, y_with_blank_query], dim=-1)

    def split(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x_context (B, N, d_x), y_context (B, N, d_y), x_query (B, d_x)) read back from tokens."""
        return tokens[:, :-1, : self.d_x], tokens[:, :-1, self.d_x :], tokens[:, -1, : self.d_x]

    def prediction(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (B, d_y) read from tokens (B, T, D) after a model's layers (``query_prediction``)."""
        return query_prediction(tokens, self.y_slot)


def query_prediction(tokens: torch.Tensor, y_slot: slice) -> torch.Tensor:
    """ŷ (B, d_y) = minus the y slot of the last token (the sign convention above); every layout reads ŷ here."""
    return -tokens[:, -1, y_slot]


class LayoutTokenTask:
    """``batch_tokens`` and ``train_batch`` for any dataclass holding a ``task`` (with ``sample``) and a
    ``layout`` (with ``tokens``): sample the addressed batch, lay it out as tokens. Every ``TokenTask`` is one."""

    def batch_tokens(self, batch_size: int, seed: int, step: int = 0, stream: Stream = Stream.TRAIN,
                     device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                     ) -> tuple[Any, torch.Tensor]:
        batch = self.task.sample(batch_size, seed, step, stream, device, dtype)  # type: ignore[attr-defined]
        return batch, self.layout.tokens(batch)  # type: ignore[attr-defined]

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        batch, tokens = self.batch_tokens(batch_size, seed, step, Stream.TRAIN, device, dtype)
        return tokens, batch.y_query


@dataclass(frozen=True)
class ConcatTokenTask(LayoutTokenTask):
    """A regression task seen through the concatenated layout: the ``TokenTask`` that training consumes."""

    task: LinearRegressionTask

    @property
    def layout(self) -> ConcatLayout:
        return ConcatLayout(self.task.d, self.task.d_y)

