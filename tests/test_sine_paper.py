"""The authors' sine set-up: whole-token embedding + MLP + LSA, their frozen-η baseline, its closed-form re-tuned η,
and `--preset paper`."""

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.constructions.prop2 import frozen_gd_baseline, set_frozen_eta, tune_frozen_eta
from icl_gd.core.errors import ConfigError
from icl_gd.regression.sine.features import TokenEmbeddingMLP, embedded_token_lsa_model
from icl_gd.regression.sine.tasks import SineTask
from icl_gd.core.study import resolve_study_config
from icl_gd.regression.tasks import Stream
from icl_gd.studies import sine


def _tokens(batch=5, n=10, seed=0):
    data = SineTask(n_context=n).sample(batch, seed=seed, stream=Stream.TEST, dtype=torch.float64)
    y = data.y.clone()
    y[:, -1] = 0
    return torch.cat([data.x, y], dim=-1), data.y_query


def test_embedding_sees_the_whole_token_label_included():
    emb = TokenEmbeddingMLP(2, 40, 160, init_scale=1.0).double()
    tokens, _ = _tokens()
    e = emb(tokens)
    assert e.shape == (5, 11, 40)
    moved = tokens.clone()
    moved[:, 0, 1] += 1.0  # change one context label only
    diff = (emb(moved) - e).abs().amax(-1)
    assert (diff[:, 0] > 0).all() and torch.count_nonzero(diff[:, 1:]) == 0  # per token, y included
    assert emb.embed.bias is None and emb.mlp[0].bias is not None
    assert torch.count_nonzero(emb.mlp[0].bias) == 0  # the authors' zero biases
    # weights: truncated normal of variance init_scale / fan_in (hidden layer, 160 x 40 draws)
    assert emb.mlp[0].weight.var().item() == pytest.approx(1.0 / 40, rel=0.1)


def test_trained_model_reads_minus_the_last_coordinate():
    model = embedded_token_lsa_model(40, 160, init_scale=1.0, seed=2).double()
    tokens, _ = _tokens()
    pred, states = model(tokens, return_tokens=True)
    assert pred.shape == (5, 1)
    assert torch.allclose(pred, -states[-1][:, -1, -1:], atol=1e-12)
    assert model.lsa.config.d_model == 40 and model.lsa.config.resolved_key_size == 40


def test_frozen_baseline_is_one_gd_step_on_the_embedding_and_stays_frozen():
    eta, N = 0.1, 10
    model = frozen_gd_baseline(40, 160, N, eta, init_scale=1.0, seed=3).double()
    set_frozen_eta(model, N, eta)  # the Prop. 1 weights in float64 (built in float32)
    tokens, _ = _tokens()
    with torch.no_grad():
        e = model.embedding(tokens)
        m, label = e[..., :-1], e[..., -1]
        # written out: ŷ = -e_q[-1] + (η/N) Σ_i e_i[-1] m_i·m_q
        want = -label[:, -1] + eta / N * (label[:, :-1] * (m[:, :-1] @ m[:, -1, :, None])[..., 0]).sum(-1)
        got = model(tokens)[:, 0]
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-14)
    assert not any(p.requires_grad for p in model.lsa.parameters())
    assert all(p.requires_grad for p in model.embedding.parameters())


def test_tuned_eta_is_the_minimiser_of_the_held_out_loss():
    model = frozen_gd_baseline(8, 16, 10, 0.1, init_scale=2.0, seed=4).double()
    tokens, targets = _tokens(batch=64, seed=1)
    eta = tune_frozen_eta(model, tokens, targets)

    def loss(rate):
        with torch.no_grad():
            return float((set_frozen_eta(model, 10, rate)(tokens) - targets).pow(2).mean())
    best = loss(eta)
    assert best < loss(eta * 1.05) and best < loss(eta * 0.95) and best <= loss(0.1)


def test_authors_baseline_init_has_their_scales_not_the_trained_models():
    """Their baseline's E and W₁ are N(0, 0.002/2), W₂ N(0, 0.002/40), biases 0; the trained model's W₁ is
    truncated with variance 0.002/40 (std 4.5x smaller): a swapped or missing re-draw fails the std checks."""
    ours = frozen_gd_baseline(40, 160, 10, 0.1, seed=0)
    theirs = frozen_gd_baseline(40, 160, 10, 0.1, seed=0, authors_init=True)
    e = theirs.embedding
    assert float(e.mlp[0].weight.detach().std()) == pytest.approx(math.sqrt(0.001), rel=0.05)  # 6400 draws: ~1%
    assert float(e.mlp[2].weight.detach().std()) == pytest.approx(math.sqrt(0.002 / 40), rel=0.05)
    assert float(e.embed.weight.detach().std()) == pytest.approx(math.sqrt(0.001), rel=0.3)  # 80 draws
    assert float(ours.embedding.mlp[0].weight.detach().std()) == pytest.approx(math.sqrt(0.002 / 40), rel=0.05)
    assert not e.mlp[0].bias.any() and not e.mlp[2].bias.any()
    # the frozen Prop. 1 layer is the same either way
    assert all(torch.equal(a, b) for a, b in zip(ours.lsa.parameters(), theirs.lsa.parameters()))
    with pytest.raises(ConfigError, match="baseline_init"):
        sine.SineModelConfig(baseline_init="zeros")


def test_paper_preset_resolves_to_the_authors_settings():
    config = resolve_study_config(sine.STUDY, "paper")
    m, t, b = config.model, config.train_config(), sine.baseline_training(config)
    assert config.task.correlated and config.task.input_range == 10.0 and config.task.n_context == 10
    assert (m.architecture, m.d_features, m.hidden, m.activation) == ("tokens", 40, 160, "gelu")
    assert (m.init_scale, m.lsa_init_scale, m.baseline_eta, m.baseline_init) == (0.002, 0.002, 0.1, "authors")
    assert (t.steps, t.batch_size, t.lr, t.beta1, t.beta2, t.grad_clip) == (20_000, 2048, 1e-3, 0.9, 0.98, 100.0)
    assert (b.steps, b.batch_size, b.lr, b.beta1, b.beta2, b.grad_clip) == (20_000, 2048, 3e-4, 0.9, 0.999, 100.0)
    default = resolve_study_config(sine.STUDY)
    assert default.model.architecture == "features" and sine.baseline_training(default) == default.train_config()


@pytest.mark.slow
def test_paper_preset_runs_end_to_end(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "sine", "--preset", "paper", "--out", str(out), "--steps", "3", "--set", "batch_size=16",
        "--set", "eval_every=3", "--set", "n_test=32", "--set", "n_tune=32", "--set", "grid_points=5",
        "--no-progress"])
    assert result.exit_code == 0, result.output
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    for key in ("loss_trained", "loss_meta_learned", "loss_meta_learned_tuned_eta", "eta_meta_tuned",
                "loss_rel_gap_trained_vs_meta"):
        assert math.isfinite(mean[key]), key
    assert mean["eta_meta_learned"] == 0.1
    assert mean["loss_meta_learned_tuned_eta"] <= mean["loss_meta_learned"] * 1.05  # tuned on other tasks
    for name in ("loss_curves", "functions"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 0
