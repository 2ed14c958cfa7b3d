"""Transformer blocks (icl_gd.transformer): attention-only blocks are the LSA stack; LayerNorm and MLP placement
against a hand-written forward; seeds batch through the ensemble; config checks."""

import pytest
import torch
from torch.nn import functional as F

from icl_gd.regression.ensemble import SeedEnsemble
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.regression.transformer import BlockStackConfig, TransformerConfig, TransformerModel


def _tokens(B=6, T=11, D=11, seed=0):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("recurrent", [False, True])
def test_blocks_without_layer_norm_and_mlp_are_the_lsa_stack(recurrent):
    # Catches: a block that adds its update twice, reads ŷ from the wrong slot or draws its init in another order.
    attention = LSAConfig(d_model=11, n_layers=3, recurrent=recurrent, init_scale=0.5)
    ours = TransformerModel(TransformerConfig(attention, layer_norm=False, mlp=False), seed=4).double()
    lsa = LSAModel(attention, seed=4).double()
    tokens = _tokens()
    (p, states), (p_ref, states_ref) = ours(tokens, return_tokens=True), lsa(tokens, return_tokens=True)
    torch.testing.assert_close(p, p_ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(states[-1], states_ref[-1], rtol=1e-12, atol=1e-14)


def _by_hand(model: TransformerModel, tokens: torch.Tensor, recurrent: bool, norm_first: bool = False) -> torch.Tensor:
    """The authors' trans_block written out: pre-LN (none before the first separate block's attention unless
    ``norm_first``), explicit attention over the context, residual, clip, LN, MLP (tanh GELU), residual, clip."""
    h, clip = tokens, model.config.attention.clip_activations
    for i, block in enumerate(model.layer_sequence()):
        attn_in = h if (i == 0 and not recurrent and not norm_first) else F.layer_norm(
            h, h.shape[-1:], block.norm_attention.weight, block.norm_attention.bias)
        h = (h + block.attention.explicit_update(attn_in)).clamp(-clip, clip)
        if block.mlp is None:
            continue
        normed = F.layer_norm(h, h.shape[-1:], block.norm_mlp.weight, block.norm_mlp.bias)
        hidden = F.gelu(normed @ block.mlp.inner.weight.T, approximate="tanh")
        h = (h + hidden @ block.mlp.outer.weight.T).clamp(-clip, clip)
    return -h[:, -1, -1:]


@pytest.mark.parametrize("recurrent", [False, True])
def test_layer_norm_and_mlp_placement_match_the_authors_block(recurrent):
    attention = LSAConfig(d_model=11, n_layers=2, recurrent=recurrent, init_scale=2.0, clip_activations=3.0)
    model = TransformerModel(TransformerConfig(attention), seed=1).double()
    with torch.no_grad():  # non-trivial LN parameters, so a swapped or missing norm shows
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel()), dtype=p.dtype))
    tokens = _tokens(seed=2) * 2
    assert model.layers[0].mlp.inner.weight.shape == (44, 11)  # the authors' widening factor 4
    torch.testing.assert_close(model(tokens), _by_hand(model, tokens, recurrent), rtol=1e-10, atol=1e-12)


def test_one_layer_norm_first_block_normalises_the_attention_input():
    # App. A.9's one-layer LayerNorm model ("a single linear self-attention layer succeeding LayerNorm"). Catches the
    # plan that built none: without norm_first_block one separate block with no MLP has no LayerNorm at all.
    attention = LSAConfig(d_model=11, n_layers=1, init_scale=2.0, clip_activations=3.0)
    model = TransformerModel(TransformerConfig(attention, mlp=False, norm_first_block=True), seed=1).double()
    with torch.no_grad():
        model.layers[0].norm_attention.bias.add_(0.3)
    tokens = _tokens(seed=3) * 2
    built = BlockStackConfig(layers=1, block="transformer", mlp=False, norm_first_block=True).build(_Layout(), 0)
    assert isinstance(built.layers[0].norm_attention, torch.nn.LayerNorm)  # the study's setting reaches the model
    torch.testing.assert_close(model(tokens), _by_hand(model, tokens, False, norm_first=True), rtol=1e-10, atol=1e-12)
    plain = TransformerModel(TransformerConfig(attention, mlp=False), seed=1).double()
    assert isinstance(plain.layers[0].norm_attention, torch.nn.Identity)  # the authors' default: none before it


def test_seed_ensemble_runs_transformer_blocks_like_lone_models():
    attention = LSAConfig(d_model=11, n_layers=2, init_scale=0.5)
    models = [TransformerModel(TransformerConfig(attention), seed=s) for s in (0, 1)]
    tokens = _tokens(B=4).float()
    out = SeedEnsemble(models)(torch.stack([tokens, tokens]))
    for s, model in enumerate(models):
        torch.testing.assert_close(out[s], model(tokens), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out[0], out[1])


class _Layout:
    d_model, d_y = 11, 1


def test_block_stack_config_builds_the_named_model_and_checks_values():
    assert isinstance(BlockStackConfig(layers=2).build(_Layout(), 0), LSAModel)
    model = BlockStackConfig(layers=4, block="transformer", softmax=True).build(_Layout(), 0)
    assert isinstance(model, TransformerModel)
    assert model.config.attention.softmax and model.config.attention.scaled_logits  # the authors' 1/sqrt(k)
    assert model.config.attention.clip_activations == 10  # the depth rule is kept
    for bad in (dict(block="mlp"), dict(widening_factor=0), dict(layers=0)):
        with pytest.raises(ConfigError):
            BlockStackConfig(**bad)
