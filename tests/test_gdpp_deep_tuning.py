"""Deep GD++ references: clipped GD++ against the clipped LSA stack, the authors' GD++ tuning against a matrix-form
re-implementation of their pre_train_gd_hps, and L-BFGS GD++ at depth never falling back to its start."""

import dataclasses
import sys

import pytest
import torch

from icl_gd.constructions.gdpp import gdpp_model
from icl_gd.core.errors import ConfigError, DivergenceError
from icl_gd.regression.baselines import GDPPPredictor
from icl_gd.regression.gd import GDPPParams, gdpp_loss, gdpp_predict
from icl_gd.regression.lsa import LSAModel
from icl_gd.regression.tasks import LinearRegressionTask, Stream
from icl_gd.regression.tokens import ConcatLayout
from icl_gd.regression.tuning import tune_gd, tune_gdpp, tune_gdpp_adam


def _data(n: int, seed: int, d: int = 10, n_context: int = 10, step: int = 0):
    task = LinearRegressionTask(d=d, n_context=n_context)
    b = task.sample(n, seed, step, Stream.TUNE, "cpu", torch.float64)
    return b.x_context, b.y_context, b.x_query, b.y_query


# ---------------------------------------------------------------------------------------------------- clipped GD++
@pytest.mark.parametrize("recurrent", [False, True])
def test_clipped_gdpp_is_the_clipped_lsa_stack_float64(recurrent):
    """GD++ with every token coordinate clamped after each step equals the GD++ construction run as an LSA stack
    with ``clip_activations`` (float64), at step sizes where the clamp binds (and changes the prediction). Catches
    a clamp on the wrong state (not on x, not on the residuals, on ŷ's sign) or before the update."""
    x, y, xq, yq = _data(256, 3)
    K = 4
    params = GDPPParams((30.0,) * K, (1.0,) * K) if recurrent else GDPPParams((60.0, 200.0, 90.0, 40.0),
                                                                            (1.0, 1.5, 2.0, 0.0))
    clip = 0.6
    built = gdpp_model(10, 1, 10, params.etas, params.gammas, recurrent=recurrent, dtype=torch.float64)
    clipped = LSAModel(dataclasses.replace(built.config, clip_activations=clip)).double()
    clipped.load_weights(built.weights())
    layout = ConcatLayout(10)
    tokens = torch.cat([torch.cat([x, y], -1), torch.cat([xq, torch.zeros_like(yq)], -1)[:, None]], 1)
    with torch.no_grad():
        want = clipped(tokens)
        got = gdpp_predict(x, y, xq, params.etas, params.gammas, clip=clip)
        unclipped = gdpp_predict(x, y, xq, params.etas, params.gammas)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert (got - unclipped).abs().max() > 1e-3  # the clamp binds here
    torch.testing.assert_close(GDPPPredictor(layout, params, clip=clip)(tokens), want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # a clip nothing reaches is no clip
        torch.testing.assert_close(gdpp_predict(x, y, xq, params.etas, params.gammas, clip=1e300), unclipped,
                                   rtol=0, atol=0)


def test_clipped_gdpp_bad_settings_raise_config_error():
    x, y, xq, yq = _data(4, 0, d=3, n_context=4)
    with pytest.raises(ConfigError):
        gdpp_predict(x, y, xq, [1.0], [0.1], clip=0.0)
    with pytest.raises(ConfigError):
        gdpp_predict(x, y, xq, [1.0], [0.1], W0=torch.zeros(1, 3), clip=10.0)
    with pytest.raises(ConfigError):
        GDPPPredictor(ConcatLayout(3), GDPPParams((1.0,), (0.1,)), W0=torch.zeros(1, 3), clip=10.0)
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ConfigError):
            tune_gdpp_adam((x, y, xq, yq), lambda step: (x, y, xq, yq), 1, shared=True, adam_steps=0, lr=1e-3,
                           grad_clip=1.0, clip=bad)


# ---------------------------------------------------------------------------------------------------- their tuning
def _their_pre_train_gd_hps(scan, batch, K, shared, steps, lr, grad_clip, clip, scan_etas):
    """The authors' GD++ tuning written as their code computes it, on whole (d+1) x (d+1) matrices: lin_diag weights
    (value I with -1 at y, projection -η/N² I with η/N at y; query = key = the x-block identity), haiku's h @ W,
    the scan's argmin, then Adam on the value and projection matrices with their gradient mask (off-diagonals
    zeroed, the x-block's diagonal set to the mean of the whole x-block) and optax's global-norm clip."""
    x, _, _, _ = scan
    N, d = x.shape[1], x.shape[2]

    def tokens_of(b):
        x, y, xq, yq = b
        return torch.cat([torch.cat([x, y], -1), torch.cat([xq, torch.zeros_like(yq)], -1)[:, None]], 1), yq

    def loss(b, layers):
        h, yq = tokens_of(b)
        for V, P in layers:
            xs = h[..., :d]
            scores = xs @ xs[:, :N].transpose(1, 2)  # (B, N+1, N): query = key = x-block identity
            h = (h + scores @ (h[:, :N] @ V) @ P).clamp(-clip, clip)
        return 0.5 * ((-h[:, -1, -1] - yq[:, 0]) ** 2).mean()

    def lin_diag(eta):
        V = torch.diag(torch.tensor([1.0] * d + [-1.0], dtype=torch.float64))
        P = torch.diag(torch.tensor([-eta / N ** 2] * d + [eta / N], dtype=torch.float64))
        return V, P

    with torch.no_grad():
        losses = [float(loss(scan, [lin_diag(eta)] * K)) for eta in scan_etas]
    eta0 = scan_etas[min(range(len(losses)), key=lambda i: losses[i])]
    n_free = 1 if shared else K
    mats = [m.clone().requires_grad_(True) for _ in range(n_free) for m in lin_diag(eta0)]
    opt = torch.optim.Adam(mats, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    off = ~torch.eye(d + 1, dtype=torch.bool)
    for step in range(steps):
        opt.zero_grad()
        pairs = [(mats[2 * i], mats[2 * i + 1]) for i in range(n_free)]
        loss(batch(step), pairs * K if shared else pairs).backward()
        with torch.no_grad():
            for m in mats:
                g = m.grad
                g[off] = 0.0
                g[:d, :d] = torch.eye(d, dtype=torch.float64) * g[:d, :d].mean()
            norm = float(torch.sqrt(sum((m.grad ** 2).sum() for m in mats)))
            if norm >= grad_clip:
                for m in mats:
                    m.grad.mul_(grad_clip / norm)
        opt.step()
    pairs = [(mats[2 * i].detach(), mats[2 * i + 1].detach()) for i in range(n_free)]
    pairs = pairs * K if shared else pairs
    return GDPPParams(tuple(float(-N * P[d, d] * V[d, d]) for V, P in pairs),
                      tuple(float(-P[0, 0] * V[0, 0]) for V, P in pairs))


@pytest.mark.parametrize("K, shared", [(2, False), (3, True)])
def test_authors_tuning_with_clipping_is_theirs_on_whole_matrices(K, shared):
    """``tune_gdpp_adam`` (four scalars a layer, float64) against their computation on whole matrices, with both
    clips binding (activations at 0.6, the gradient's global norm at 1e-3), d = 3, N = 4: the same (η_k, γ_k) to
    1e-9. Catches the clipping left out of the scan or of Adam's loss, and a gradient mask other than theirs (the
    x-block diagonal's mean, tr/d, instead of the whole block's, tr/d², moves Adam's steps through the clip)."""
    scan = _data(64, 11, d=3, n_context=4)

    def batch(step):
        return _data(32, 12, d=3, n_context=4, step=1 + step)

    settings = dict(adam_steps=25, lr=2e-2, grad_clip=1e-3)
    etas = tuple(1.0 + 0.5 * i for i in range(40))  # the clipped and unclipped scans pick different η here
    got = tune_gdpp_adam(scan, batch, K, shared=shared, scan_etas=etas, clip=0.6, **settings)
    want = _their_pre_train_gd_hps(scan, batch, K, shared, settings["adam_steps"], settings["lr"],
                                   settings["grad_clip"], 0.6, etas)
    assert got.etas == pytest.approx(want.etas, rel=1e-9) and got.gammas == pytest.approx(want.gammas, rel=1e-9)
    unclipped = tune_gdpp_adam(scan, batch, K, shared=shared, scan_etas=etas, **settings)
    assert unclipped.etas != pytest.approx(want.etas, rel=1e-3)  # the clip matters in this set-up


# ---------------------------------------------------------------------------------------------------- L-BFGS at depth
@pytest.mark.slow
def test_lbfgs_gdpp_at_ten_recurrent_steps_leaves_its_start_and_is_no_worse_than_any_start():
    """Ten recurrent GD++ steps: every plain L-BFGS descent used to step into the region where the K-step products
    explode and be dropped, so the tuner returned its start, GD (γ = 0). Keeping each descent's best point and
    restarting from it reaches a schedule far below GD that the guard accepts, and the result is never worse than
    the start or an extra start (here the authors' coupled start γ = η/N², η = 20)."""
    args = (*_data(300, 0), 10)
    gd = tune_gd(*args, shared=True)
    authors = GDPPParams((20.0,) * 10, (0.2,) * 10)
    found = tune_gdpp(*args, shared=True, start=gd)
    with_extra = tune_gdpp(*args, shared=True, start=gd, extra_starts=[authors])
    loss = {name: gdpp_loss(*args[:4], p) for name, p in
            (("gd", gd), ("authors", authors), ("found", found), ("with_extra", with_extra))}
    assert found.gammas[0] > 0 and loss["found"] < 0.6 * loss["gd"]
    assert loss["with_extra"] <= min(loss["gd"], loss["authors"], loss["found"])


def test_guard_still_rejects_an_unstable_extra_start_and_what_lbfgs_finds_near_it(monkeypatch):
    """An extra start at the edge of stability (the K = 3 schedule of ``test_gdpp``'s guard test, far worse than GD
    on slightly stretched tasks) and the best points L-BFGS reaches from it are refused by the stability guard:
    the result stays within the guard's tolerance of GD on the stretched tasks, and every descent keeps only
    points the guard admits (its ``keep_best`` refuses the edge schedule and admits GD). Catches an unstable
    candidate getting past the final filter, and descents that keep their best point whatever the guard says
    (they then end on refused points and the tuner falls back to a worse candidate)."""
    from test_gdpp import EDGE3, GD3

    tuner = sys.modules[tune_gdpp.__module__]
    admitted = []

    def recording_lbfgs(*a, **k):
        admitted.append(k.get("keep_best"))
        return lbfgs(*a, **k)

    lbfgs = tuner._lbfgs
    monkeypatch.setattr(tuner, "_lbfgs", recording_lbfgs)
    args = (*_data(1000, 0), 3)
    stretched = tuple(t * 1.25 ** 0.5 for t in args[:4])
    assert gdpp_loss(*stretched, EDGE3) > 100 * gdpp_loss(*stretched, GD3)
    found = tune_gdpp(*args, shared=False, start=GD3, gamma_starts=(), extra_starts=[EDGE3])
    assert found != EDGE3
    assert gdpp_loss(*stretched, found) <= 3.5 * gdpp_loss(*stretched, GD3)
    assert gdpp_loss(*args[:4], found) <= gdpp_loss(*args[:4], GD3)
    def as_point(p):
        return [torch.tensor(p.etas, dtype=torch.float64), torch.tensor(p.gammas, dtype=torch.float64)]

    assert admitted and all(keep is not None and not keep(as_point(EDGE3)) and keep(as_point(GD3))
                            for keep in admitted)


def test_lbfgs_keeps_the_best_admitted_point_it_evaluated():
    """On (p - 3)² from 0 with only p ≤ 2 admitted, the result is the admitted evaluated point of least loss, not
    where L-BFGS stopped (p = 3); with nothing admitted it is a DivergenceError."""
    tuner = sys.modules[tune_gdpp.__module__]
    seen = []

    def loss(params, part=slice(None)):
        seen.append(float(params[0][0].detach()))
        return (params[0][0] - 3.0) ** 2

    found = tuner._lbfgs(loss, [[0.0]], 50, 1e-12, 1e-15, n_tasks=1, n_steps=1,
                         keep_best=lambda p: float(p[0][0]) <= 2.0)
    best_admitted = min((v for v in seen if v <= 2.0), key=lambda v: (v - 3.0) ** 2)
    assert max(seen) > 2.0 and float(found[0][0]) == best_admitted
    with pytest.raises(DivergenceError):
        tuner._lbfgs(loss, [[0.0]], 50, 1e-12, 1e-15, n_tasks=1, n_steps=1, keep_best=lambda p: False)
