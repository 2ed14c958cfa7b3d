"""The training step's fast paths against the plain computation they replace.

- ``lsa._query_columns_update`` (a last layer's ŷ through C = Σ e eᵀ, taken for narrow data tokens): catches a
  wrong head/column layout (H > 1, d_y > 1), a wrong transpose of KQ or PV, and a gradient that differs from the
  explicit attention's (the backward pass is what the path exists for).
- ``make_optimizer``'s fused Adam(W): catches a fused update that is not Adam(W) (betas, decoupled decay, bias
  correction) beyond round-off, and a fused flag set where torch cannot run it.
- Sampling and token construction in fewer passes (in-place shifts, no multiply by 1, no clone-then-zero, each part
  padded from its view): bit-identical to the previous construction, written out here. Catches a changed
  generator call (order, shape, dtype), a dropped scale that is not 1, a query whose y slot is not zero, and a
  padded split whose pad columns are not zero or whose parts are not contiguous.
- ``lsa.AddClamped`` (a clipped stack's residual add and clamp, its backward one select): bit for bit autograd's
  add then clamp, inside vmap too, and a clipped stack's gradients as before.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from icl_gd.core.optim import make_optimizer
from icl_gd.regression import lsa
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream, UniformInputs, make_generator
from icl_gd.regression.tokens import ConcatLayout


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
        assert lsa._gram_pays(tokens, first=True) == (width <= lsa.GRAM_MAX_WIDTH)
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
    assert not lsa._gram_pays(context, first=True)
    assert not lsa._gram_pays(context.detach(), first=False)  # a later layer's context carries the earlier ones'
    with torch.no_grad():
        assert lsa._gram_pays(context, first=True) and lsa._gram_pays(context, first=False)
    assert lsa._gram_pays(context.detach(), first=True)
    assert not lsa._gram_pays(torch.randn(4, 5, lsa.GRAM_MAX_WIDTH + 1), first=True)


@pytest.mark.parametrize("layers,through_c", [(1, 1), (2, 0)])
def test_seeds_in_one_batch_take_the_lone_models_path(monkeypatch, layers, through_c):
    """Inside ``torch.func.vmap`` (``SeedEnsemble``) every tensor reads ``requires_grad`` False: the stacked model
    must still keep a later layer off the path through C, as the lone model does (catches the path chosen from
    ``requires_grad``: the stacked two-layer model's step then ran through C, about 1.5x slower)."""
    from icl_gd.regression.ensemble import SeedEnsemble

    calls = []
    real = lsa._query_columns_update
    monkeypatch.setattr(lsa, "_query_columns_update", lambda *args: calls.append(1) or real(*args))
    models = [LSAModel(LSAConfig(d_model=11, n_layers=layers), seed=s) for s in range(3)]
    tokens = torch.randn(3, 8, 11, 11)
    models[0](tokens[0]).sum().backward()
    lone = len(calls)
    SeedEnsemble(models)(tokens).sum().backward()
    assert lone == through_c and len(calls) - lone == through_c


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


def _previous_draw(task: LinearRegressionTask, B: int, seed: int, step: int, dtype: torch.dtype):
    """The batch as the plain computation samples it: (u - 0.5) * width, randn * std, randn * scale."""
    gen = make_generator(seed, step, Stream.TRAIN)
    N, d, dy = task.n_context, task.d, task.d_y
    w = torch.randn(B, dy, d, generator=gen, dtype=dtype) * task.weight_scale
    if isinstance(task.inputs, UniformInputs):
        x = (torch.rand((B, N + 1, d), generator=gen, dtype=dtype) - 0.5) * task.inputs.width
    else:
        x = torch.randn((B, N + 1, d), generator=gen, dtype=dtype) * task.inputs.std
    return x, x @ w.transpose(1, 2), w


@pytest.mark.parametrize("inputs,scale", [(UniformInputs(), 1.0), (UniformInputs(2.5), 0.3),
                                          (NormalInputs(), 1.0), (NormalInputs(std=1.7), 2.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sampling_and_tokens_are_bit_identical_to_the_previous_construction(inputs, scale, dtype):
    task = LinearRegressionTask(d=5, n_context=7, d_y=2, inputs=inputs, weight_scale=scale)
    batch = task.sample(64, seed=3, step=11, dtype=dtype)
    x, y, w = _previous_draw(task, 64, 3, 11, dtype)
    assert torch.equal(batch.x, x) and torch.equal(batch.y, y) and torch.equal(batch.w, w)
    y_blank = y.clone()
    y_blank[:, -1] = 0
    assert torch.equal(ConcatLayout(5, 2).tokens(batch), torch.cat([x, y_blank], dim=-1))


@pytest.mark.parametrize("width", [11, 12])
def test_padded_split_is_the_previous_pad_then_copy(width):
    tokens = torch.randn(6, 9, 11, requires_grad=True)
    context, query = lsa._split_padded(tokens, width)
    padded = torch.nn.functional.pad(tokens, (0, width - 11))
    assert torch.equal(context, padded[:, :-1]) and torch.equal(query, padded[:, -1])
    assert context.is_contiguous() and query.is_contiguous()
    (context.sum() + 2 * query.sum()).backward()  # the gradient still reaches the tokens: 1 on context, 2 on query
    assert torch.equal(tokens.grad, torch.cat([torch.ones(6, 8, 11), torch.full((6, 1, 11), 2.0)], dim=1))


def test_a_seed_slice_inside_vmap_is_told_apart():
    """``lsa._seed_batched`` picks the vmapped form of the narrow product; if torch stopped telling a vmapped slice
    apart, seeds in one batch would silently fall back to the slower batched matrix-vector products."""
    from torch.func import vmap

    seen = []
    vmap(lambda t: seen.append(lsa._seed_batched(t)) or t)(torch.zeros(3, 4))
    assert seen == [True] and not lsa._seed_batched(torch.zeros(3, 4))


@pytest.mark.parametrize("heads,d_y", [(1, 1), (2, 2)])
def test_the_vmapped_narrow_product_gives_each_seeds_lone_prediction_and_gradient(heads, d_y):
    """The single layer's y slot through C, per seed inside vmap (Pᵀ Cᵀ) against each lone model (C P): the same
    prediction and parameter gradient in float64 (catches a transpose or a head/column layout gone wrong)."""
    from icl_gd.regression.ensemble import SeedEnsemble

    config = LSAConfig(d_model=7, d_y=d_y, n_heads=heads, init_scale=3.0)
    models = [LSAModel(config, seed=s).double() for s in range(3)]
    tokens = torch.randn(3, 16, 9, 7, dtype=torch.float64)
    tokens[..., -1, -d_y:] = 0
    ensemble = SeedEnsemble(models)
    stacked = ensemble(tokens)
    grads = torch.autograd.grad(stacked.square().sum(), ensemble.parameters())
    for i, model in enumerate(models):
        lone = model(tokens[i])
        torch.testing.assert_close(stacked[i], lone, rtol=1e-12, atol=1e-14)
        for g, h in zip(grads, torch.autograd.grad(lone.square().sum(), list(model.parameters()))):
            torch.testing.assert_close(g[i], h, rtol=1e-11, atol=1e-13 * h.abs().max().item())


def _sum_and_bounds(dtype: torch.dtype, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, update (6, 5, 8) with sums inside, outside and exactly on ±clip, and a NaN and an inf among them."""
    gen = torch.Generator().manual_seed(3)
    x = 3 * torch.randn(6, 5, 8, generator=gen, dtype=dtype)
    update = 3 * torch.randn(6, 5, 8, generator=gen, dtype=dtype)
    x[0, 0, :4] = torch.tensor([clip - 0.5, -clip + 0.5, float("nan"), float("inf")], dtype=dtype)
    update[0, 0, :4] = torch.tensor([0.5, -0.5, 1.0, -1.0], dtype=dtype)  # sums: +clip, -clip, NaN, inf
    return x, update


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_add_clamped_is_autograds_add_then_clamp_forward_and_backward(dtype):
    """``lsa.AddClamped`` against ``(x + update).clamp(-clip, clip)`` under autograd: the same kernels (add, clamp,
    a select on the kept entries) in the same order, so bit for bit. Catches a mask that drops the bounds
    themselves (sum exactly ±clip keeps its gradient), one that lets a NaN or clipped entry through, and a
    gradient missing from either input."""
    clip = 2.5
    x, update = _sum_and_bounds(dtype, clip)
    weight = torch.randn(6, 5, 8, dtype=dtype, generator=torch.Generator().manual_seed(4))

    def run(fused: bool):
        a, b = x.clone().requires_grad_(), update.clone().requires_grad_()
        out = lsa.AddClamped.apply(a, b, clip)[0] if fused else (a + b).clamp(-clip, clip)
        (out * weight).nansum().backward()
        return out.detach(), a.grad, b.grad

    for fused, plain in zip(run(True), run(False)):
        assert torch.equal(fused.isnan(), plain.isnan())
        assert torch.equal(fused.nan_to_num(), plain.nan_to_num())
    out, grad_x, _ = run(True)
    assert out[0, 0, 0] == clip and grad_x[0, 0, 0] == weight[0, 0, 0]  # on the bound: kept
    assert grad_x[0, 0, 2] == 0 and grad_x[0, 0, 3] == 0  # NaN and inf: no gradient


def test_add_clamped_inside_vmap_gives_each_slices_gradient():
    """Seeds in one batch vmap the model: the Function's generated vmap rule per slice against each slice alone."""
    from torch.func import grad, vmap

    x, update = _sum_and_bounds(torch.float64, 2.5)
    x, update = x.nan_to_num(posinf=9.0), update

    def loss(a, b):
        return (lsa.AddClamped.apply(a, b, 2.5)[0] * torch.arange(1.0, 9.0, dtype=a.dtype)).sum()

    batched = vmap(grad(loss, argnums=(0, 1)))(x, update)
    for i in range(x.shape[0]):
        alone = grad(loss, argnums=(0, 1))(x[i], update[i])
        assert torch.equal(batched[0][i], alone[0]) and torch.equal(batched[1][i], alone[1])


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_a_clipped_stack_trains_as_with_autograds_clamp(monkeypatch, dtype, tol):
    """A clipped LSA stack (four separate layers, damping 0.5, activations that do hit the clip) through
    ``AddClamped`` against the same model with the previous add-then-clamp: prediction and every parameter's
    gradient (catches the fused path dropping a layer's clip, its damping, or the context's gradient)."""
    config = LSAConfig(d_model=6, n_layers=4, damping=0.5, clip_activations=0.5, init_scale=1.0)
    model = LSAModel(config, seed=1).to(dtype)
    tokens = torch.randn(32, 9, 6, dtype=dtype, generator=torch.Generator().manual_seed(5))
    tokens[:, -1, -1] = 0

    def prediction_and_grads():
        model.zero_grad()
        y = model(tokens)
        y.square().sum().backward()
        return y.detach(), [p.grad.clone() for p in model.parameters()]

    fused_y, fused_grads = prediction_and_grads()

    def previous(x, update, damping, clip):
        x = x + (update if damping == 1.0 else damping * update)
        return x if clip is None else x.clamp(-clip, clip)

    monkeypatch.setattr(lsa, "_add_damped", previous)
    plain_y, plain_grads = prediction_and_grads()
    unclipped = LSAModel(dataclasses.replace(config, clip_activations=None)).to(dtype)
    unclipped.load_state_dict(model.state_dict())
    with torch.no_grad():  # the clip is active in this set-up, and gradients flow
        assert (unclipped(tokens) - plain_y).abs().max() > 0.1
    assert all((h != 0).any() for h in plain_grads)
    torch.testing.assert_close(fused_y, plain_y, rtol=tol, atol=0)
    for g, h in zip(fused_grads, plain_grads):
        torch.testing.assert_close(g, h, rtol=tol, atol=tol * h.abs().max().item())
