"""A small GPT-style in-context learner (Garg, Tsipras, Liang & Valiant 2022, §2 and their ``models.py``
``TransformerModel``): a causal softmax transformer over interleaved x and y tokens
(``icl_gd.regression.separate.tokens.InterleavedLayout``), the model of the field that is *not* built from
von Oswald et al.'s linear attention, so the comparison with GD (``icl_gd.regression.compare.comparison``) asks their
question of a model that owes nothing to it.

    h_0 = read_in(tokens) + p                      tokens (B, T, d_in), learned positions p (T, width)
    h_l = h_{l-1} + Attn(LN(h_{l-1}));  h_l += MLP(LN(h_l))     causal, ``heads`` heads, MLP width -> 4 width
    ŷ   = read_out(LN_f(h_L[:, -1]))                (B, d_y): the query's (last) token

GPT-2's pre-LayerNorm block, tanh-GELU and N(0, 0.02) initialisation, as Garg et al.'s Hugging Face GPT-2
(without dropout). They read a prediction at every input token and train on all of them; this model is read, and
trained, at the query only (``icl_gd.regression.training``'s one loss). Shapes: B tasks, T = 2N+1 tokens.

Per-layer read-outs (``layer_predictions``): the query's state after each block through a linear probe fitted by
least squares on held-out tasks (``fit_probes``), as probing studies read intermediate layers (Akyürek et al.
2023, §4); the last layer is the model's own read-out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from icl_gd.core.config import require_positive_ints
from icl_gd.core.errors import ConfigError
from icl_gd.regression.separate.tokens import InterleavedLayout
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import LayoutTokenTask


@dataclass(frozen=True)
class GPTConfig:
    """Token width ``d_in``, outputs ``d_y``, ``n_tokens`` positions; ``width`` channels, ``layers`` blocks of
    ``heads`` heads."""

    d_in: int
    d_y: int
    n_tokens: int
    width: int = 64
    layers: int = 4
    heads: int = 4

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_in", "d_y", "n_tokens", "width", "layers", "heads")
        if self.width % self.heads:
            raise ConfigError(f"width {self.width} is not a multiple of heads {self.heads}")


class CausalSelfAttention(nn.Module):
    """Multi-head softmax attention of each token on itself and the tokens before it: (B, T, W) -> (B, T, W)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, W = h.shape
        q, k, v = (t.view(B, T, self.heads, W // self.heads).transpose(1, 2) for t in self.qkv(h).split(W, dim=-1))
        attended = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, heads, T, W/heads)
        return self.out(attended.transpose(1, 2).reshape(B, T, W))


class GPTBlock(nn.Module):
    """h + Attn(LN(h)), then + MLP(LN(·)), MLP W -> 4W -> W with tanh-GELU."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm_attention, self.norm_mlp = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width, heads)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attention(self.norm_attention(h))
        return h + self.mlp(self.norm_mlp(h))


class GPTRegressor(nn.Module):
    """tokens (B, T, d_in) -> ŷ (B, d_y) read at the last token; ``seed`` fixes the initialisation."""

    def __init__(self, config: GPTConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = config
        self.read_in = nn.Linear(config.d_in, config.width)
        self.positions = nn.Parameter(torch.zeros(config.n_tokens, config.width))
        self.blocks = nn.ModuleList(GPTBlock(config.width, config.heads) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.width)
        self.read_out = nn.Linear(config.width, config.d_y)
        self.register_buffer("probes", torch.zeros(0), persistent=False)  # (L-1, width+1, d_y) once fitted
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():  # GPT-2's initialisation: weights N(0, 0.02²), biases 0, LayerNorm (1, 0)
            for name, param in self.named_parameters():
                if name.endswith("bias") or ".norm" in name or name.startswith("norm"):
                    continue
                param.copy_(torch.randn(param.shape, generator=gen) * 0.02)

    def hidden_states(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The states (B, T, width) after each of the L blocks. T may be shorter than the model's ``n_tokens``: the
        model is causal, so a prefix's states are the full sequence's first T (a curriculum trains on prefixes)."""
        if tokens.dim() != 3 or not 1 <= tokens.shape[1] <= self.config.n_tokens or tokens.shape[2] != self.config.d_in:
            raise ConfigError(f"the model takes tokens (B, T ≤ {self.config.n_tokens}, {self.config.d_in}), got "
                              f"{tuple(tokens.shape)}")
        h = self.read_in(tokens) + self.positions[:tokens.shape[1]]
        states = []
        for block in self.blocks:
            h = block(h)
            states.append(h)
        return states

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.read_out(self.norm(self.hidden_states(tokens)[-1][:, -1]))

    @torch.no_grad()
    def fit_probes(self, tokens: torch.Tensor, targets: torch.Tensor, ridge: float = 1e-6) -> None:
        """Fit one linear read-out (weights and bias) per block but the last on the query's state, by ridge
        regression in float64 (penalty ``ridge`` on the weights' scale) on tokens (B, T, d_in) with targets
        (B, d_y)."""
        states = self.hidden_states(tokens)[:-1]
        probes = []
        for h in states:
            features = torch.cat([h[:, -1].double(), h.new_ones(len(h), 1, dtype=torch.float64)], dim=1)
            gram = features.T @ features
            gram += ridge * gram.diagonal().mean() * torch.eye(len(gram), dtype=torch.float64, device=gram.device)
            probes.append(torch.linalg.solve(gram, features.T @ targets.double()))
        self.probes = (torch.stack(probes) if probes else torch.zeros(0, self.config.width + 1, self.config.d_y,
                                                                       dtype=torch.float64)).to(tokens.device)

    def layer_predictions(self, tokens: torch.Tensor) -> torch.Tensor:
        """ŷ (L, B, d_y) after each block: the fitted probes (``fit_probes``), then the model's own read-out."""
        if self.config.layers > 1 and len(self.probes) != self.config.layers - 1:
            raise ConfigError("fit_probes first: the per-layer read-outs are linear probes fitted on held-out tasks")
        states = self.hidden_states(tokens)
        out = []
        for h, probe in zip(states[:-1], self.probes):
            query = h[:, -1]
            out.append(query @ probe[:-1].to(query.dtype) + probe[-1].to(query.dtype))
        out.append(self.read_out(self.norm(states[-1][:, -1])))
        return torch.stack(out)


class EveryPrefix(nn.Module):
    """The training view of a ``GPTRegressor``: the prediction at every input token (positions 0, 2, ..., 2N; the
    one at x_i has seen the pairs before it), (B, T, d_in) -> (B, (N+1)·d_y) scaled by 1/√(N+1), so the trainer's
    query loss on ``EveryPrefixTokenTask``'s targets is Garg et al.'s objective: the squared error averaged over
    every prefix length 0..N (with the trainer's factor 1/2)."""

    def __init__(self, model: GPTRegressor) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        inputs = self.model.hidden_states(tokens)[-1][:, 0::2]  # (B, N+1, width)
        return self.model.read_out(self.model.norm(inputs)).flatten(1) / inputs.shape[1] ** 0.5


@dataclass(frozen=True)
class EveryPrefixTokenTask(LayoutTokenTask):
    """A regression task in Garg et al.'s interleaved layout whose training targets are every token's label,
    (B, (N+1)·d_y) scaled by 1/√(N+1) (``EveryPrefix``); test batches are the layout's as usual."""

    task: LinearRegressionTask

    @property
    def layout(self) -> InterleavedLayout:
        return InterleavedLayout(self.task.d, self.task.d_y, self.task.n_context)

    def train_batch(self, batch_size: int, seed: int, step: int, device: torch.device,
                    dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.task.sample(batch_size, seed, step, Stream.TRAIN, device, dtype)
        return self.layout.tokens(batch), batch.y.flatten(1) / batch.y.shape[1] ** 0.5
