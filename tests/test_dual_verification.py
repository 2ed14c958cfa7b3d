"""The recorded dual form equals the trained network: exact in float64 for SGD, reported residual for Adam."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from icl_gd.constructions.dual_form import DualCase, train_recorded, verify_run
from icl_gd.dual.recorder import DualRecorder, Provenance, RecordedLayer
from icl_gd.dual.store_reader import open_store
from icl_gd.dual.layer import dual_layer, step_coefficients
from icl_gd.dual.verification import rebuild_and_outputs, verify_layer
from icl_gd.core.errors import ConfigError, VerificationError
from oracles import dual_outputs, rebuild_weights

EXACT = 1e-10

CASES = {
    "heavy-ball+decay+clip+schedule, mean": DualCase(),
    "nesterov+decay+clip+schedule, mean": DualCase(nesterov=True, seed=1),
    "heavy-ball+dampening, sum, no bias": DualCase(dampening=0.3, reduction="sum", bias=False, lr=0.02, seed=2),
    "nesterov, sum": DualCase(nesterov=True, reduction="sum", lr=0.02, clip_norm=1.0, seed=4),
    "plain SGD+decay, no clip": DualCase(momentum=0.0, clip_norm=None, seed=3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sgd_dual_form_is_exact_in_float64(tmp_path, name):
    case = CASES[name]
    run = train_recorded(case, tmp_path)
    results = verify_run(run)
    assert [r.layer for r in results] == ["input", "hidden", "output"]
    for r in results:
        assert r.exact
        assert r.weight_max_rel_error <= EXACT, (r.layer, r.weight_max_rel_error)
        assert r.output_max_rel_error <= EXACT, (r.layer, r.output_max_rel_error)
        assert r.max_unexplained_share <= 1e-9
    steps = run.store["output"].table("steps")
    if case.clip_norm is not None and case.clip_norm < 1:
        assert steps.column("w_scale").min() < 0.9  # clipping really happened and was accounted for
    assert run.store["hidden"].info["max_gradient_residual"] < 1e-12
    assert run.store["input"].info["n_steps"] == case.epochs * (case.n_examples // case.batch_size)


def test_float32_training_float32_keys(tmp_path):
    run = train_recorded(DualCase(dtype=torch.float32), tmp_path, key_dtype="float32")
    for r in verify_run(run):
        assert r.max_rel_error < 1e-5, (r.layer, r.max_rel_error)
        assert r.max_rel_error > 0


def test_float16_keys_are_approximate_but_close(tmp_path):
    run = train_recorded(DualCase(), tmp_path, key_dtype="float16")
    assert run.store["hidden"].table("rows").column("key").dtype == np.float16
    for r in verify_run(run):
        assert 0 < r.max_rel_error < 5e-3


def test_adam_residual_is_reported(tmp_path):
    run = train_recorded(DualCase(optimizer="adam"), tmp_path)
    for r in verify_run(run):
        assert not r.exact
        assert r.weight_max_rel_error > 1e-3
        assert r.unexplained_share.shape == (run.store[r.layer].info["out_features"],)
        assert 0.01 < r.max_unexplained_share < 10
    kinds = run.store["output"].table("steps").column("w_kind")
    assert set(kinds.tolist()) == {1.0}


def test_compressed_layer_compact_equals_per_unit_sum(tmp_path):
    run = train_recorded(DualCase(), tmp_path)
    layer = dual_layer(run.store["input"])
    assert run.store["input"].table("keys").rows == DualCase().n_examples  # one key per example
    assert run.store["input"].table("rows").rows == DualCase().n_examples * DualCase().epochs
    W_compact, b_compact = rebuild_weights(layer, compact=True)
    W_units, b_units = rebuild_weights(layer, compact=False)
    np.testing.assert_allclose(W_compact, W_units, rtol=0, atol=1e-13)
    np.testing.assert_allclose(b_compact, b_units, rtol=0, atol=1e-13)
    np.testing.assert_allclose(W_compact, run.modules[0].weight.detach().numpy(), rtol=0, atol=1e-13)


def test_one_pass_verification_gives_the_bits_of_the_separate_passes(tmp_path):
    """verify_layer's single pass over the units must reproduce rebuild_weights and dual_outputs bit for bit
    (a different product or summation order would move the reported errors), and example_values must add each
    example's values in row order as np.add.at does. Small blocks: every layer spans several blocks."""
    run = train_recorded(DualCase(), tmp_path, key_dtype="float16")
    batch = run.dual_form().inputs(run.inputs[:5], readouts=False)
    for name, q in zip(("input", "hidden", "output"), (batch.query(n) for n in ("input", "hidden", "output"))):
        layer = dual_layer(run.store[name])
        W, b, out = rebuild_and_outputs(layer, q, block_rows=7)
        W_ref, b_ref = rebuild_weights(layer, block_rows=7)
        assert np.array_equal(W, W_ref) and np.array_equal(b, b_ref), name
        assert np.array_equal(out, dual_outputs(layer, q, block_rows=7)), name
    layer = dual_layer(run.store["input"])
    ids, values, bias_values = layer.example_values(block_rows=7)
    expected, expected_bias = np.zeros_like(values), np.zeros_like(bias_values)
    for block in layer.blocks(block_rows=7):
        pos = np.searchsorted(ids, block.example)
        np.add.at(expected, pos, block.value)
        np.add.at(expected_bias, pos, block.bias_value)
    assert np.array_equal(values, expected) and np.array_equal(bias_values, expected_bias)


def test_intermediate_steps_and_unstepped_rows(tmp_path):
    """Verify at every step t with the weights saved at t; a backward without a step does not count."""
    g = torch.Generator().manual_seed(5)
    model = nn.Linear(4, 3).double()
    x = torch.randn(20, 4, generator=g, dtype=torch.float64)
    y = torch.randn(20, 3, generator=g, dtype=torch.float64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1 + t))
    recorder = DualRecorder([RecordedLayer("fc", model)], opt, tmp_path, key_dtype="float64")
    snapshots = [(model.weight.detach().clone(), model.bias.detach().clone())]
    for step in range(6):
        ids = torch.arange(step * 3, step * 3 + 5) % 20
        opt.zero_grad()
        with recorder.batch(Provenance(ids, torch.zeros(5, dtype=torch.int64), task=0, epoch=0)):
            ((model(x[ids]) - y[ids]) ** 2).sum().backward()
        opt.step()
        sched.step()
        snapshots.append((model.weight.detach().clone(), model.bias.detach().clone()))
    with recorder.batch(Provenance(torch.arange(3), torch.zeros(3, dtype=torch.int64), task=0, epoch=0)):
        model(x[:3]).sum().backward()  # recorded rows with no optimizer step after them
    recorder.close()
    store = open_store(tmp_path)["fc"]
    assert store.table("rows").rows == 33
    for t, (W, b) in enumerate(snapshots):
        result = verify_layer(dual_layer(store, upto=t), x.numpy(), W.numpy(), b.numpy())
        assert result.max_rel_error <= EXACT, (t, result.max_rel_error)
    with pytest.raises(ConfigError, match="upto=7"):
        dual_layer(store, upto=7)


def test_step_coefficients_closed_form_plain_sgd(tmp_path):
    """Without momentum, c_s = -η_s Π_{t>s} (1 - η_t λ) and a = Π_t (1 - η_t λ)."""
    run = train_recorded(DualCase(momentum=0.0, clip_norm=None, epochs=2), tmp_path)
    steps = run.store["output"].table("steps")
    a, c = step_coefficients(steps, "w")
    eta = steps.column("w_lr")
    lam = DualCase().weight_decay
    decay = 1 - eta * lam
    expected = np.array([-eta[s] * np.prod(decay[s + 1:]) for s in range(len(eta))])
    np.testing.assert_allclose(c, expected, rtol=1e-14)
    assert a == pytest.approx(np.prod(decay), rel=1e-14)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    momentum=st.sampled_from([0.0, 0.5, 0.95]),
    dampening=st.sampled_from([0.0, 0.4]),
    nesterov=st.booleans(),
    weight_decay=st.sampled_from([0.0, 0.1]),
    clip=st.sampled_from([None, 0.2]),
    reduction=st.sampled_from(["mean", "sum"]),
    seed=st.integers(0, 1000),
)
def test_property_any_sgd_setting_is_exact(tmp_path_factory, momentum, dampening, nesterov, weight_decay, clip,
                                           reduction, seed):
    if nesterov and (momentum == 0 or dampening != 0):
        nesterov = False  # torch rejects Nesterov without momentum or with dampening
    case = DualCase(momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=weight_decay,
                    clip_norm=clip, reduction=reduction, lr=0.05 if reduction == "sum" else 0.2, seed=seed,
                    epochs=2, n_examples=24, batch_size=8)
    run = train_recorded(case, tmp_path_factory.mktemp("prop"), check_gradients=False)
    assert max(r.max_rel_error for r in verify_run(run)) <= EXACT


def test_dual_outputs_shape_error(tmp_path):
    run = train_recorded(DualCase(epochs=1), tmp_path)
    with pytest.raises(ConfigError, match=r"queries must be \(nq, 6\)"):
        rebuild_and_outputs(dual_layer(run.store["input"]), np.zeros((2, 5)))


def test_recorder_input_errors(tmp_path):
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 2)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ConfigError, match="not nn.Linear"):
        DualRecorder([RecordedLayer("relu", model[1])], opt, tmp_path / "a")
    with pytest.raises(ConfigError, match="unique"):
        DualRecorder([RecordedLayer("x", model[0]), RecordedLayer("x", model[2])], opt, tmp_path / "b")
    with pytest.raises(ConfigError, match="key_dtype='int8'"):
        DualRecorder([RecordedLayer("x", model[0])], opt, tmp_path / "c", key_dtype="int8")
    with pytest.raises(ConfigError, match="at least one layer"):
        DualRecorder([], opt, tmp_path / "d")
    with pytest.raises(ConfigError, match="maximize"):
        DualRecorder([RecordedLayer("x", model[0])], torch.optim.SGD(model.parameters(), lr=0.1, maximize=True),
                     tmp_path / "e")
    recorder = DualRecorder([RecordedLayer("x", model[0])], opt, tmp_path / "f")
    with pytest.raises(ConfigError, match="equal length"):
        with recorder.batch(Provenance(torch.arange(3), torch.arange(2), 0, 0)):
            pass
    with pytest.raises(ConfigError, match="does not match a batch of 4"):
        with recorder.batch(Provenance(torch.arange(4), torch.arange(4), 0, 0)):
            model(torch.zeros(3, 3, dtype=torch.float64))
    model(torch.ones(2, 3, dtype=torch.float64)).sum().backward()  # outside batch(): a gradient, no rows
    with pytest.raises(VerificationError, match="nothing was recorded"):
        opt.step()
    recorder.close()
    with pytest.raises(ConfigError, match="closed"):
        with recorder.batch(Provenance(torch.arange(1), torch.arange(1), 0, 0)):
            pass


def test_changing_key_of_compressed_layer_is_caught(tmp_path):
    model = nn.Linear(3, 2).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = DualRecorder([RecordedLayer("x", model, compress_by_example=True)], opt, tmp_path)
    ids = torch.tensor([0, 1])
    for shift in (0.0, 1.0):
        opt.zero_grad()
        with recorder.batch(Provenance(ids, ids, 0, 0)):
            if shift:
                with pytest.raises(VerificationError, match="key of example 0 changed"):
                    model(torch.ones(2, 3, dtype=torch.float64) + shift).sum().backward()
            else:
                model(torch.ones(2, 3, dtype=torch.float64)).sum().backward()
        opt.step()


def test_check_gradients_exposes_a_layer_used_twice(tmp_path):
    layer = nn.Linear(3, 3).double()
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    recorder = DualRecorder([RecordedLayer("twice", layer)], opt, tmp_path, check_gradients=True)
    x = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with recorder.batch(Provenance(torch.arange(4), torch.arange(4), 0, 0)):
        recorder._provenance = None  # the first application is invisible to the recorder
        h = layer(x)
        recorder._provenance = Provenance(torch.arange(4), torch.arange(4), 0, 0)
        layer(torch.tanh(h)).pow(2).sum().backward()
    opt.step()
    recorder.close()
    assert open_store(tmp_path)["twice"].info["max_gradient_residual"] > 0.01


def test_recorder_does_not_change_training(tmp_path):
    """Same seed, with and without the recorder: bit-identical weights."""
    def train(record: bool):
        case = DualCase(epochs=2)
        if record:
            return train_recorded(case, tmp_path / "rec").model
        g = torch.Generator().manual_seed(case.seed)
        from icl_gd.constructions.dual_form import small_mlp
        x = torch.randn(case.n_examples, case.d_in, generator=g, dtype=case.dtype)
        y = torch.randint(0, case.n_classes, (case.n_examples,), generator=g)
        model = small_mlp(case, g)
        opt = torch.optim.SGD(model.parameters(), lr=case.lr, momentum=case.momentum, weight_decay=case.weight_decay)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=case.schedule_gamma)
        for epoch in range(case.epochs):
            order = torch.randperm(case.n_examples, generator=g)
            for start in range(0, case.n_examples, case.batch_size):
                ids = order[start:start + case.batch_size]
                opt.zero_grad()
                nn.functional.cross_entropy(model(x[ids]), y[ids]).backward()
                nn.utils.clip_grad_norm_(model.parameters(), case.clip_norm)
                opt.step()
                sched.step()
        return model

    for a, b in zip(train(True).parameters(), train(False).parameters()):
        assert torch.equal(a, b)


def test_case_validation():
    with pytest.raises(ConfigError, match="hidden must be a positive integer"):
        DualCase(hidden=0)
    with pytest.raises(ConfigError, match="lr must be positive"):
        DualCase(lr=0.0)
    with pytest.raises(ConfigError, match="momentum must be non-negative"):
        DualCase(momentum=-0.1)
    with pytest.raises(ConfigError, match="clip_norm"):
        dataclasses.replace(DualCase(), clip_norm=0.0)


def test_layer_inputs_are_each_recorded_module_input(tmp_path):
    run = train_recorded(DualCase(epochs=1), tmp_path)
    x = run.inputs[:5]
    batch = run.dual_form().inputs(x, readouts=False)
    inputs = [batch.query(name) for name in ("input", "hidden", "output")]
    assert [q.shape for q in inputs] == [(5, 6), (5, 8), (5, 8)]
    np.testing.assert_array_equal(inputs[0], x.numpy())
    with torch.no_grad():
        hidden = torch.relu(run.modules[0](x))
    np.testing.assert_array_equal(inputs[1], hidden.numpy())
