"""Sine tasks: addressable batches, the authors' ranges, independent vs correlated (a, φ), typed errors."""

import math

import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.sine.tasks import SineTask, SineTokenTask
from icl_gd.regression.tasks import Stream


def test_batches_are_functions_of_seed_step_stream():
    task = SineTask()
    a, b = task.sample(64, seed=3, step=7), task.sample(64, seed=3, step=7)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, task.sample(64, seed=3, step=8).x)
    assert not torch.equal(a.x, task.sample(64, seed=3, step=7, stream=Stream.TEST).x)


def test_shapes_ranges_and_targets():
    task = SineTask()
    batch = task.sample(4096, seed=0)
    assert batch.x.shape == (4096, 11, 1) and batch.y.shape == (4096, 11, 1)
    assert batch.x.min() >= -5 and batch.x.max() <= 5 and batch.x.abs().max() > 4.9
    assert batch.amplitude.min() >= 0.1 and batch.amplitude.max() <= 0.5
    assert batch.phase.min() >= 0 and batch.phase.max() <= math.pi
    torch.testing.assert_close(batch.y[..., 0], batch.function(batch.x[..., 0]))


def test_independent_by_default_and_correlated_as_option():
    independent = SineTask().sample(8192, seed=1)
    r = torch.corrcoef(torch.stack([independent.amplitude, independent.phase]))[0, 1]
    assert abs(float(r)) < 0.05
    correlated = SineTask(correlated=True).sample(8192, seed=1)
    # The authors' law: both are affine in one uniform draw, so φ is an exact affine function of a.
    u = (correlated.amplitude - 0.1) / 0.4
    torch.testing.assert_close(correlated.phase, u * math.pi, atol=1e-5, rtol=0)


def test_token_task_concatenated_layout():
    tokens, target = SineTokenTask(SineTask(n_context=6)).train_batch(5, 0, 2, torch.device("cpu"), torch.float64)
    batch = SineTask(n_context=6).sample(5, 0, 2, dtype=torch.float64)
    assert tokens.shape == (5, 7, 2) and tokens.dtype == torch.float64
    assert torch.equal(tokens[:, :, 0], batch.x[..., 0])
    assert torch.equal(tokens[:, :-1, 1], batch.y[:, :-1, 0]) and torch.all(tokens[:, -1, 1] == 0)
    assert torch.equal(target, batch.y_query)


@pytest.mark.parametrize("kwargs", [dict(n_context=0), dict(input_range=-1.0), dict(amplitude=(0.5, 0.1)),
                                    dict(phase=(1.0, 0.0))])
def test_bad_settings_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        SineTask(**kwargs)


def test_bad_batch_size_raises():
    with pytest.raises(ConfigError, match="batch_size"):
        SineTask().sample(0, seed=0)
