"""Seeds stacked along a leading axis: the vmapped forward, standalone members and per-seed clipping equal each
lone model's. (Training seeds in one batch is tested with the trainer, in test_training.py.)"""

import pytest
import torch
from torch import nn

from icl_gd.regression.ensemble import SeedEnsemble, clip_grad_norm_per_member
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSAModel

SEEDS = [0, 3, 7]


def _models(config: LSAConfig) -> list[nn.Module]:
    return [LSAModel(config, seed=s).to(torch.float64) for s in SEEDS]


def _max_rel(a: nn.Module, b: nn.Module) -> float:
    pairs = zip(a.state_dict().values(), b.state_dict().values())
    return max(float((p - q).abs().max() / p.abs().max()) for p, q in pairs)


def test_per_member_clipping_matches_torch_clipping():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(4, 3, 5, generator=gen, dtype=torch.float64) * s for s in (1.0, 10.0)]
    grads[0][1] *= 1e-6  # one member below the threshold: left unchanged
    stacked = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(stacked, grads):
        p.grad = g.clone()
    clip_grad_norm_per_member(stacked, 0.5)
    for i in range(4):
        lone = [torch.zeros_like(g[i], requires_grad=True) for g in grads]
        for p, g in zip(lone, grads):
            p.grad = g[i].clone()
        nn.utils.clip_grad_norm_(lone, 0.5, foreach=True)
        for p, q in zip(stacked, lone):
            assert torch.allclose(p.grad[i], q.grad, rtol=1e-14, atol=0)


def test_forward_and_members():
    config = LSAConfig(d_model=6, n_layers=2)
    models = _models(config)
    ensemble = SeedEnsemble(models)
    tokens = torch.randn(3, 4, 7, 6, dtype=torch.float64)
    out = ensemble(tokens)
    assert out.shape == (3, 4, 1)
    for i, m in enumerate(models):
        assert torch.allclose(out[i], m(tokens[i]), rtol=1e-13, atol=1e-15)
        member = ensemble.member(i)
        assert _max_rel(member, m) == 0.0 and not member.training and member is not m
    with pytest.raises(ConfigError):
        ensemble(tokens[:2])


def test_state_dict_round_trip():
    config = LSAConfig(d_model=6, n_layers=2)
    source, target = SeedEnsemble(_models(config)), SeedEnsemble(_models(LSAConfig(d_model=6, n_layers=2,
                                                                                    init_scale=3.0)))
    target.load_state_dict(source.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))
    assert all(_max_rel(source.member(i), target.member(i)) == 0.0 for i in range(len(SEEDS)))


def test_bad_ensembles_raise():
    with pytest.raises(ConfigError):
        SeedEnsemble([])
    with pytest.raises(ConfigError):
        SeedEnsemble([LSAModel(LSAConfig(d_model=6)), LSAModel(LSAConfig(d_model=7))])
