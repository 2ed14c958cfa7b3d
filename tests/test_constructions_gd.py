"""Proposition 1 and K-step GD constructions against explicit GD: float64 exact, float32 close."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_gd.constructions.prop1 import (authors_demo_check, check_k_steps, check_one_step, gd_model, gd_step_weights,
                                 tokens_with_initial_prediction)
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import gd_predict
from icl_gd.regression.tasks import LinearRegressionTask
from icl_gd.regression.tokens import ConcatTokenTask


@settings(max_examples=40, deadline=None)
@given(d_x=st.integers(1, 16), d_y=st.integers(1, 6), n=st.integers(1, 40), eta=st.floats(0.01, 3.0),
       with_W0=st.booleans(), seed=st.integers(0, 10_000))
def test_prop1_layer_is_one_gd_step_float64(d_x, d_y, n, eta, with_W0, seed):
    result = check_one_step(d_x, d_y, n, batch=4, eta=eta, with_W0=with_W0, seed=seed)
    assert result.max_rel_error <= 1e-12, result


@settings(max_examples=20, deadline=None)
@given(d_x=st.integers(1, 10), d_y=st.integers(1, 4), n=st.integers(2, 30),
       etas=st.lists(st.floats(0.05, 1.5), min_size=1, max_size=6), recurrent=st.booleans(),
       with_W0=st.booleans(), seed=st.integers(0, 10_000))
def test_k_layers_are_k_gd_steps_float64(d_x, d_y, n, etas, recurrent, with_W0, seed):
    if recurrent:
        etas = [etas[0]] * len(etas)
    result = check_k_steps(d_x, d_y, n, 8, etas, recurrent=recurrent, with_W0=with_W0, seed=seed)
    assert result.max_rel_error <= 1e-12, result


@settings(max_examples=20, deadline=None)
@given(d_x=st.integers(1, 16), d_y=st.integers(1, 6), n=st.integers(1, 40), eta=st.floats(0.01, 3.0),
       seed=st.integers(0, 10_000))
def test_prop1_float32(d_x, d_y, n, eta, seed):
    result = check_one_step(d_x, d_y, n, batch=4, eta=eta, with_W0=True, seed=seed, dtype=torch.float32)
    assert result.max_rel_error <= 1e-5, result


def test_authors_demo_case_float64_and_float32():
    assert authors_demo_check().max_rel_error <= 1e-12
    assert authors_demo_check(dtype=torch.float32, tolerance=1e-5).max_rel_error <= 1e-5


def test_constructed_model_predicts_like_gd_on_the_default_task():
    task = LinearRegressionTask()
    batch, tokens = ConcatTokenTask(task).batch_tokens(256, 0, dtype=torch.float64)
    model = gd_model(10, 1, 10, [6.0])
    torch.testing.assert_close(model(tokens), gd_predict(batch.x_context, batch.y_context, batch.x_query, [6.0]),
                               rtol=1e-12, atol=1e-14)


def test_initial_prediction_slot_and_multihead_split():
    W0 = torch.randn(2, 3, dtype=torch.float64)
    tokens = torch.randn(4, 6, 5, dtype=torch.float64)
    primed = tokens_with_initial_prediction(tokens, 3, W0)
    torch.testing.assert_close(-primed[:, -1, 3:], tokens[:, -1, :3] @ W0.T)
    one, four = gd_step_weights(3, 2, 5, 0.8), gd_step_weights(3, 2, 5, 0.8, n_heads=4)
    torch.testing.assert_close(four.products()[1].sum(0), one.products()[1][0])


def test_bad_construction_arguments():
    with pytest.raises(ConfigError, match="W0"):
        gd_step_weights(3, 1, 5, 1.0, W0=torch.zeros(2, 3))
    with pytest.raises(ConfigError, match="d_x"):
        gd_step_weights(0, 1, 5, 1.0)
    with pytest.raises(ConfigError, match="one η"):
        gd_model(3, 1, 5, [0.1, 0.2], recurrent=True)
    with pytest.raises(ConfigError, match="at least one"):
        gd_model(3, 1, 5, [])


def test_every_registered_identity_check_passes():
    results = {check.name: check.run() for check in all_checks() if check.name.startswith("prop1")}
    assert len(results) >= 4
    assert all(r.passed for r in results.values()), results
