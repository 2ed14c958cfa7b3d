"""The authors' separate-token set-up: standard positions, their layout and read-out, scaled softmax logits, their
copy analysis with "others" excluding k+1, and `--preset paper`."""

import json
import math

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSALayer
from icl_gd.regression.separate.model import SeparateModelConfig, SeparateTokenModel, authors_copy_analysis
from icl_gd.regression.separate.tokens import AuthorsSeparateLayout, StandardPositions
from icl_gd.core.study import resolve_study_config
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.studies import separate_tokens


def test_standard_positions_follow_the_transformer_formula_and_shift_by_a_rotation():
    P, T = 10, 21
    pe = StandardPositions(P).encode(T, torch.float64)
    t = torch.arange(T, dtype=torch.float64)
    for i in range(P // 2):  # written out from the formula, pair by pair
        w = 10000.0 ** (-2 * i / P)
        assert torch.allclose(pe[:, 2 * i], torch.sin(t * w), atol=1e-14)
        assert torch.allclose(pe[:, 2 * i + 1], torch.cos(t * w), atol=1e-14)
    R = StandardPositions(P).shift()
    assert torch.allclose(pe[:-1] @ R.T, pe[1:], atol=1e-13)
    odd = StandardPositions(7).encode(T, torch.float64)  # the first 7 coordinates of the same interleaving
    assert odd.shape == (T, 7) and torch.allclose(odd[:, 6], torch.sin(t * 10000.0 ** (-6 / 7)), atol=1e-14)
    with pytest.raises(ConfigError):
        StandardPositions(7).shift()
    with pytest.raises(ConfigError):
        StandardPositions(0)


def _paper_batch(d=10, n=10, batch=6):
    task = LinearRegressionTask(d=d, n_context=n)
    return task.sample(batch, seed=3, stream=Stream.TEST, dtype=torch.float64)


def test_authors_layout_tokens_split_and_readout():
    data = _paper_batch()
    layout = AuthorsSeparateLayout(10, 10)
    tokens = layout.tokens(data)
    assert tokens.shape == (6, 21, 20) and layout.d_model == 20
    assert torch.equal(tokens[:, 0::2, :10], data.x)  # inputs, the query's last
    assert torch.equal(tokens[:, 1::2, 9:10], data.y[:, :-1])  # labels in the last data coordinate
    assert torch.count_nonzero(tokens[:, 1::2, :9]) == 0
    assert torch.allclose(tokens[0, :, 10:], StandardPositions(10).encode(21, torch.float64))
    x, y, xq = layout.split(tokens)
    assert torch.equal(x, data.x_context) and torch.equal(y, data.y_context) and torch.equal(xq, data.x_query)
    # ŷ is minus the last (positional) coordinate of the query, not a data slot
    assert torch.equal(layout.prediction(tokens), -tokens[:, -1, 19:20])
    assert layout.prediction(tokens)[0, 0] == pytest.approx(-math.cos(20 * 10000.0 ** -0.8))


def test_model_on_the_authors_layout_reads_the_last_coordinate_of_the_final_query():
    layout = AuthorsSeparateLayout(10, 10)
    model = SeparateTokenModel(layout, SeparateModelConfig(key_size=20, scaled_logits=True, init_scale=0.5),
                               seed=1).double()
    tokens = layout.tokens(_paper_batch())
    fast = model(tokens)
    slow, states = model(tokens, return_tokens=True)
    assert fast.shape == (6, 1) and len(states) == 3
    assert torch.allclose(fast, -states[-1][:, -1, 19:20], atol=1e-12)
    assert torch.allclose(fast, slow, atol=1e-12)
    assert model.copy.W_Q.shape == (1, 20, 20) and model.copy.config.scaled_logits


def test_scaled_logits_divide_the_scores_by_sqrt_key_size():
    gen = torch.Generator().manual_seed(0)
    config = LSAConfig(d_model=6, n_heads=2, key_size=4, softmax=True, init_scale=5.0)
    scaled = LSALayer(LSAConfig(**{**config.__dict__, "scaled_logits": True}), gen).double()
    plain = LSALayer(config).double()
    weights = scaled.weights()
    plain.load_weights(type(weights)(weights.W_Q / 2.0, weights.W_K, weights.W_V, weights.P))  # sqrt(4) = 2
    e = torch.randn(3, 5, 6, generator=gen, dtype=torch.float64) * 3
    assert torch.allclose(scaled(e), plain(e), atol=1e-12)
    assert torch.allclose(scaled.query_update(e), plain.query_update(e), atol=1e-12)
    assert torch.allclose(scaled.attention_map(e), plain.attention_map(e), atol=1e-12)
    assert not torch.allclose(scaled(e), LSALayer(config).double().load_weights(weights)(e), atol=1e-6)


class _ShiftCopy(nn.Module):
    """out_k = e_k + e_{k+m} (0 beyond the end): a layer that copies from the token m places on."""

    def __init__(self, m: int) -> None:
        super().__init__()
        self.m = m

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        shifted = torch.zeros_like(e)
        shifted[:, : -self.m] = e[:, self.m:]
        return e + shifted


def test_authors_copy_analysis_keeps_the_next_token_out_of_the_others():
    T, D = 21, 20
    tokens = torch.randn(4, T, D, dtype=torch.float64)
    a = authors_copy_analysis(_ShiftCopy(1), tokens)
    assert a.own == pytest.approx(math.sqrt(D)) and a.next == pytest.approx(math.sqrt(D))
    assert a.other == pytest.approx(0.0, abs=1e-12)  # fixed: the neighbour is not an "other"
    assert a.other_with_next == pytest.approx(math.sqrt(D) / (T - 2))  # their sum counts it
    far = authors_copy_analysis(_ShiftCopy(2), tokens)  # copying from k+2 is "other", not "next"
    assert far.next == pytest.approx(0.0, abs=1e-12)
    assert far.other == pytest.approx(math.sqrt(D) / (T - 2)) == far.other_with_next


def test_authors_copy_analysis_differentiates_the_data_coordinates_only():
    """Theirs adds positions inside the model: only the 10 data coordinates are inputs, so the residual alone
    gives own = √10 (their step-0 value 3.162), not √20."""
    layout = AuthorsSeparateLayout(d_x=10, n_context=10)
    tokens = torch.randn(4, layout.n_tokens, layout.d_model, dtype=torch.float64)
    a = authors_copy_analysis(_ShiftCopy(1), tokens, layout.data_slot)
    assert layout.data_slot == slice(0, 10)
    assert a.own == pytest.approx(math.sqrt(10)) and a.next == pytest.approx(math.sqrt(10))


def test_paper_preset_resolves_to_the_authors_settings():
    config = resolve_study_config(separate_tokens.STUDY, "paper")
    m, t = config.model, config.train_config()
    assert (m.layout, m.position_size, m.key_size, m.scaled_logits, m.heads) == ("authors", 10, 20, True, (1,))
    assert m.separate_model(1).init_scale / 2 == pytest.approx(0.01)  # variance 0.01 / fan_in over 2 layers
    assert (t.steps, t.batch_size, t.lr, t.beta1, t.beta2, t.grad_clip) == (10_000, 2048, 1e-3, 0.9, 0.98, 10.0)
    layout = m.token_task(config.task.build()).layout
    assert (layout.n_tokens, layout.d_model) == (21, 20)
    assert resolve_study_config(separate_tokens.STUDY).model.layout == "ours"  # the default is unchanged


@pytest.mark.slow
def test_paper_preset_runs_end_to_end(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "run", "separate-tokens", "--preset", "paper", "--out", str(out), "--steps", "3", "--set", "batch_size=16",
        "--set", "eval_every=3", "--set", "n_test=32", "--set", "n_tune=32", "--set", "n_copy=3", "--no-progress"])
    assert result.exit_code == 0, result.output
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    for key in ("loss_trained", "loss_gd", "loss_gd_2steps", "copy_authors_own", "copy_authors_next",
                "copy_authors_other", "copy_authors_other_with_next_bug", "copy_next"):
        assert math.isfinite(mean[key]), key
    assert mean["copy_authors_other"] <= mean["copy_authors_other_with_next_bug"]
    assert json.loads((out / "config.json").read_text())["preset"] == "paper"
