"""The training step's fast paths (issue 21) against the plain computation they replace.

- ``lsa._query_columns_update`` (a last layer's ŷ through C = Σ e eᵀ, taken for narrow data tokens): catches a
  wrong head/column layout (H > 1, d_y > 1), a wrong transpose of KQ or PV, and a gradient that differs from the
  explicit attention's (the backward pass is what the path exists for).
- ``make_optimizer``'s fused Adam(W): catches a fused update that is not Adam(W) (betas, decoupled decay, bias
  correction) beyond round-off, and a fused flag set where torch cannot run it.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from icl_gd.core.optim import make_optimizer
from icl_gd.regression import lsa
from icl_gd.regression.lsa import LSAConfig, LSAModel


def _explicit_prediction(model: LSAModel, tokens: torch.Tensor) -> torch.Tensor:
    """ŷ by the token-by-token update (queries, keys, values, scores), layer after layer."""
    e = tokens
    for layer in model.layer_sequence():
        e = e + layer.config.damping * layer.explicit_update(e)
    return -e[:, -1, -model.config.d_y:]


@pytest.mark.parametrize("heads,d_y,layers,width", [(1, 1, 1, 11), (2, 1, 1, 7), (3, 2, 1, 12), (1, 1, 3, 11),
                                                    (2, 2, 2, 20)])
def test_query_column_path_and_its_gradient_equal_explicit_attention(heads, d_y, layers, width):
    gen = torch.Generator().manual_seed(heads * 100 + width)
    config = LSAConfig(d_model=width, d_y=d_y, n_layers=layers, n_heads=heads, init_scale=3.0, damping=0.8)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        model = LSAModel(config, seed=width).to(dtype)
        tokens = torch.randn(16, 9, width, generator=gen).to(dtype)
        tokens[:, -1, -d_y:] = 0
        target = torch.randn(16, d_y, generator=gen).to(dtype)
        # The path under test is taken for narrow first layers only (``_gram_pays``): say which case this is.
        assert lsa._gram_pays(tokens) == (width <= lsa.GRAM_MAX_WIDTH)
        fast = model(tokens)
        slow = _explicit_prediction(model, tokens)
        scale = slow.abs().max().item()
        torch.testing.assert_close(fast, slow, rtol=tol, atol=tol * scale)
        g_fast = torch.autograd.grad(((fast - target) ** 2).sum(), list(model.parameters()))
        g_slow = torch.autograd.grad(((slow - target) ** 2).sum(), list(model.parameters()))
        for a, b in zip(g_fast, g_slow):
            torch.testing.assert_close(a, b, rtol=10 * tol, atol=10 * tol * b.abs().max().item())


def test_gram_path_is_not_taken_for_a_context_that_needs_gradients():
    context = torch.randn(4, 5, 8, requires_grad=True)
    assert not lsa._gram_pays(context)
    with torch.no_grad():
        assert lsa._gram_pays(context)
    assert not lsa._gram_pays(torch.randn(4, 5, lsa.GRAM_MAX_WIDTH + 1))


@pytest.mark.parametrize("name,decay", [("adamw", 0.0), ("adamw", 0.1), ("adam", 0.01)])
def test_fused_adam_follows_the_foreach_update(name, decay):
    config = SimpleNamespace(lr=1e-2, beta1=0.9, beta2=0.98, weight_decay=decay)
    gen = torch.Generator().manual_seed(0)
    start = [torch.randn(5, 3, generator=gen, dtype=torch.float64), torch.randn(7, generator=gen, dtype=torch.float64)]
    grads = [[torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in start] for _ in range(6)]
    fused = [p.clone().requires_grad_() for p in start]
    plain = [p.clone().requires_grad_() for p in start]
    opt = make_optimizer(name, fused, config)
    kind = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    reference = kind(plain, lr=1e-2, betas=(0.9, 0.98), weight_decay=decay, foreach=True)
    assert opt.defaults["fused"]
    for step_grads in grads:
        for p, q, g in zip(fused, plain, step_grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt.step()
        reference.step()
    for p, q in zip(fused, plain):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)
