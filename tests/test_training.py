"""One trainer for a lone model and for seeds in one batch: exact resume, each batched seed equal to its lone run."""

import dataclasses

import pytest
import torch
from torch import nn

from icl_gd.core.errors import ConfigError, DivergenceError, ICLGDNotice
from icl_gd.regression.lsa import LSAConfig, LSAModel
from icl_gd.regression.metrics import regression_loss
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatTokenTask
from icl_gd.core.checkpoints import config_fingerprint
from icl_gd.regression.training import TrainConfig, authors_train_config, train

TASK = ConcatTokenTask(LinearRegressionTask(d=4, n_context=6))
MODEL = LSAConfig(d_model=5)
CONFIG = TrainConfig(steps=40, batch_size=64, lr=1e-2, grad_clip=None, eval_every=10, checkpoint_every=10)
SEEDS = [0, 3, 7]


class Interrupt(Exception):
    pass


def _params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _models(config: LSAConfig, seeds=SEEDS, dtype=torch.float32) -> list[nn.Module]:
    return [LSAModel(config, seed=s).to(dtype) for s in seeds]


def _eval_rows(model: nn.Module, step: int, seed: int) -> list[dict]:
    """The test loss on one fixed set of tasks, so rows of different runs compare."""
    batch, tokens = TASK.batch_tokens(64, 99, 0, Stream.TEST, dtype=next(model.parameters()).dtype)
    with torch.no_grad():
        return [{"step": step, "seed": seed, "loss": regression_loss(model(tokens), batch.y_query)}]


def _max_rel(a: nn.Module, b: nn.Module) -> float:
    pairs = zip(a.state_dict().values(), b.state_dict().values())
    return max(float((p - q).abs().max() / p.abs().max()) for p, q in pairs)


def test_training_reduces_the_loss_and_records_history():
    (state,) = train([LSAModel(MODEL, seed=0)], TASK, dataclasses.replace(CONFIG, steps=200), [0],
                     evaluate=_eval_rows)
    rows = state.history
    assert [r["step"] for r in rows] == list(range(0, 201, 10))
    assert {r["seed"] for r in rows} == {0}
    assert rows[-1]["loss"] < 0.9 * rows[0]["loss"]  # 200 small steps from the small init: a clear drop


def test_same_seed_same_numbers():
    a, b = LSAModel(MODEL, seed=0), LSAModel(MODEL, seed=0)
    train([a], TASK, CONFIG, [5])
    train([b], TASK, CONFIG, [5])
    assert torch.equal(_params(a), _params(b))
    assert not torch.equal(_params(a), _params(LSAModel(MODEL, seed=0)))  # it did train


@pytest.mark.parametrize("seeds", [[1], SEEDS], ids=["lone", "batched"])
def test_interrupted_run_resumes_to_the_same_numbers(tmp_path, seeds):
    def rows(m, step, seed):
        return [{"step": step, "seed": seed, "p": _params(m).sum().item()}]

    reference = _models(MODEL, seeds)
    ref_states = train(reference, TASK, CONFIG, seeds, evaluate=rows)

    path = tmp_path / "ckpt.pt"
    fp = config_fingerprint(MODEL, CONFIG)

    def crash_at_30(m, step, seed):
        if step == 30:
            raise Interrupt
        return rows(m, step, seed)

    with pytest.raises(Interrupt):
        train(_models(MODEL, seeds), TASK, CONFIG, seeds, evaluate=crash_at_30, checkpoint_path=path,
              fingerprint=fp)
    resumed = [LSAModel(MODEL, seed=100 + i) for i in range(len(seeds))]  # everything comes from the checkpoint
    states = train(resumed, TASK, CONFIG, seeds, evaluate=rows, checkpoint_path=path, fingerprint=fp)
    for a, b in zip(resumed, reference):
        assert torch.equal(_params(a), _params(b))
    assert [s.history for s in states] == [s.history for s in ref_states]
    assert all(s.step == CONFIG.steps for s in states)


@pytest.mark.parametrize("fingerprint,seeds", [("b", SEEDS), ("a", [0, 3]), ("a", [0])],
                         ids=["other-settings", "other-seed-count", "lone"])
def test_checkpoint_from_other_settings_is_not_resumed(tmp_path, fingerprint, seeds):
    path = tmp_path / "ckpt.pt"
    train(_models(MODEL), TASK, CONFIG, SEEDS, checkpoint_path=path, fingerprint="a")
    short = dataclasses.replace(CONFIG, steps=10)
    fresh = _models(MODEL, seeds)
    with pytest.warns(ICLGDNotice, match="ckpt.pt belongs to other settings; moved to ckpt.pt.stale"):
        states = train(fresh, TASK, short, seeds, checkpoint_path=path, fingerprint=fingerprint)
    assert [s.step for s in states] == [10] * len(seeds)  # a resumed 40-step checkpoint would say 40
    assert (tmp_path / "ckpt.pt.stale").exists()
    restarted = _models(MODEL, seeds)
    train(restarted, TASK, short, seeds)
    assert all(torch.equal(_params(a), _params(b)) for a, b in zip(fresh, restarted))


@pytest.mark.parametrize("damage", ["truncated", "empty", "not-a-checkpoint"])
def test_damaged_checkpoint_is_set_aside_with_a_notice_and_the_run_starts_afresh(tmp_path, damage):
    path = tmp_path / "seed0.pt"
    train(_models(MODEL, [0]), TASK, CONFIG, [0], checkpoint_path=path, fingerprint="a")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        torch.save({"step": 3}, path)
    model = _models(MODEL, [0])
    with pytest.warns(ICLGDNotice, match="seed0.pt is unreadable"):
        states = train(model, TASK, CONFIG, [0], checkpoint_path=path, fingerprint="a")
    assert states[0].step == CONFIG.steps and (tmp_path / "seed0.pt.corrupt").exists()
    fresh = _models(MODEL, [0])
    train(fresh, TASK, CONFIG, [0])
    assert torch.equal(_params(model[0]), _params(fresh[0]))  # the same numbers as a run that never had one
    train(_models(MODEL, [0]), TASK, CONFIG, [0], checkpoint_path=path, fingerprint="a")  # the new one is good


def test_lone_divergence_raises_a_clear_error():
    config = dataclasses.replace(CONFIG, lr=1e6, steps=50)
    with pytest.raises(DivergenceError, match=r"diverged at step \d+ for seed\(s\) \[0\]"):
        train([LSAModel(LSAConfig(d_model=5, init_scale=1.0), seed=0)], TASK, config, [0])


def test_batched_divergence_names_the_seed():
    models = _models(LSAConfig(d_model=5, n_layers=3))
    with torch.no_grad():
        for p in models[1].parameters():
            p.mul_(1e30)  # seed 3 overflows at once: its initial loss, before any update
    config = authors_train_config(3, False, steps=2, batch_size=16, eval_every=1, grad_clip=None)
    with pytest.raises(DivergenceError, match=r"diverged at step 0 for seed\(s\) \[3\] \(loss \[nan\]\), before any "
                                              r"update: the model's initial settings"):
        train(models, TASK, config, SEEDS)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-11), (torch.float32, 1e-4)])
@pytest.mark.parametrize("config,grad_clip", [(LSAConfig(d_model=5), 1e-5),
                                              (LSAConfig(d_model=5, n_layers=2, recurrent=True), 1e-5),
                                              (LSAConfig(d_model=5, n_layers=3), 1e-5),
                                              (LSAConfig(d_model=5, n_layers=3, n_heads=2, clip_activations=10.0),
                                               None)], ids=["single", "recurrent2", "separate3", "separate3-heads"])
def test_each_batched_seed_equals_its_lone_run(dtype, tol, config, grad_clip):
    """Same batches, same per-seed clipping (1e-5 clips every step here: each seed by its own norm), same AdamW.
    The single layer trains through its own fast path (the y slot through C) inside the vmapped ensemble."""
    train_config = authors_train_config(config.n_layers, config.recurrent, steps=12, batch_size=32, eval_every=4,
                                        grad_clip=grad_clip)
    lone = _models(config, dtype=dtype)
    lone_states = [train([m], TASK, train_config, [s], evaluate=_eval_rows)[0] for m, s in zip(lone, SEEDS)]
    batched = _models(config, dtype=dtype)
    states = train(batched, TASK, train_config, SEEDS, evaluate=_eval_rows)
    for seed, a, b, sa, sb in zip(SEEDS, lone, batched, lone_states, states):
        assert _max_rel(a, b) <= tol
        assert [r["step"] for r in sa.history] == [r["step"] for r in sb.history] == [0, 4, 8, 12]
        assert {r["seed"] for r in sb.history} == {seed}
        for ra, rb in zip(sa.history, sb.history):
            assert rb["loss"] == pytest.approx(ra["loss"], rel=tol)  # the row is its own seed's member's
    assert all(_max_rel(a, b) > 1e-3 for a, b in zip(batched, batched[1:]))  # seeds really differ


@pytest.mark.parametrize("seeds", [[1], SEEDS], ids=["lone", "batched"])
def test_evaluation_sees_an_eval_mode_model_and_models_end_trained_in_eval_mode(seeds):
    models = _models(MODEL, seeds)
    before = [_params(m) for m in models]
    seen = []

    def evaluate(model, step, seed):
        seen.append((model, model.training, seed))
        return [{"step": step}]

    train(models, TASK, dataclasses.replace(CONFIG, steps=5, eval_every=5), seeds, evaluate=evaluate)
    assert [(training, seed) for _, training, seed in seen] == [(False, s) for s in seeds] * 2
    if len(seeds) == 1:
        assert all(model is models[0] for model, _, _ in seen)  # the lone model itself
    else:
        assert not any(model is m for model, _, _ in seen for m in models)  # standalone member copies
    assert all(not m.training for m in models)
    assert all(not torch.equal(_params(m), p) for m, p in zip(models, before))


def test_one_model_per_seed():
    with pytest.raises(ConfigError, match="seeds"):
        train(_models(MODEL), TASK, CONFIG, [0, 1])
    with pytest.raises(ConfigError, match="seeds"):
        train([], TASK, CONFIG, [])
    with pytest.raises(ConfigError):
        train([LSAModel(LSAConfig(d_model=5)), LSAModel(LSAConfig(d_model=6))], TASK, CONFIG, [0, 1])


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


@pytest.mark.slow
def test_compiled_step_follows_the_eager_trajectory():
    """compile=true (torch.compile of forward and backward) trains the same model as eager, to float32
    round-off, for a lone run and for seeds in one batch; the first call builds the kernels."""
    model_config = LSAConfig(d_model=5, n_layers=2, recurrent=True, init_scale=0.5)
    config = dataclasses.replace(CONFIG, steps=6, eval_every=6, grad_clip=1.0)
    eager, compiled = LSAModel(model_config, seed=3), LSAModel(model_config, seed=3)
    train([eager], TASK, config, [3])
    train([compiled], TASK, dataclasses.replace(config, compile=True), [3])
    assert not torch.equal(_params(eager), _params(LSAModel(model_config, seed=3)))  # it did train
    torch.testing.assert_close(_params(compiled), _params(eager), rtol=1e-4, atol=1e-6)

    seeds = [3, 4]
    batched = [LSAModel(model_config, seed=s) for s in seeds]
    train(batched, TASK, dataclasses.replace(config, compile=True), seeds)
    torch.testing.assert_close(_params(batched[0]), _params(eager), rtol=1e-4, atol=1e-6)


def test_compile_flag_must_be_a_bool():
    with pytest.raises(ConfigError, match="compile"):
        TrainConfig(compile="yes")
