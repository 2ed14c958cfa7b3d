"""icl-gd's online-GD recurrences against flash-linear-attention's own PyTorch references (fla-core, the 'fla'
extra; CI installs it): the delta rule (``delta_rule_recurrence``) and the gated delta rule
(``naive_recurrent_gated_delta_rule``), per token, per-token step sizes and decays, several heads as several tasks.

fla computes in float32 (it casts its inputs), so the comparison is at a float32 tolerance; icl-gd's side runs in
float64. Their state S (d_k, d_v) is our Wᵀ; their output at token t is (scale · q_t)ᵀ S_t with S_t after writing
token t, i.e. our W_t q_t times the scale; their gate g is our decay's logarithm (α_t = exp g_t)."""

from __future__ import annotations

import pytest
import torch

from icl_gd.regression.online.algorithms import online_gd_weights_per_token

fla_delta = pytest.importorskip("fla.ops.delta_rule.naive", reason="the fla extra is not installed "
                                "(pip install -e '.[fla]')")
fla_gated = pytest.importorskip("fla.ops.gated_delta_rule.naive")

FLOAT32 = 2e-5  # relative to the largest output; measured at most 2.0e-7 on these shapes
# (heads, T tokens, d_k, d_v)
SHAPES = [(1, 1, 1, 1), (3, 9, 4, 2), (2, 16, 8, 5), (4, 33, 6, 3)]


def _ours(q, k, v, beta, alpha=None):
    """Per head h (a task of its own): W_t after tokens 1..t of online GD with step β_t (and decay α_t), then
    W_t q_t; q, k (H, T, d_k), v (H, T, d_v), beta and alpha (H, T); returns (H, T, d_v) in float64."""
    q, k, v, beta = (t.double() for t in (q, k, v, beta))
    decay = 1.0 if alpha is None else alpha.double()
    weights = online_gd_weights_per_token(k, v, beta[..., None], decay)  # (T+1, H, d_v, d_k)
    return torch.einsum("thvk,htk->htv", weights[1:], q)


def _relative(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_delta_rule_equals_fla_reference(shape):
    H, T, d_k, d_v = shape
    gen = torch.Generator().manual_seed(T * 31 + d_k)
    q, k = torch.randn(H, T, d_k, generator=gen), torch.randn(H, T, d_k, generator=gen) / d_k ** 0.5
    v = torch.randn(H, T, d_v, generator=gen)
    beta = torch.rand(H, T, generator=gen) * 1.5  # per-token step sizes; η ‖k‖² ≈ η keeps the recurrence bounded
    theirs, state = fla_delta.delta_rule_recurrence(q[None], k[None], v[None], beta[None])  # (1, H, T, d_v)
    ours = _ours(q, k, v, beta) * d_k ** -0.5  # their fixed query scale
    assert _relative(theirs[0], ours) < FLOAT32
    W_final = online_gd_weights_per_token(k.double(), v.double(), beta.double()[..., None])[-1]  # (H, d_v, d_k)
    assert _relative(state[0].transpose(-1, -2), W_final) < FLOAT32  # their state is our Wᵀ


@pytest.mark.parametrize("shape", SHAPES)
def test_the_gated_delta_rule_equals_fla_reference(shape):
    H, T, d_k, d_v = shape
    gen = torch.Generator().manual_seed(T * 17 + d_v)
    q, k = torch.randn(H, T, d_k, generator=gen), torch.randn(H, T, d_k, generator=gen) / d_k ** 0.5
    v = torch.randn(H, T, d_v, generator=gen)
    beta = torch.rand(H, T, generator=gen) * 1.5
    alpha = 0.5 + 0.5 * torch.rand(H, T, generator=gen)  # decays in [0.5, 1]
    # fla's layout here is (B, T, H, ·); its gate is log α
    theirs, _ = fla_gated.naive_recurrent_gated_delta_rule(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], beta.T[None],
        alpha.log().T[None], scale=1.0)
    ours = _ours(q, k, v, beta, alpha)
    assert _relative(theirs[0].transpose(0, 1), ours) < FLOAT32


def test_the_comparison_tells_a_wrong_decay_and_a_wrong_step_apart():
    """The tolerance is far below what a wrong convention gives: no decay where fla decays, or the step on the
    wrong side of the write, each moves the outputs by orders of magnitude more than FLOAT32."""
    H, T, d_k, d_v = 2, 12, 5, 3
    gen = torch.Generator().manual_seed(7)
    q, k = torch.randn(H, T, d_k, generator=gen), torch.randn(H, T, d_k, generator=gen) / d_k ** 0.5
    v = torch.randn(H, T, d_v, generator=gen)
    beta, alpha = torch.rand(H, T, generator=gen) + 0.2, 0.5 + 0.4 * torch.rand(H, T, generator=gen)
    theirs, _ = fla_gated.naive_recurrent_gated_delta_rule(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], beta.T[None],
        alpha.log().T[None], scale=1.0)
    theirs = theirs[0].transpose(0, 1)
    assert _relative(theirs, _ours(q, k, v, beta)) > 1e3 * FLOAT32  # decay ignored
    assert _relative(theirs, _ours(q, k, v, beta * 0.9, alpha)) > 1e3 * FLOAT32  # a step 10% off
