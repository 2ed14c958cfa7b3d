import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, NormalisedInputs, Stream, UniformInputs
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask, query_prediction


def test_batch_is_pure_function_of_seed_step_stream():
    task = LinearRegressionTask()
    a = task.sample(64, seed=3, step=7)
    b = task.sample(64, seed=3, step=7)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.w, b.w)
    for other in (task.sample(64, 3, 8), task.sample(64, 4, 7), task.sample(64, 3, 7, Stream.TEST)):
        assert not torch.equal(a.x, other.x)


def test_shapes_targets_and_default_input_range():
    task = LinearRegressionTask(d=4, n_context=6, d_y=2)
    batch = task.sample(5000, 0, dtype=torch.float64)
    assert batch.x.shape == (5000, 7, 4) and batch.y.shape == (5000, 7, 2) and batch.w.shape == (5000, 2, 4)
    torch.testing.assert_close(batch.y, batch.x @ batch.w.transpose(1, 2))
    assert batch.x.min() >= -0.5 and batch.x.max() <= 0.5  # the authors' U(-0.5, 0.5)
    assert abs(batch.x.var().item() - 1 / 12) < 2e-3


def test_uniform_width_normal_and_covariance():
    wide = LinearRegressionTask(inputs=UniformInputs(2.0)).sample(2000, 0)
    assert wide.x.abs().max() > 0.9 and wide.x.abs().max() <= 1.0
    cov = ((2.0, 0.5), (0.5, 1.0))
    x = LinearRegressionTask(d=2, inputs=NormalInputs(covariance=cov)).sample(20000, 0, dtype=torch.float64).x
    flat = x.reshape(-1, 2)
    torch.testing.assert_close(flat.T @ flat / flat.shape[0], torch.tensor(cov, dtype=torch.float64), atol=0.05,
                               rtol=0.05)


@pytest.mark.parametrize("law", ["exponential", "normal", "laplace"])
def test_normalised_inputs_have_unit_context_norm(law):
    batch = LinearRegressionTask(inputs=NormalisedInputs(law, scale=2.0)).sample(100, 0, dtype=torch.float64)
    norms = batch.x_context.flatten(1).norm(dim=1)
    torch.testing.assert_close(norms, torch.full_like(norms, 2.0))


def test_noise_and_distractors():
    clean = LinearRegressionTask(n_distractors=4).sample(500, 0, dtype=torch.float64)
    exact = (clean.x @ clean.w.transpose(1, 2))
    replaced = (~torch.isclose(clean.y, exact)).squeeze(-1)
    assert (replaced[:, :-1].sum(1) == 4).all() and not replaced[:, -1].any()
    noisy = LinearRegressionTask(label_noise=0.5).sample(4000, 0, dtype=torch.float64)
    resid = noisy.y - noisy.x @ noisy.w.transpose(1, 2)
    assert abs(resid.std().item() - 0.5) < 0.02


@pytest.mark.parametrize("kwargs", [dict(d=0), dict(n_context=-1), dict(d_y=0), dict(weight_scale=0.0),
                                    dict(label_noise=-1.0), dict(n_distractors=11)])
def test_bad_task_settings_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        LinearRegressionTask(**kwargs)


def test_bad_input_laws_and_sample_arguments():
    with pytest.raises(ConfigError, match="width"):
        UniformInputs(0.0)
    with pytest.raises(ConfigError, match="positive definite"):
        NormalInputs(covariance=((1.0, 2.0), (2.0, 1.0)))
    with pytest.raises(ConfigError, match="law"):
        NormalisedInputs("cauchy")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_size"):
        LinearRegressionTask().sample(0, 0)
    with pytest.raises(ConfigError, match="seed"):
        LinearRegressionTask().sample(4, -1)


def test_concat_tokens_and_sign_convention():
    task = LinearRegressionTask(d=3, n_context=4)
    batch, tokens = ConcatTokenTask(task).batch_tokens(8, 0)
    layout = ConcatLayout(3)
    assert tokens.shape == (8, 5, 4)
    assert torch.equal(tokens[:, :-1, 3:], batch.y_context) and (tokens[:, -1, 3:] == 0).all()
    x, y, xq = layout.split(tokens)
    assert torch.equal(x, batch.x_context) and torch.equal(y, batch.y_context) and torch.equal(xq, batch.x_query)
    out = tokens.clone()
    out[:, -1, 3:] = -2.5  # a model writes -ŷ into the query's y slot
    assert (query_prediction(out, layout.y_slot) == 2.5).all() and (layout.prediction(out) == 2.5).all()
    assert layout.prediction(tokens).abs().sum() == 0  # before any layer the query slot is empty


def test_dtype_and_device_are_respected():
    batch = LinearRegressionTask().sample(4, 0, dtype=torch.float64, device="cpu")
    assert batch.x.dtype == torch.float64 and batch.x.device.type == "cpu"
