import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSALayer, LSAModel, LSAWeights, split_padded


def _tokens(B=6, T=8, D=5, seed=0, dtype=torch.float64):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("heads,key_size", [(1, None), (3, 4), (2, 7)])
def test_fast_linear_path_equals_explicit_attention(heads, key_size):
    layer = LSALayer(LSAConfig(d_model=5, n_heads=heads, key_size=key_size, init_scale=1.0)).double()
    tokens = _tokens()
    explicit = layer.explicit_update(tokens)
    torch.testing.assert_close(layer.attention_update(tokens), explicit, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(layer.query_update(tokens), explicit[:, -1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("heads,D", [(1, 5), (2, 8), (3, 11)])
def test_the_held_apart_update_is_the_explicit_one_with_zero_padding(heads, D):
    """``split_padded`` then ``linear_update``: the explicit attention's update in the first D columns, exact
    zeros in the padded ones (a layer rolled out on held-apart tokens never leaks into them), fresh tensors."""
    layer = LSALayer(LSAConfig(d_model=D, n_heads=heads, init_scale=1.0)).double()
    tokens = _tokens(D=D)
    context, query = split_padded(tokens)
    W = context.shape[-1]
    assert W % 4 == 0 and W - 4 < D <= W and query.shape == (6, W)
    assert torch.equal(torch.cat([context, query[:, None]], 1)[..., :D], tokens)
    assert context.data_ptr() != tokens.data_ptr() and (context[..., D:] == 0).all() and (query[:, D:] == 0).all()
    d_context, d_query = layer.linear_update(context, query)
    explicit = layer.explicit_update(tokens)
    torch.testing.assert_close(d_context[..., :D], explicit[:, :-1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(d_query[:, :D], explicit[:, -1], rtol=1e-12, atol=1e-12)
    assert (d_context[..., D:] == 0).all() and (d_query[:, D:] == 0).all()
    softmax = LSALayer(LSAConfig(d_model=D, n_heads=heads, softmax=True)).double()
    with pytest.raises(ConfigError, match="needs a linear layer"):
        softmax.linear_update(context, query)


def test_query_is_not_attended_but_every_token_is_updated():
    layer = LSALayer(LSAConfig(d_model=5, init_scale=1.0)).double()
    tokens = _tokens()
    changed = tokens.clone()
    changed[:, -1] += 1.0
    # Changing the query changes only the query's own update: it is not a key/value for anyone.
    delta = layer.attention_update(changed) - layer.attention_update(tokens)
    assert delta[:, :-1].abs().max() < 1e-12 and delta[:, -1].abs().max() > 1e-6
    assert (layer.attention_update(tokens)[:, :-1].abs() > 0).all()


@pytest.mark.parametrize("softmax,heads", [(True, 1), (True, 2), (False, 3)])
def test_query_path_matches_the_explicit_update_for_variants(softmax, heads):
    config = LSAConfig(d_model=5, n_heads=heads, softmax=softmax, init_scale=1.0)
    layer = LSALayer(config).double()
    tokens = _tokens()
    torch.testing.assert_close(layer.query_update(tokens), layer.explicit_update(tokens)[:, -1], rtol=1e-12,
                               atol=1e-12)


def test_softmax_attention_rows_sum_to_one():
    layer = LSALayer(LSAConfig(d_model=5, n_heads=2, softmax=True, init_scale=1.0)).double()
    attn = layer.attention_map(_tokens())
    torch.testing.assert_close(attn.sum(-1), torch.ones_like(attn.sum(-1)))


def test_damping_scales_the_update():
    config = LSAConfig(d_model=5, damping=0.25, init_scale=1.0)
    layer = LSALayer(config).double()
    tokens = _tokens()
    torch.testing.assert_close(layer(tokens) - tokens, 0.25 * layer.attention_update(tokens))


@pytest.mark.parametrize("recurrent", [True, False])
def test_model_prediction_equals_last_state_and_applies_layers(recurrent):
    model = LSAModel(LSAConfig(d_model=5, n_layers=3, recurrent=recurrent, init_scale=1.0)).double()
    tokens = _tokens()
    pred, states = model(tokens, return_tokens=True)
    assert len(states) == 4 and len(model.layers) == (1 if recurrent else 3)
    torch.testing.assert_close(pred, -states[-1][:, -1, -1:])
    torch.testing.assert_close(model(tokens), pred)


def _stacked_explicit(model: LSAModel, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Token states of ``model`` computed with the explicit (query/key/value) update, layer by layer."""
    states, clip = [tokens], model.config.clip_activations
    for layer in model.layer_sequence():
        tokens = tokens + layer.config.damping * layer.explicit_update(tokens)
        states.append(tokens if clip is None else tokens.clamp(-clip, clip))
        tokens = states[-1]
    return states


@settings(max_examples=25, deadline=None)
@given(D=st.integers(1, 14), T=st.integers(2, 9), B=st.integers(1, 5), layers=st.integers(1, 4),
       heads=st.integers(1, 3), recurrent=st.booleans(), damping=st.sampled_from([1.0, 0.6]),
       clip=st.sampled_from([None, 0.8]), seed=st.integers(0, 10_000))
def test_model_split_padded_path_equals_explicit_stack(D, T, B, layers, heads, recurrent, damping, clip, seed):
    """The model's fast path (context and query apart, width padded to a multiple of 4) against the explicit
    update applied layer by layer: float64 to 1e-12 relative, float32 to 1e-5, any width (padded or not)."""
    config = LSAConfig(d_model=D, n_layers=layers, recurrent=recurrent, n_heads=heads, damping=damping,
                       clip_activations=clip, init_scale=1.0)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        model = LSAModel(config, seed=seed).to(dtype)
        tokens = _tokens(B=B, T=T, D=D, seed=seed, dtype=dtype)
        expected = _stacked_explicit(model, tokens)
        pred, states = model(tokens, return_tokens=True)
        scale = max(1.0, max(s.abs().max().item() for s in expected))
        for got, want in zip(states, expected):
            torch.testing.assert_close(got, want, rtol=tol, atol=tol * scale)
        torch.testing.assert_close(model(tokens), -expected[-1][:, -1, -1:], rtol=tol, atol=tol * scale)
        torch.testing.assert_close(pred, model(tokens), rtol=tol, atol=tol * scale)


def test_recurrent_model_runs_past_its_depth_and_separate_model_refuses():
    tied = LSAModel(LSAConfig(d_model=5, n_layers=2, recurrent=True)).double()
    assert tied(_tokens(), n_applications=7).shape == (6, 1)
    separate = LSAModel(LSAConfig(d_model=5, n_layers=2)).double()
    with pytest.raises(ConfigError, match="cannot apply 7"):
        separate(_tokens(), n_applications=7)


def test_activation_clipping_bounds_tokens():
    model = LSAModel(LSAConfig(d_model=5, n_layers=2, clip_activations=0.5, init_scale=50.0)).double()
    _, states = model(_tokens() * 10, return_tokens=True)
    assert states[-1].abs().max() <= 0.5


def test_init_is_seeded_and_has_the_authors_variance():
    a, b = LSAModel(LSAConfig(d_model=11), seed=1), LSAModel(LSAConfig(d_model=11), seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    big = LSALayer(LSAConfig(d_model=200, init_scale=0.002))
    var = big.W_Q.detach().var().item()
    assert abs(var - 0.002 / 200) / (0.002 / 200) < 0.05


def test_weights_roundtrip_and_products():
    layer = LSALayer(LSAConfig(d_model=4, n_heads=2, init_scale=1.0)).double()
    w = layer.weights()
    QK, PV = w.products()
    rebuilt = LSAWeights.from_products(QK, PV)
    torch.testing.assert_close(rebuilt.products()[0], QK)
    torch.testing.assert_close(rebuilt.products()[1], PV)
    other = LSALayer(LSAConfig(d_model=4, n_heads=2)).double().load_weights(w)
    tokens = _tokens(D=4)
    torch.testing.assert_close(other(tokens), layer(tokens))
    with pytest.raises(ConfigError, match="shape"):
        LSALayer(LSAConfig(d_model=4)).double().load_weights(w)


@pytest.mark.parametrize("kwargs", [dict(d_model=0), dict(d_model=4, n_layers=0), dict(d_model=4, n_heads=-1),
                                    dict(d_model=4, key_size=0), dict(d_model=4, damping=0.0),
                                    dict(d_model=4, clip_activations=-1.0)])
def test_bad_model_config(kwargs):
    with pytest.raises(ConfigError):
        LSAConfig(**kwargs)
