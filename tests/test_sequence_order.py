"""Order sensitivity in a sequence (``icl_gd.regression.sequence.order``): every model and referee reads a sequence
as its pairs exactly as it reads the sequence, a permutation moves whole pairs and keeps the query last, a batch
fit (ridge, least squares, GD from W0, one causal LSA layer, the mesa layer) does not move while online GD and a
deeper stack do, and bad input is a ConfigError."""

from __future__ import annotations

import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.sequence.layers import previous_states
from icl_gd.regression.sequence.models import CausalLSAStack, CausalMesaModel, SoftmaxTransformer
from icl_gd.regression.sequence.order import order_sensitivity, permuted_pairs
from icl_gd.regression.sequence.referees import GDReferee, OnlineGDReferee, RidgeReferee
from icl_gd.regression.sequence.tasks import LinearDynamicsTask
from icl_gd.regression.tasks import Stream

F64 = torch.float64


def _sequences(seed: int, B: int = 16, T: int = 11, d: int = 3, dtype: torch.dtype = F64) -> torch.Tensor:
    task = LinearDynamicsTask(d_s=d, length=T)
    return task.sample(B, seed, 0, Stream.TEST, dtype=dtype).inputs


def _W0(d: int, seed: int) -> torch.Tensor:
    return 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _referees(d: int, seed: int) -> dict[str, torch.nn.Module]:
    return {"ridge": RidgeReferee(1e-3), "least_squares": RidgeReferee(0.0), "gd": GDReferee(0.1, _W0(d, seed)),
            "gd_3": GDReferee(0.05, _W0(d, seed), steps=3), "online_gd": OnlineGDReferee(0.2)}


def _models(d: int, seed: int) -> dict[str, torch.nn.Module]:
    models = {"lsa1": CausalLSAStack(d, 1, 1, 3 * d, seed, 0.5), "lsa2": CausalLSAStack(d, 2, 2, 4, seed, 0.5),
              "mesa": CausalMesaModel(d, 4, seed, init_scale=0.5), "softmax": SoftmaxTransformer(d, 8, 2, 2, seed)}
    with torch.no_grad():  # a start A that is not zero, so that it enters every comparison
        for model in models.values():
            if getattr(model, "A", None) is not None:
                model.A.copy_(0.2 * torch.randn(d, d, generator=torch.Generator().manual_seed(seed + 1)))
    return {name: model.double().eval() for name, model in models.items()}


@pytest.mark.parametrize("seed,T,d", [(0, 7, 2), (1, 12, 4), (2, 5, 3)])
def test_a_referee_reads_a_sequences_own_pairs_as_it_reads_the_sequence(seed, T, d):
    inputs = _sequences(seed, T=T, d=d)
    for name, referee in _referees(d, seed).items():
        expected = referee(inputs)
        # least squares at λ = 0 is a pseudo-inverse of a matrix with one more zero row: equal to its conditioning
        tol = 1e-9 if name == "least_squares" else 1e-12
        torch.testing.assert_close(referee.from_pairs(inputs, previous_states(inputs)), expected, rtol=tol,
                                   atol=tol * float(expected.abs().max()), msg=name)


@pytest.mark.parametrize("seed,T,d", [(0, 7, 2), (1, 12, 4)])
def test_a_model_reads_a_sequences_own_pairs_as_it_reads_the_sequence(seed, T, d):
    inputs = _sequences(seed, T=T, d=d)
    with torch.no_grad():
        for name, model in _models(d, seed).items():
            expected = model(inputs)
            torch.testing.assert_close(model.from_pairs(inputs, previous_states(inputs)), expected, rtol=1e-12,
                                       atol=1e-14, msg=name)


def test_a_permutation_moves_whole_pairs_and_keeps_the_last_position():
    inputs = _sequences(3, B=5, T=9, d=2)
    previous = previous_states(inputs)
    current_p, previous_p = permuted_pairs(inputs, previous, torch.Generator().manual_seed(0))
    torch.testing.assert_close(current_p[:, -1], inputs[:, -1], rtol=0, atol=0)
    torch.testing.assert_close(previous_p[:, -1], previous[:, -1], rtol=0, atol=0)
    moved = 0
    for b in range(inputs.shape[0]):
        pairs = {tuple(torch.cat([c, p]).tolist()) for c, p in zip(inputs[b, :-1], previous[b, :-1])}
        permuted = [tuple(torch.cat([c, p]).tolist()) for c, p in zip(current_p[b, :-1], previous_p[b, :-1])]
        assert sorted(permuted) == sorted(pairs)  # the same pairs, each whole
        moved += int(not torch.equal(current_p[b], inputs[b]))
    assert moved >= 4  # each sequence draws its own order: at most one of five left as it was by chance


def test_batch_fits_do_not_move_and_online_learners_and_deeper_stacks_do():
    inputs = _sequences(4, B=32, T=12, d=3)
    sensitivity = {name: order_sensitivity(m.from_pairs, inputs, 3, 0)
                   for name, m in {**_referees(3, 4), **_models(3, 4)}.items()}
    for name in ("ridge", "least_squares", "gd", "gd_3", "lsa1", "mesa"):
        assert sensitivity[name] < 1e-11, (name, sensitivity[name])
    for name in ("online_gd", "lsa2", "softmax"):
        assert sensitivity[name] > 1e-3, (name, sensitivity[name])


def test_order_sensitivity_in_float32_is_round_off_for_a_batch_fit():
    inputs = _sequences(5, B=32, T=12, d=3, dtype=torch.float32)
    lsa1 = CausalLSAStack(3, 1, 1, 9, 5, 0.5).eval()
    assert order_sensitivity(lsa1.from_pairs, inputs, 3, 0) < 1e-5
    assert order_sensitivity(OnlineGDReferee(0.2).from_pairs, inputs, 3, 0) > 1e-3


def test_the_same_seed_draws_the_same_orders_and_another_seed_others():
    inputs = _sequences(6, B=16, T=10, d=3)
    online = OnlineGDReferee(0.2).from_pairs
    assert order_sensitivity(online, inputs, 2, 7) == order_sensitivity(online, inputs, 2, 7)
    assert order_sensitivity(online, inputs, 2, 7) != order_sensitivity(online, inputs, 2, 8)


@pytest.mark.parametrize("call", [
    lambda x: order_sensitivity(RidgeReferee().from_pairs, x[:, :2], 2, 0),  # no two pairs to swap before the last
    lambda x: order_sensitivity(RidgeReferee().from_pairs, x, 0, 0),
    lambda x: order_sensitivity(RidgeReferee().from_pairs, x[0], 2, 0),
    lambda x: RidgeReferee(history=2).from_pairs(x, previous_states(x)),
    lambda x: OnlineGDReferee(0.1).from_pairs(x, previous_states(x)[:, :-1]),
    lambda x: order_sensitivity(lambda c, p: torch.full_like(c, float("nan")), x, 2, 0),
])
def test_bad_input_is_a_config_error(call):
    with pytest.raises(ConfigError):
        call(_sequences(0, B=4, T=6, d=2))
