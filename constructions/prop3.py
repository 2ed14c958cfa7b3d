"""Proposition 3 (von Oswald et al. 2023): on separate x and y tokens, a softmax layer that copies each y_i into
its x token's y slot, then the Prop. 1 layer, is one GD step.

Copy layer (one head, key size max(2F, d_y)), on tokens [x | y | p_t] (``icl_gd.regression.separate.tokens``):
    W_Q e_t = β R p_t = β p_{t+1},   W_K e_s = p_s,   W_V e_s = y-slot of e_s,   P writes into the y slot.
Token t attends to s with weight softmax_s(β p_{t+1}·p_s): as β -> ∞ all of it lands on s = t+1 (cyclically),
so x_i's y slot receives y_i, the query's receives x_1's empty slot (0), and y tokens receive the empty slot of
the next x token. For finite β every token puts a mass ε ≤ (2N-1) e^{-β Δ} elsewhere, Δ the score gap of the
encoding, so the copy error is at most 2 ε max|y| per slot: exact in the limit β -> ∞, and within round-off once
β Δ is a few dozen.

GD layer: the Prop. 1 weights on the x and y slots (zero on positions). y tokens have an empty x slot, so their
keys vanish and only the N x tokens, now (x_i, y_i), are summed: one GD step with rate η from W = 0.
"""

from __future__ import annotations

import math

import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predict
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.separate.model import SeparateModelConfig, SeparateTokenModel
from icl_gd.regression.separate.tokens import AuthorsSeparateLayout, SeparateLayout, SinusoidalPositions, StandardPositions
from icl_gd.regression.tasks import LinearRegressionTask, Stream, UniformInputs

from icl_gd.constructions.prop1 import gd_step_weights
from icl_gd.constructions.verify import CheckResult, IdentityCheck, compare


def copy_layer_weights(layout: SeparateLayout, beta: float, dtype: torch.dtype = torch.float64) -> LSAWeights:
    """The copy layer: scores β p_{t+1}·p_s, values and projection moving the y slot. Blocks (1, k, D), (1, D, k)."""
    if not beta > 0:
        raise ConfigError(f"copy inverse temperature beta must be positive, got {beta!r}")
    D, d_pos, d_y = layout.d_model, layout.d_pos, layout.d_y
    k = copy_key_size(layout)
    W_Q = torch.zeros(1, k, D, dtype=dtype)
    W_K = torch.zeros(1, k, D, dtype=dtype)
    W_V = torch.zeros(1, k, D, dtype=dtype)
    P = torch.zeros(1, D, k, dtype=dtype)
    W_Q[0, :d_pos, layout.pos_slot] = beta * layout.positions.shift(layout.n_context, dtype)
    W_K[0, :d_pos, layout.pos_slot] = torch.eye(d_pos, dtype=dtype)
    W_V[0, :d_y, layout.y_slot] = torch.eye(d_y, dtype=dtype)
    P[0, layout.y_slot, :d_y] = torch.eye(d_y, dtype=dtype)
    return LSAWeights(W_Q, W_K, W_V, P)


def copy_key_size(layout: SeparateLayout) -> int:
    return max(layout.d_pos, layout.d_y)


def gd_layer_weights(layout: SeparateLayout, eta: float, dtype: torch.dtype = torch.float64) -> LSAWeights:
    """Prop. 1 weights on the [x | y] slots, padded with zeros on the positional slots: (1, D, D) blocks."""
    small = gd_step_weights(layout.d_x, layout.d_y, layout.n_context, eta, dtype=dtype)
    D, d = layout.d_model, layout.d_x + layout.d_y

    def pad(m: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(1, D, D, dtype=dtype)
        out[0, :d, :d] = m[0]
        return out

    return LSAWeights(pad(small.W_Q), pad(small.W_K), pad(small.W_V), pad(small.P))


def prop3_model(layout: SeparateLayout, eta: float, beta: float, dtype: torch.dtype = torch.float64,
                ) -> SeparateTokenModel:
    """The two-layer model of Proposition 3: copy (inverse temperature β) then one GD step (rate η)."""
    model = SeparateTokenModel(layout, SeparateModelConfig(n_heads=1, key_size=copy_key_size(layout))).to(dtype)
    model.copy.load_weights(copy_layer_weights(layout, beta, dtype))
    model.gd.load_weights(gd_layer_weights(layout, eta, dtype))
    return model


def score_gap(layout: SeparateLayout) -> float:
    """Δ = min over m ≠ 0 (mod T) of p_{t+1}·p_{t+1} - p_{t+1}·p_{t+1+m} = F - max_m Σ_f cos(ω_f m) (β = 1)."""
    F, T = layout.positions.resolved(layout.n_context)
    if F <= 0 or T < 2:
        raise ConfigError(f"positional encoding with F={F}, T={T} cannot tell neighbours apart")
    omegas = layout.positions.omegas(layout.n_context)
    shifts = torch.arange(1, T, dtype=torch.float64)
    similarities = torch.cos(shifts[:, None] * omegas[None]).sum(-1)
    return float(F - similarities.max())


def copy_leak_bound(layout: SeparateLayout, beta: float) -> float:
    """ε(β) = (2N - 1) e^{-β Δ}: an upper bound on the attention mass a copy-layer token puts off its target."""
    return (2 * layout.n_context - 1) * math.exp(-beta * score_gap(layout))


# ---------------------------------------------------------------------------------------------------- authors' layout
# In the authors' layout (``AuthorsSeparateLayout``) the label token ((0, …, 0, y_i), p_t) holds y_i in the data
# coordinate that x_i's last entry uses, and ŷ is read from the query's last positional coordinate. There, no
# one-head construction is exact: the only token holding y_i is its own label token, so the input token 2i and
# the label token 2i+1 must attend to it alike and receive the same update; their difference (x_i - y_i e_last,
# p_2i - p_2i+1) survives the copy, and no linear key or value can cancel the positional part p_2i - p_2i+1 =
# (R⁻¹ - I) p_2i+1 on every pair (R - I is invertible), nor remove y_i from the label token's key otherwise.
# Giving the label a data slot of its own (``own_label_slot``) is enough: then the construction below is exact
# with everything else as the authors have it (2N+1 tokens, standard positions concatenated, one head, logits /
# sqrt(key size), ŷ from the query's last coordinate, whose offset the copy layer cancels).
def authors_query_target(layout: AuthorsSeparateLayout) -> tuple[int, float]:
    """(s*, margin): the context token the query attends to under scores p_2N+1·p_s (its right neighbour is not in
    the context), and the score gap to the runner-up."""
    pe = layout.positions.encode(layout.n_tokens + 1, torch.float64)
    scores = pe[:-2] @ pe[-1]  # context tokens 0..2N-1 against p_2N+1
    top = torch.topk(scores, 2)
    return int(top.indices[0]), float(top.values[0] - top.values[1])


def authors_score_gap(layout: AuthorsSeparateLayout) -> float:
    """Δ = min over the context tokens t of p_t+1·p_t+1 - max_{s ≠ t+1} p_t+1·p_s, and the query's own gap."""
    pe = layout.positions.encode(layout.n_tokens + 1, torch.float64)
    context = pe[: 2 * layout.n_context]
    gaps = []
    for t in range(2 * layout.n_context - 1):
        scores = context @ pe[t + 1]
        gaps.append(float(scores[t + 1] - torch.cat([scores[: t + 1], scores[t + 2:]]).max()))
    return min(min(gaps), authors_query_target(layout)[1])


def authors_copy_layer_weights(layout: AuthorsSeparateLayout, beta: float, key_size: int,
                               dtype: torch.dtype = torch.float64) -> LSAWeights:
    """The copy layer for logits / sqrt(key size): scores β p_t+1·p_s; the value carries the target's label and
    positions; the projection adds the label to the y slot and b·p_s to the read-out coordinate, with b chosen so
    that the query (attending to s*) starts at zero there. Blocks (1, k, D), (1, D, k)."""
    if not layout.own_label_slot:
        raise ConfigError("an exact Prop. 3 construction needs the label in a slot of its own (own_label_slot): "
                          "in the authors' shared slot no one-head copy layer is exact")
    if not beta > 0:
        raise ConfigError(f"copy inverse temperature beta must be positive, got {beta!r}")
    D, P = layout.d_model, layout.d_pos
    if key_size < P + 1:
        raise ConfigError(f"the copy layer needs key size >= {P + 1}, got {key_size}")
    target, _ = authors_query_target(layout)
    pe = layout.positions.encode(layout.n_tokens, torch.float64)
    b = -pe[-1, -1] * pe[target] / pe[target].dot(pe[target])  # b·p_s* = -p_2N[-1]
    W_Q, W_K, W_V = (torch.zeros(1, key_size, D, dtype=torch.float64) for _ in range(3))
    proj = torch.zeros(1, D, key_size, dtype=torch.float64)
    W_Q[0, :P, layout.pos_slot] = beta * math.sqrt(key_size) * layout.positions.shift()
    W_K[0, :P, layout.pos_slot] = torch.eye(P, dtype=torch.float64)
    W_V[0, :P, layout.pos_slot] = torch.eye(P, dtype=torch.float64)
    W_V[0, P, layout.y_slot] = 1.0
    proj[0, layout.y_slot, P] = 1.0
    proj[0, layout.readout_slot, :P] = b
    return LSAWeights(W_Q, W_K, W_V, proj).to(dtype=dtype)


def authors_gd_layer_weights(layout: AuthorsSeparateLayout, eta: float, key_size: int,
                             dtype: torch.dtype = torch.float64) -> LSAWeights:
    """Prop. 1 on the [x | y] slots, writing -ŷ into the read-out coordinate instead of the y slot."""
    D, d, n = layout.d_model, layout.d_x, layout.n_context
    if key_size < d + 1:
        raise ConfigError(f"the GD layer needs key size >= {d + 1}, got {key_size}")
    W_Q, W_K, W_V = (torch.zeros(1, key_size, D, dtype=dtype) for _ in range(3))
    proj = torch.zeros(1, D, key_size, dtype=dtype)
    W_Q[0, :d, layout.x_slot] = torch.eye(d, dtype=dtype)
    W_K[0, :d, layout.x_slot] = torch.eye(d, dtype=dtype)
    W_V[0, d, layout.y_slot] = -1.0
    proj[0, layout.readout_slot, d] = eta / n
    return LSAWeights(W_Q, W_K, W_V, proj)


def authors_prop3_model(layout: AuthorsSeparateLayout, eta: float, beta: float, dtype: torch.dtype = torch.float64,
                        ) -> SeparateTokenModel:
    """Prop. 3 in the authors' layout with the label's own slot: the copy (one head, scaled logits, β) then one GD
    step of rate η; key size = the token width."""
    k = layout.d_model
    model = SeparateTokenModel(layout, SeparateModelConfig(n_heads=1, key_size=k, scaled_logits=True)).to(dtype)
    model.copy.load_weights(authors_copy_layer_weights(layout, beta, k, dtype))
    model.gd.load_weights(authors_gd_layer_weights(layout, eta, k, dtype))
    return model


def check_authors_layout(d_x: int, n_context: int, position_size: int, batch: int, eta: float,
                         beta: float | None, seed: int, dtype: torch.dtype = torch.float64,
                         tolerance: float = 1e-12) -> CheckResult:
    """The model's ŷ, read from the query's last positional coordinate, against one explicit GD step; ``beta``
    None puts β Δ at 50 (a leak below e^-50 per token)."""
    task = LinearRegressionTask(d=d_x, n_context=n_context, inputs=UniformInputs(2.0))
    data = task.sample(batch, seed=seed, stream=Stream.TEST, dtype=dtype)
    layout = AuthorsSeparateLayout(d_x, n_context, StandardPositions(position_size), own_label_slot=True)
    beta = beta if beta is not None else 50.0 / authors_score_gap(layout)
    model = authors_prop3_model(layout, eta, beta, dtype)
    with torch.no_grad():
        got = model(layout.tokens(data))
    return compare(got, gd_predict(data.x_context, data.y_context, data.x_query, [eta]), tolerance)


def _authors_random_shapes_check() -> CheckResult:
    from icl_gd.constructions.verify import merge

    gen = torch.Generator().manual_seed(7)
    results = []
    for trial in range(8):
        d_x = int(torch.randint(1, 12, (1,), generator=gen))
        n = int(torch.randint(2, 13, (1,), generator=gen))
        eta = float(torch.rand((), generator=gen) * 2)
        P = 2 * int(torch.randint(2, 7, (1,), generator=gen))
        results.append(check_authors_layout(d_x, n, P, 8, eta, beta=None, seed=trial))
    return merge(results)


# ---------------------------------------------------------------------------------------------------- checks
def _layout_and_tokens(d_x: int, d_y: int, n_context: int, batch: int, seed: int, dtype: torch.dtype,
                       positions: SinusoidalPositions = SinusoidalPositions()):
    task = LinearRegressionTask(d=d_x, n_context=n_context, d_y=d_y, inputs=UniformInputs(2.0))
    data = task.sample(batch, seed=seed, stream=Stream.TEST, dtype=dtype)
    layout = SeparateLayout(d_x, d_y, n_context, positions)
    return layout, data, layout.tokens(data)


def check_copy_then_gd(d_x: int, d_y: int, n_context: int, batch: int, eta: float, beta: float, seed: int,
                       positions: SinusoidalPositions = SinusoidalPositions(), dtype: torch.dtype = torch.float64,
                       tolerance: float = 1e-12) -> CheckResult:
    """The model's ŷ against one explicit GD step; at large β the copy is exact to round-off."""
    layout, data, tokens = _layout_and_tokens(d_x, d_y, n_context, batch, seed, dtype, positions)
    model = prop3_model(layout, eta, beta, dtype)
    with torch.no_grad():
        got = model(tokens)
    want = gd_predict(data.x_context, data.y_context, data.x_query, [eta])
    return compare(got, want, tolerance)


def check_copied_tokens(d_x: int, d_y: int, n_context: int, batch: int, beta: float, seed: int,
                        dtype: torch.dtype = torch.float64, tolerance: float = 1e-12) -> CheckResult:
    """After the copy layer every x token is (x_i, y_i, p_t) and the query keeps an empty y slot."""
    layout, data, tokens = _layout_and_tokens(d_x, d_y, n_context, batch, seed, dtype)
    model = prop3_model(layout, 1.0, beta, dtype)
    with torch.no_grad():
        _, states = model(tokens, return_tokens=True)
    expected = tokens.clone()
    expected[:, 0::2, layout.y_slot] = data.y  # x_i gets y_i; the query (the last even token) gets 0
    expected[:, -1, layout.y_slot] = 0
    return compare(states[1][:, 0::2], expected[:, 0::2], tolerance)


def _random_shapes_check() -> CheckResult:
    from icl_gd.constructions.verify import merge

    gen = torch.Generator().manual_seed(99)
    results = []
    for trial in range(10):
        d_x, d_y = (int(v) for v in torch.randint(1, 6, (2,), generator=gen))
        n = int(torch.randint(2, 16, (1,), generator=gen))
        eta = float(torch.rand((), generator=gen) * 2)
        results.append(check_copy_then_gd(d_x, d_y, n, 8, eta, beta=20.0, seed=trial))
    return merge(results)


IDENTITY_CHECKS = (
    IdentityCheck("prop3: copy layer puts y_i in x_i's slot (β=20, d=10, N=10)",
                  lambda: check_copied_tokens(10, 1, 10, 32, beta=20.0, seed=1)),
    IdentityCheck("prop3: copy + Prop. 1 layer = one GD step (random shapes, β=20)", _random_shapes_check),
    IdentityCheck("prop3, authors' layout (label slot of its own): = one GD step (d=10, N=10, β=150)",
                  lambda: check_authors_layout(10, 10, 10, 32, 0.6, beta=150.0, seed=2)),
    IdentityCheck("prop3, authors' layout (label slot of its own): random shapes, β Δ = 50",
                  _authors_random_shapes_check),
)
