"""Separate-token layout, positional encodings, the two-layer model and the copy analysis."""

import pytest
import torch

from icl_gd.constructions.prop3 import prop3_model
from icl_gd.regression.baselines import GDPredictor
from icl_gd.core.errors import ConfigError
from icl_gd.regression.separate.model import SeparateModelConfig, SeparateTokenModel, copy_analysis
from icl_gd.regression.separate.tokens import SeparateLayout, SeparateTokenTask, SinusoidalPositions
from icl_gd.regression.tasks import LinearRegressionTask
from icl_gd.regression.tokens import ConcatLayout


def _data(d=4, n=5, batch=3, dtype=torch.float64):
    return LinearRegressionTask(d=d, n_context=n).sample(batch, seed=0, dtype=dtype)


def test_layout_places_x_y_and_positions():
    data = _data()
    layout = SeparateLayout(4, 1, 5)
    tokens = layout.tokens(data)
    assert tokens.shape == (3, 11, 4 + 1 + 10) and layout.d_pos == 10
    assert torch.equal(tokens[:, 0::2, :4], data.x) and torch.all(tokens[:, 1::2, :4] == 0)
    assert torch.equal(tokens[:, 1::2, 4:5], data.y[:, :-1]) and torch.all(tokens[:, 0::2, 4:5] == 0)
    x, y, xq = layout.split(tokens)
    assert torch.equal(x, data.x_context) and torch.equal(y, data.y_context) and torch.equal(xq, data.x_query)


def test_positions_are_cyclic_rotations():
    pos = SinusoidalPositions()
    n = 6
    p = pos.encode(2 * n + 2, n, torch.float64)
    R = pos.shift(n)
    torch.testing.assert_close(p[1:] , p[:-1] @ R.T, rtol=0, atol=1e-12)
    torch.testing.assert_close(p[2 * n + 1], p[0], rtol=0, atol=1e-12)  # period 2N+1: the query's successor is 0


def test_gd_on_separate_tokens_equals_gd_on_concatenated_tokens():
    """One GDPredictor, two layouts: the separate layout's read-back gives the concatenated layout's numbers on the
    same tasks, in the tokens' dtype (float64 inside both)."""
    for dtype in (torch.float64, torch.float32):
        data = _data(batch=8, dtype=dtype)
        separate, concat = SeparateLayout(4, 1, 5), ConcatLayout(4, 1)
        sep = GDPredictor(separate, [0.5, 0.3])(separate.tokens(data))
        cat = GDPredictor(concat, [0.5, 0.3])(concat.tokens(data))
        assert sep.dtype == dtype
        torch.testing.assert_close(sep, cat, rtol=1e-13, atol=1e-13)


def test_model_fast_path_equals_full_forward():
    layout = SeparateLayout(3, 2, 4)
    model = SeparateTokenModel(layout, SeparateModelConfig(n_heads=2, init_scale=1.0), seed=3).double()
    tokens = layout.tokens(LinearRegressionTask(d=3, n_context=4, d_y=2).sample(5, seed=1, dtype=torch.float64))
    fast = model(tokens)
    full, states = model(tokens, return_tokens=True)
    assert len(states) == 3
    torch.testing.assert_close(fast, full, rtol=1e-12, atol=1e-12)


def test_token_task_trains_on_separate_tokens():
    task = SeparateTokenTask(LinearRegressionTask(d=3, n_context=4))
    tokens, target = task.train_batch(6, 0, 1, torch.device("cpu"), torch.float32)
    assert tokens.shape == (6, 9, 3 + 1 + 8) and target.shape == (6, 1)


def test_copy_analysis_reads_the_neighbour_of_the_construction():
    layout = SeparateLayout(3, 1, 4)
    model = prop3_model(layout, 1.0, beta=3.0)
    tokens = layout.tokens(_data(d=3, n=4, batch=4))
    result = copy_analysis(model.copy, tokens)
    x_pos = layout.x_positions
    assert torch.all(result.next[x_pos] > 0.9)  # ∂(copied y)/∂y_{k+1} ≈ 1
    assert torch.all(result.other[x_pos] < 0.1 * result.next[x_pos])
    assert torch.isnan(result.next[-1])
    assert result.norms.shape == (9, 9)


def test_copy_analysis_others_exclude_the_neighbour():
    """A layer whose update is exactly the next token has own = other = 0 and next = ‖I‖_F = √D."""
    class NextToken(torch.nn.Module):
        def forward(self, e):
            shifted = torch.cat([e[:, 1:], torch.zeros_like(e[:, :1])], dim=1)
            return e + shifted

    tokens = torch.randn(2, 7, 3, dtype=torch.float64)
    result = copy_analysis(NextToken(), tokens)
    torch.testing.assert_close(result.next[:-1], torch.full((6,), 3 ** 0.5, dtype=torch.float64))
    assert torch.all(result.other == 0) and torch.all(result.own == 0)
    torch.testing.assert_close(result.own_with_residual, torch.full((7,), 3 ** 0.5, dtype=torch.float64))


def test_bad_settings_raise():
    with pytest.raises(ConfigError):
        SinusoidalPositions(n_frequencies=0)
    with pytest.raises(ConfigError):
        SinusoidalPositions(period=1)
    with pytest.raises(ConfigError):
        SeparateModelConfig(n_heads=0)
    with pytest.raises(ConfigError, match="does not fit"):
        SeparateLayout(2, 1, 5).tokens(_data(d=4, n=5))
