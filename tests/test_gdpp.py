"""GD++: the LSA construction against the algorithm (float64 exact, float32 close), γ = 0 is GD, tuning."""

import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from icl_gd.constructions.gdpp import (IDENTITY_CHECKS, check_gamma_zero_is_gd, check_k_steps, check_one_step,
                                gdpp_model, gdpp_step_weights)
from icl_gd.constructions.verify import all_checks
from icl_gd.regression.baselines import GDPPPredictor, GDPredictor
from icl_gd.core.errors import ConfigError
from icl_gd.regression.gd import (GDPPParams, gd_predictions_per_step, gdpp_loss, gdpp_params_from_weights, gdpp_predict,
                                  gdpp_predictions_per_step)
from icl_gd.regression.tuning import tune_gd, tune_gdpp
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatLayout


@settings(max_examples=30, deadline=None)
@given(d_x=st.integers(1, 14), d_y=st.integers(1, 5), n=st.integers(1, 30), eta=st.floats(0.0, 3.0),
       gamma=st.floats(-0.5, 0.5), with_W0=st.booleans(), heads=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_gdpp_layer_is_one_gdpp_step_float64(d_x, d_y, n, eta, gamma, with_W0, heads, seed):
    result = check_one_step(d_x, d_y, n, 4, eta, gamma / n, with_W0, seed, n_heads=heads)
    assert result.max_rel_error <= 1e-12, result


@settings(max_examples=20, deadline=None)
@given(d_x=st.integers(1, 10), d_y=st.integers(1, 4), n=st.integers(2, 30),
       steps=st.lists(st.tuples(st.floats(0.05, 2.0), st.floats(-0.3, 0.3)), min_size=1, max_size=6),
       recurrent=st.booleans(), with_W0=st.booleans(), seed=st.integers(0, 10_000))
def test_k_layers_are_k_gdpp_steps_float64(d_x, d_y, n, steps, recurrent, with_W0, seed):
    if recurrent:
        steps = [steps[0]] * len(steps)
    etas, gammas = [e for e, _ in steps], [g / n for _, g in steps]
    result = check_k_steps(d_x, d_y, n, 8, etas, gammas, recurrent=recurrent, with_W0=with_W0, seed=seed)
    assert result.max_rel_error <= 1e-12, result


@settings(max_examples=15, deadline=None)
@given(d_x=st.integers(1, 10), d_y=st.integers(1, 4), n=st.integers(2, 30),
       etas=st.lists(st.floats(0.05, 2.0), min_size=1, max_size=5), with_W0=st.booleans(), seed=st.integers(0, 999))
def test_gdpp_with_gamma_zero_is_gd(d_x, d_y, n, etas, with_W0, seed):
    result = check_gamma_zero_is_gd(d_x, d_y, n, 8, etas, with_W0, seed)
    assert result.max_rel_error <= 1e-12, result


def test_gdpp_float32_close_to_float64_algorithm():
    task = LinearRegressionTask()
    data = task.sample(256, seed=1, stream=Stream.TEST, dtype=torch.float64)
    etas, gammas = [13.0, 13.0, 13.0], [0.18, 0.18, 0.18]
    tokens = ConcatLayout(10).tokens(data).float()
    got = gdpp_model(10, 1, 10, etas, gammas, recurrent=True, dtype=torch.float32)(tokens)
    want = gdpp_predict(data.x_context, data.y_context, data.x_query, etas, gammas)
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5)


def test_check_detects_a_wrong_gamma():
    """The identity check is not vacuous: a construction with γ against the algorithm with another γ fails."""
    task = LinearRegressionTask()
    data = task.sample(64, seed=2, stream=Stream.TEST, dtype=torch.float64)
    tokens = ConcatLayout(10).tokens(data)
    got = gdpp_model(10, 1, 10, [6.0, 6.0], [0.1, 0.1])(tokens)
    right = gdpp_predict(data.x_context, data.y_context, data.x_query, [6.0, 6.0], [0.1, 0.1])
    wrong = gdpp_predict(data.x_context, data.y_context, data.x_query, [6.0, 6.0], [0.11, 0.11])
    assert torch.allclose(got, right, rtol=1e-12, atol=1e-14)
    assert (got - wrong).abs().max() > 1e-4


def test_gdpp_transforms_every_input_including_the_query():
    """After one layer the x slots (context and query) are (I - γ X Xᵀ) x; γ = 0 leaves them unchanged."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randn(3, 6, 5, generator=gen, dtype=torch.float64)
    model = gdpp_model(4, 1, 5, [0.7], [0.2])
    _, states = model(tokens, return_tokens=True)
    X = tokens[:, :-1, :4]  # (B, N, d)
    want = tokens[..., :4] - 0.2 * tokens[..., :4] @ (X.transpose(1, 2) @ X)
    assert torch.allclose(states[1][..., :4], want, rtol=1e-12, atol=1e-13)
    _, states = gdpp_model(4, 1, 5, [0.7], [0.0])(tokens, return_tokens=True)
    assert torch.equal(states[1][..., :4], tokens[..., :4])


def test_registered_in_verify():
    names = [c.name for c in all_checks()]
    assert all(c.name in names for c in IDENTITY_CHECKS)
    for check in IDENTITY_CHECKS:
        result = check.run()
        assert result.passed, (check.name, result)


def _two_gdpp_steps_by_hand(x, y, x_query, etas, gammas, W0):
    """[ŷ_0, ŷ_1, ŷ_2] of two GD++ steps written out with einsum: ΔW = (η/N) Σ_i (r_i - W0 x_i) x_iᵀ, then every
    input (the query's too) x <- x - γ Σ_j x_j x_jᵀ x and every residual r_i <- r_i - ΔW x_i."""
    N = x.shape[1]
    predictions = [torch.einsum("od,bd->bo", W0, x_query)]
    r = y
    for eta, gamma in zip(etas, gammas):
        delta = eta / N * torch.einsum("bno,bnd->bod", r - torch.einsum("od,bnd->bno", W0, x), x)
        predictions.append(predictions[-1] + torch.einsum("bod,bd->bo", delta, x_query))
        r = r - torch.einsum("bod,bnd->bno", delta, x)
        x, x_query = (v - gamma * torch.einsum("bjd,bje,b...e->b...d", x, x, v) for v in (x, x_query))
    return torch.stack(predictions)


def test_predictor_is_gdpp_written_out_and_reads_any_layout():
    """GDPPPredictor's per-step predictions against GD++ written with einsum, from W0, on concatenated tokens;
    on separate tokens it agrees with itself on the concatenated ones (the layout only changes the read-back)."""
    from icl_gd.regression.separate.tokens import SeparateLayout

    task = LinearRegressionTask(d=5, n_context=7, d_y=2)
    data = task.sample(16, seed=3, dtype=torch.float64)
    params = GDPPParams((0.5, 0.8), (0.05, 0.02))
    W0 = torch.randn(2, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.3
    predictor = GDPPPredictor(ConcatLayout(5, 2), params, W0)
    tokens = ConcatLayout(5, 2).tokens(data)
    want = _two_gdpp_steps_by_hand(data.x_context, data.y_context, data.x_query, params.etas, params.gammas, W0)
    torch.testing.assert_close(predictor.predictions_per_step(tokens), want, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(predictor(tokens), want[-1], rtol=1e-12, atol=1e-14)
    separate = SeparateLayout(5, 2, 7)
    on_separate = GDPPPredictor(separate, params, W0).predictions_per_step(separate.tokens(data))
    torch.testing.assert_close(on_separate, want, rtol=1e-12, atol=1e-14)


def test_tuning_gdpp_beats_gd_and_per_step_gd_beats_shared():
    task = LinearRegressionTask()
    tune = task.sample(1024, seed=0, stream=Stream.TUNE, dtype=torch.float64)
    test = task.sample(2048, seed=0, stream=Stream.TEST, dtype=torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, 2)
    gd_shared, gd_steps = tune_gd(*args, shared=True), tune_gd(*args, shared=False)
    gdpp = tune_gdpp(*args, shared=True, start=gd_shared)
    assert len(set(gd_shared.etas)) == 1 and gd_shared.gammas == (0.0, 0.0)
    assert len(set(gdpp.etas)) == 1 and len(set(gdpp.gammas)) == 1
    test_args = (test.x_context, test.y_context, test.x_query, test.y_query)
    loss = {name: gdpp_loss(*test_args, p) for name, p in
            (("gd", gd_shared), ("gd_steps", gd_steps), ("gdpp", gdpp))}
    assert loss["gd_steps"] < loss["gd"]
    assert loss["gdpp"] < 0.85 * loss["gd"]  # a curvature correction, not a rounding-level gain
    assert gdpp.gammas[0] > 0


def test_read_back_from_constructed_weights():
    w = gdpp_step_weights(10, 1, 10, eta=13.5, gamma=0.18)
    assert gdpp_params_from_weights(w, 10, 1, 10) == pytest.approx((13.5, 0.18), rel=1e-12)


def test_bad_inputs_raise_config_error():
    x, y, xq = torch.zeros(2, 3, 4), torch.zeros(2, 3, 1), torch.zeros(2, 4)
    with pytest.raises(ConfigError):
        gdpp_predict(x, y, xq, [0.1, 0.2], [0.0])
    with pytest.raises(ConfigError):
        gdpp_predict(x, y, xq, [], [])
    with pytest.raises(ConfigError):
        GDPPParams((1.0,), (0.1, 0.2))
    with pytest.raises(ConfigError):
        tune_gdpp(x, y, xq, torch.zeros(2, 1), 0)
    with pytest.raises(ConfigError):
        gdpp_model(4, 1, 3, [0.1, 0.2], [0.0, 0.1], recurrent=True)
    with pytest.raises(ConfigError):
        gdpp_step_weights(4, 1, 3, 0.1, 0.1, W0=torch.zeros(2, 4))


def test_gdpp_gamma_zero_matches_gd_on_multi_output_float32():
    task = LinearRegressionTask(d=6, n_context=9, d_y=3)
    data = task.sample(32, seed=5, dtype=torch.float32)
    a = gdpp_predictions_per_step(data.x_context, data.y_context, data.x_query, [0.5, 0.9], [0.0, 0.0])
    b = gd_predictions_per_step(data.x_context, data.y_context, data.x_query, [0.5, 0.9])
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_reference_predictors_compute_in_float64_for_float32_tokens():
    """GD and GD++ references on float32 tokens equal a float64 computation on the same tokens (cast back): the
    GD++ constructed model run in float64 and GD written with einsum, here at large tuned per-step parameters
    (K = 4) where round-off grows with η, so that the same algorithm computed in float32 is visibly off."""
    task = LinearRegressionTask()
    batch = task.sample(2000, 7, 0, Stream.TEST, "cpu", torch.float32)
    layout = ConcatLayout(task.d)
    tokens = layout.tokens(batch)
    params = GDPPParams((2.6, 663.7, 172.1, 265.8), (0.352, 1.498, 3.899, 0.0))  # K = 4, tuned per step
    got = GDPPPredictor(layout, params)(tokens)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    with torch.no_grad():
        want = gdpp_model(10, 1, 10, params.etas, params.gammas)(tokens.double()).float()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    in_float32 = gdpp_predict(*layout.split(tokens), params.etas, params.gammas)
    assert ((in_float32 - want).abs() / want.abs()).max() > 1e-5
    gd = GDPredictor(layout, [6.0, 3.0])(tokens)
    assert gd.dtype == torch.float32
    x, y, xq = (t.double() for t in layout.split(tokens))
    want = _two_gdpp_steps_by_hand(x, y, xq, (6.0, 3.0), (0.0, 0.0), torch.zeros(1, 10, dtype=torch.float64))
    torch.testing.assert_close(gd, want[-1].float(), rtol=1e-6, atol=0)


# Three K = 3 per-step schedules for the 1000 tuning tasks below, as this machine's tuners found them: tuned GD, the
# loss-optimal GD++ schedule the unguarded tuner found (at the edge of stability) and the one the guarded tuner kept.
# Fixed here so that the guard is tested wherever L-BFGS happens to land on another CPU.
GD3 = GDPPParams((3.5620717253970966, 5.811357656543502, 18.894519253080013), (0.0, 0.0, 0.0))
EDGE3 = GDPPParams((4.103293484915214, 149.45430230326778, 78.36989415748623),
                   (0.35930826135724625, 1.1028939689542057, 0.0))
STABLE3 = GDPPParams((20.683439469678166, 86.41441625569506, 30.63409093930134),
                     (0.17284794682787416, 0.4488682075667946, 0.0))


def test_stability_guard_keeps_per_step_gdpp_from_blowing_up_on_unseen_tasks(monkeypatch):
    """At K = 3 separate steps the loss-optimal schedule sits at the edge of stability: on the tuning tasks with
    inputs 12% larger (eigenvalues of X Xᵀ times 1.25) it is far worse than GD, and on a larger task set, which
    reaches larger eigenvalues, it is worse than GD. Among the same candidates the unguarded tuner takes it, the
    guarded one keeps a schedule that is no worse than GD on the stretched tasks and beats GD on the larger set."""
    tuner = sys.modules[tune_gdpp.__module__]  # where tune_gdpp looks its candidates up

    task = LinearRegressionTask()
    tune = task.sample(1000, seed=0, stream=Stream.TUNE, dtype=torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, 3)
    stretched = tuple(t * 1.25 ** 0.5 for t in args[:4])
    loss = {name: gdpp_loss(*args[:4], p) for name, p in (("gd", GD3), ("edge", EDGE3), ("stable", STABLE3))}
    assert loss["edge"] < loss["stable"] < loss["gd"]
    ratio = {name: gdpp_loss(*stretched, p) / gdpp_loss(*stretched, GD3) for name, p in (("edge", EDGE3),
                                                                                           ("stable", STABLE3))}
    assert ratio["stable"] <= 1 and ratio["edge"] > 100
    monkeypatch.setattr(tuner, "_gdpp_candidates", lambda *a, **k: [GD3, EDGE3, STABLE3])  # what L-BFGS found
    assert tune_gdpp(*args, shared=False, start=GD3, stretch=None) == EDGE3
    assert tune_gdpp(*args, shared=False, start=GD3) == STABLE3
    test = task.sample(20_000, seed=0, stream=Stream.TEST, dtype=torch.float64)
    s_max = {name: float(torch.linalg.eigvalsh(t.x_context.transpose(1, 2) @ t.x_context).max())
             for name, t in (("tune", tune), ("test", test))}
    assert s_max["test"] > s_max["tune"]
    loss = {name: gdpp_loss(test.x_context, test.y_context, test.x_query, test.y_query, p)
            for name, p in (("gd", GD3), ("edge", EDGE3), ("stable", STABLE3))}
    assert loss["stable"] < 0.7 * loss["gd"] < loss["edge"]


def test_stability_guard_settings_are_checked():
    x, y, xq, yq = torch.ones(2, 3, 4), torch.ones(2, 3, 1), torch.ones(2, 4), torch.ones(2, 1)
    for bad in ({"stretch": 1.0}, {"stretch": 0.5}, {"stretch": float("inf")}, {"stretch": float("nan")},
                {"tolerance": 0.5}, {"tolerance": float("inf")}):
        with pytest.raises(ConfigError):
            tune_gdpp(x, y, xq, yq, 1, start=GDPPParams((0.1,), (0.0,)), **bad)


def test_extra_starts_are_candidates_and_lbfgs_starts_under_the_guard():
    """With no γ starts the tuner can only return its start (tuned GD); an extra start (a GD++ schedule such as
    one read off a trained model) must then be used: catches ``extra_starts`` being ignored. A wrong-length
    extra start is a ConfigError."""
    task = LinearRegressionTask()
    tune = task.sample(1024, seed=0, stream=Stream.TUNE, dtype=torch.float64)
    args = (tune.x_context, tune.y_context, tune.x_query, tune.y_query, 2)
    gd = tune_gd(*args, shared=True)
    alone = tune_gdpp(*args, shared=True, start=gd, gamma_starts=())
    assert alone == gd
    extra = GDPPParams((gd.etas[0],) * 2, (0.1,) * 2)
    found = tune_gdpp(*args, shared=True, start=gd, gamma_starts=(), extra_starts=[extra])
    loss = {name: gdpp_loss(*args[:4], p) for name, p in (("gd", gd), ("extra", extra), ("found", found))}
    assert loss["found"] <= loss["extra"] and loss["found"] < 0.9 * loss["gd"] and found.gammas[0] > 0
    with pytest.raises(ConfigError):
        tune_gdpp(*args, shared=True, start=gd, extra_starts=[GDPPParams((1.0,), (0.0,))])
