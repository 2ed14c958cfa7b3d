import dataclasses

import pytest
import torch

from icl_gd.errors import ConfigError, DivergenceError
from icl_gd.lsa import LSAConfig, LSAModel
from icl_gd.tasks import LinearRegressionTask
from icl_gd.tokens import ConcatTokenTask
from icl_gd.training import TrainConfig, authors_train_config, config_fingerprint, train

TASK = ConcatTokenTask(LinearRegressionTask(d=4, n_context=6))
MODEL = LSAConfig(d_model=5)
CONFIG = TrainConfig(steps=40, batch_size=64, lr=1e-2, grad_clip=None, eval_every=10, checkpoint_every=10)


class Interrupt(Exception):
    pass


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_training_reduces_the_loss_and_records_history():
    model = LSAModel(MODEL, seed=0)
    rows = []

    def evaluate(m, step):
        tokens, target = TASK.train_batch(256, 99, 0, torch.device("cpu"), torch.float32)
        with torch.no_grad():
            loss = float(0.5 * ((m(tokens) - target) ** 2).mean())
        return [{"step": step, "loss": loss}]

    state = train(model, TASK, dataclasses.replace(CONFIG, steps=200), seed=0, evaluate=evaluate)
    rows = state.history
    assert [r["step"] for r in rows] == list(range(0, 201, 10))
    assert rows[-1]["loss"] < 0.9 * rows[0]["loss"]  # 200 small steps from the small init: a clear drop


def test_same_seed_same_numbers():
    a, b = LSAModel(MODEL, seed=0), LSAModel(MODEL, seed=0)
    train(a, TASK, CONFIG, seed=5)
    train(b, TASK, CONFIG, seed=5)
    assert torch.equal(_params(a), _params(b))


def test_interrupted_run_resumes_to_the_same_numbers(tmp_path):
    reference = LSAModel(MODEL, seed=0)
    ref_state = train(reference, TASK, CONFIG, seed=1, evaluate=lambda m, s: [{"step": s, "p": _params(m).sum().item()}])

    path = tmp_path / "ckpt.pt"
    fp = config_fingerprint(MODEL, CONFIG)

    def crash_at_30(m, step):
        if step == 30:
            raise Interrupt
        return [{"step": step, "p": _params(m).sum().item()}]

    with pytest.raises(Interrupt):
        train(LSAModel(MODEL, seed=0), TASK, CONFIG, seed=1, evaluate=crash_at_30, checkpoint_path=path,
              fingerprint=fp)
    resumed = LSAModel(MODEL, seed=0)
    state = train(resumed, TASK, CONFIG, seed=1, evaluate=lambda m, s: [{"step": s, "p": _params(m).sum().item()}],
                  checkpoint_path=path, fingerprint=fp)
    assert torch.equal(_params(resumed), _params(reference))
    assert state.history == ref_state.history


def test_checkpoint_from_other_settings_is_not_resumed(tmp_path):
    path = tmp_path / "ckpt.pt"
    train(LSAModel(MODEL, seed=0), TASK, CONFIG, seed=1, checkpoint_path=path, fingerprint="a")
    fresh = LSAModel(MODEL, seed=0)
    state = train(fresh, TASK, dataclasses.replace(CONFIG, steps=10), seed=1, checkpoint_path=path, fingerprint="b")
    assert state.step == 10


def test_divergence_raises_a_clear_error():
    config = dataclasses.replace(CONFIG, lr=1e6, steps=50)
    with pytest.raises(DivergenceError, match="diverged at step"):
        train(LSAModel(LSAConfig(d_model=5, init_scale=1.0), seed=0), TASK, config, seed=0)


def test_authors_settings_by_depth():
    assert authors_train_config(1, False) == TrainConfig(steps=5000, grad_clip=1e-3, lr=1e-3)
    assert authors_train_config(2, False).steps == 50_000
    assert authors_train_config(3, True).steps == 5000 and authors_train_config(3, True).grad_clip == 10.0
    assert authors_train_config(4, False).lr == 5e-4
    assert authors_train_config(1, False, steps=7).steps == 7


@pytest.mark.parametrize("kwargs", [dict(steps=0), dict(batch_size=-2), dict(lr=0.0), dict(beta2=1.0),
                                    dict(grad_clip=0.0), dict(weight_decay=-1.0), dict(eval_every=0)])
def test_bad_train_config(kwargs):
    with pytest.raises(ConfigError):
        TrainConfig(**kwargs)


def test_compiled_step_follows_the_eager_trajectory():
    """compile=true (torch.compile of forward and backward) trains the same model as eager, to float32
    round-off, for a lone run and for seeds in one batch; the first call builds the kernels."""
    from icl_gd.ensemble import train_ensemble

    model_config = LSAConfig(d_model=5, n_layers=2, recurrent=True, init_scale=0.5)
    config = dataclasses.replace(CONFIG, steps=6, eval_every=6, grad_clip=1.0)
    eager, compiled = LSAModel(model_config, seed=3), LSAModel(model_config, seed=3)
    train(eager, TASK, config, seed=3)
    train(compiled, TASK, dataclasses.replace(config, compile=True), seed=3)
    assert not torch.equal(_params(eager), _params(LSAModel(model_config, seed=3)))  # it did train
    torch.testing.assert_close(_params(compiled), _params(eager), rtol=1e-4, atol=1e-6)

    seeds = [3, 4]
    batched = [LSAModel(model_config, seed=s) for s in seeds]
    train_ensemble(batched, TASK, dataclasses.replace(config, compile=True), seeds)
    torch.testing.assert_close(_params(batched[0]), _params(eager), rtol=1e-4, atol=1e-6)


def test_compile_flag_must_be_a_bool():
    with pytest.raises(ConfigError, match="compile"):
        TrainConfig(compile="yes")
