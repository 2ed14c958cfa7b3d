"""Seeds in one batch: each member of a batched run equals the lone run with its seed."""

import copy

import pytest
import torch
from torch import nn

from icl_gd.ensemble import SeedEnsemble, clip_grad_norm_per_member, train_ensemble
from icl_gd.errors import ConfigError, DivergenceError
from icl_gd.lsa import LSAConfig, LSAModel
from icl_gd.metrics import regression_loss
from icl_gd.tasks import LinearRegressionTask, Stream
from icl_gd.tokens import ConcatTokenTask
from icl_gd.training import authors_train_config, train

TASK = ConcatTokenTask(LinearRegressionTask(d=5, n_context=6))
SEEDS = [0, 3, 7]


def _models(config: LSAConfig, dtype=torch.float64):
    return [LSAModel(config, seed=s).to(dtype) for s in SEEDS]


def _eval_rows(model, step, seed):
    batch, tokens = TASK.batch_tokens(64, 99, 0, Stream.TEST, dtype=next(model.parameters()).dtype)
    with torch.no_grad():
        return [{"step": step, "seed": seed, "loss": regression_loss(model(tokens), batch.y_query)}]


def _max_rel(a: nn.Module, b: nn.Module) -> float:
    pairs = zip(a.state_dict().values(), b.state_dict().values())
    return max(float((p - q).abs().max() / p.abs().max()) for p, q in pairs)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-11), (torch.float32, 1e-4)])
@pytest.mark.parametrize("config", [LSAConfig(d_model=6, n_layers=2, recurrent=True),
                                    LSAConfig(d_model=6, n_layers=3, n_heads=2, clip_activations=10.0)])
def test_each_member_equals_its_lone_run(dtype, tol, config):
    train_config = authors_train_config(config.n_layers, config.recurrent, steps=12, batch_size=32, eval_every=4)
    lone = _models(config, dtype)
    lone_states = [train(m, TASK, train_config, s, evaluate=lambda m, step, s=s: _eval_rows(m, step, s))
                   for m, s in zip(lone, SEEDS)]
    batched = _models(config, dtype)
    states = train_ensemble(batched, TASK, train_config, SEEDS, evaluate=_eval_rows)
    for a, b, sa, sb in zip(lone, batched, lone_states, states):
        assert _max_rel(a, b) <= tol
        assert [r["step"] for r in sa.history] == [r["step"] for r in sb.history] == [0, 4, 8, 12]
        for ra, rb in zip(sa.history, sb.history):
            assert rb["loss"] == pytest.approx(ra["loss"], rel=tol)
    assert all(_max_rel(a, b) > 1e-3 for a, b in zip(batched, batched[1:]))  # seeds really differ


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


def test_resume_is_exact(tmp_path):
    config = LSAConfig(d_model=6, n_layers=2, recurrent=True)
    full = authors_train_config(2, True, steps=20, batch_size=32, eval_every=5, checkpoint_every=10)
    whole = _models(config)
    train_ensemble(whole, TASK, full, SEEDS)
    parts = _models(config)
    ckpt = tmp_path / "seeds.pt"
    train_ensemble(parts, TASK, authors_train_config(2, True, steps=10, batch_size=32, eval_every=5,
                                                     checkpoint_every=10), SEEDS, checkpoint_path=ckpt,
                   fingerprint="a")
    resumed = _models(config)  # fresh models: everything comes from the checkpoint
    states = train_ensemble(resumed, TASK, full, SEEDS, checkpoint_path=ckpt, fingerprint="a")
    assert states[0].step == 20
    for a, b in zip(whole, resumed):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_forward_and_members():
    config = LSAConfig(d_model=6, n_layers=2)
    models = _models(config)
    ensemble = SeedEnsemble(models)
    tokens = torch.randn(3, 4, 7, 6, dtype=torch.float64)
    out = ensemble(tokens)
    assert out.shape == (3, 4, 1)
    for i, m in enumerate(models):
        assert torch.allclose(out[i], m(tokens[i]), rtol=1e-13, atol=1e-15)
        assert _max_rel(ensemble.member(i), m) == 0.0
    with pytest.raises(ConfigError):
        ensemble(tokens[:2])


def test_bad_ensembles_raise():
    with pytest.raises(ConfigError):
        SeedEnsemble([])
    with pytest.raises(ConfigError):
        SeedEnsemble([LSAModel(LSAConfig(d_model=6)), LSAModel(LSAConfig(d_model=7))])
    with pytest.raises(ConfigError):
        train_ensemble(_models(LSAConfig(d_model=6)), TASK, authors_train_config(1, False, steps=1), [0, 1])


def test_divergence_names_the_seed():
    models = _models(LSAConfig(d_model=6, n_layers=3))
    with torch.no_grad():
        for p in models[1].parameters():
            p.mul_(1e30)  # seed 3 overflows at once
    config = authors_train_config(3, False, steps=2, batch_size=16, eval_every=1, grad_clip=None)
    with pytest.raises(DivergenceError, match=r"\[3\]"):
        train_ensemble(models, TASK, config, SEEDS)


def test_original_models_untouched_until_the_end():
    """Training works on stacked copies; the given models receive the trained weights in place at the end."""
    models = _models(LSAConfig(d_model=6))
    before = copy.deepcopy(models)
    train_ensemble(models, TASK, authors_train_config(1, False, steps=5, batch_size=16), SEEDS)
    assert all(_max_rel(a, b) > 0 for a, b in zip(before, models))
