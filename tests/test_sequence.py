"""In-context learning in a sequence (``icl_gd.regression.sequence``, ``constructions/sequence.py``): the task's law
and addressing, causality of every predictor, each referee against a plain numpy computation per position, the
tuners on held-out sequences, the authors' stored least-squares losses, and the constructions' checks failing on
planted slips."""

from __future__ import annotations

import math
import re
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from icl_gd.constructions import sequence as construction
from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAWeights
from icl_gd.regression.online.mesa import MesaWeights, mesa_fast_weights
from icl_gd.regression.sequence.authors import authors_losses
from icl_gd.regression.sequence.layers import causal_linear_attention, causal_mesa, sequence_tokens
from icl_gd.regression.sequence.referees import (GDReferee, OnlineGDReferee, RidgeReferee, bayes_ridge,
                                                 predict_with, tune_gd, tune_online_gd)
from icl_gd.regression.sequence.tasks import (GaussianTransitions, LinearDynamicsTask, OrthogonalTransitions,
                                              PartialObservation, per_position_loss, position_losses)
from icl_gd.regression.tasks import Stream
from icl_gd.studies import sequence as sequence_study

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64


def _sequences(seed: int, B: int = 3, T: int = 9, d: int = 3) -> torch.Tensor:
    return torch.randn(B, T, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


# --------------------------------------------------------------------------------------------------------- the task
def test_a_batch_is_a_pure_function_of_its_address():
    task = LinearDynamicsTask(d_s=4, length=12)
    a, b = (task.sample(5, seed=3, step=7, stream=Stream.TEST, dtype=F64) for _ in range(2))
    assert torch.equal(a.states, b.states) and torch.equal(a.W, b.W)
    assert not torch.equal(a.states, task.sample(5, seed=3, step=7, stream=Stream.TUNE, dtype=F64).states)
    assert not torch.equal(a.states, task.sample(5, seed=3, step=8, stream=Stream.TEST, dtype=F64).states)
    single = task.sample(5, seed=3, step=7, stream=Stream.TEST)  # float32: the float64 draw, rounded
    assert single.states.dtype == torch.float32 and torch.equal(single.states, a.states.float())
    assert a.states.shape == (5, 13, 4) and a.inputs.shape == a.targets.shape == (5, 12, 4)
    assert torch.equal(a.inputs[:, 1:], a.targets[:, :-1])


@pytest.mark.parametrize("scale", [1.0, 0.9])
def test_W_is_a_scaled_orthogonal_matrix_and_the_states_follow_it(scale):
    task = LinearDynamicsTask(d_s=6, length=20, noise=0.0, transitions=OrthogonalTransitions(scale))
    batch = task.sample(64, seed=0, dtype=F64)
    eye = torch.eye(6, dtype=F64)
    torch.testing.assert_close(batch.W @ batch.W.transpose(1, 2), scale ** 2 * eye.expand(64, 6, 6), rtol=0,
                               atol=1e-12)
    s = batch.states
    torch.testing.assert_close(s[:, 1:], s[:, :-1] @ batch.W.transpose(1, 2), rtol=0, atol=1e-12)
    assert s[:, 0].abs().max() <= task.initial_range
    determinants = torch.linalg.det(batch.W / scale)  # Haar on O(d): both components
    assert (determinants > 0).any() and (determinants < 0).any()


def test_the_laws_moments_match_their_statement():
    """Monte Carlo, each mean within 4 standard errors of its value: the transition noise (s_{t+1} - W s_t) / σ is
    N(0, 1), s_1 is U(-1, 1) (variance 1/3), E W_ij² = 1/d_s under Haar, and Gaussian transitions have variance
    std²."""
    task = LinearDynamicsTask(d_s=5, length=30, noise=0.01)
    batch = task.sample(400, seed=1, dtype=F64)
    z = ((batch.states[:, 1:] - batch.states[:, :-1] @ batch.W.transpose(1, 2)) / task.noise).flatten()
    se = 1 / len(z) ** 0.5
    assert abs(float(z.mean())) < 4 * se and abs(float(z.var()) - 1) < 4 * 2 ** 0.5 * se
    first = batch.states[:, 0].flatten()
    assert abs(float((first ** 2).mean()) - 1 / 3) < 4 * float((first ** 2).std()) / len(first) ** 0.5
    entries = (batch.W ** 2).flatten()
    assert abs(float(entries.mean()) - 1 / 5) < 4 * float(entries.std()) / len(entries) ** 0.5
    gaussian = LinearDynamicsTask(d_s=5, transitions=GaussianTransitions(0.2)).sample(400, seed=1, dtype=F64).W
    g = (gaussian ** 2).flatten()
    assert abs(float(g.mean()) - 0.04) < 4 * float(g.std()) / len(g) ** 0.5


def test_a_partially_observed_sequence_is_C_times_the_states():
    task = LinearDynamicsTask(d_s=6, length=10, observation=PartialObservation(d_o=3))
    batch = task.sample(200, seed=0, dtype=F64)
    assert task.d == 3 and batch.observed.shape == (200, 11, 3) and batch.C.shape == (200, 3, 6)
    torch.testing.assert_close(batch.observed, batch.states @ batch.C.transpose(1, 2), rtol=0, atol=1e-14)
    c = batch.C.flatten()
    assert abs(float(c.std()) - 0.5) < 4 * 0.5 / (2 * len(c)) ** 0.5
    noisy = LinearDynamicsTask(d_s=6, length=10, observation=PartialObservation(d_o=3, noise=0.1))
    noisy_batch = noisy.sample(200, seed=0, dtype=F64)
    assert not torch.allclose(noisy_batch.observed, noisy_batch.states @ noisy_batch.C.transpose(1, 2))


def test_per_position_loss_is_half_the_squared_error_and_its_mean_the_authors_training_loss():
    batch = LinearDynamicsTask(d_s=3, length=7).sample(4, seed=0, dtype=F64)
    zero = per_position_loss(torch.zeros_like, batch)
    torch.testing.assert_close(zero, 0.5 * (batch.targets ** 2).sum(-1).mean(0))
    B, T, _ = batch.targets.shape
    assert float(zero.mean()) == pytest.approx(float((batch.targets ** 2).sum()) / (2 * B * T), rel=1e-14)


# ------------------------------------------------------------------------------------------------------ causality
def _causal_predictors() -> dict:
    W0 = 0.3 * torch.randn(3, 3, generator=torch.Generator().manual_seed(5), dtype=F64)
    return {
        "ridge": RidgeReferee(0.5), "least squares": RidgeReferee(0.0), "ridge, history 2": RidgeReferee(0.5, 2),
        "GD from W0": GDReferee(0.1, W0), "3 GD steps": GDReferee(0.05, steps=3), "online GD": OnlineGDReferee(0.2),
        "attention layer": lambda x: construction.gd_step_predictions(x, 0.1, W0),
        "mesa layer": lambda x: construction.mesa_predictions(x, 0.5),
    }


def _reads_after(predict, x: torch.Tensor, u: int) -> bool:
    """Whether any prediction at a position before u moves when token u is perturbed (and, so that the test is not
    vacuous, asserting that some prediction at u or later does)."""
    y = x.clone()
    y[:, u] += 1.0
    before, after = predict(x), predict(y)
    assert not torch.equal(before[:, u:], after[:, u:]), "the perturbation changed nothing"
    return not torch.equal(before[:, :u], after[:, :u])


@pytest.mark.parametrize("name", list(_causal_predictors()))
def test_prediction_t_uses_no_token_after_t(name):
    predict, x = _causal_predictors()[name], _sequences(0)
    assert not any(_reads_after(predict, x, u) for u in range(1, x.shape[1]))


def test_a_non_causal_mask_is_caught():
    """A mask letting position t read t + 1 (the off-by-one the causality test exists for) fails it."""

    def leaky(weights: LSAWeights, tokens: torch.Tensor) -> torch.Tensor:
        q, k, v = (torch.einsum("hkD,btD->bhtk", W, tokens) for W in (weights.W_Q, weights.W_K, weights.W_V))
        T = tokens.shape[1]
        scores = (q @ k.transpose(-1, -2)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(1), 0.0)
        return tokens + torch.einsum("hDk,bhtk->btD", weights.P, scores @ v)

    x = _sequences(0)
    assert _reads_after(lambda s: construction.gd_step_predictions(s, 0.1, attention=leaky), x, 4)


# ------------------------------------------------------------------------ referees against numpy, position by position
def _features(x: np.ndarray, history: int) -> np.ndarray:
    T, d = x.shape
    padded = np.concatenate([np.zeros((history - 1, d)), x])
    return np.stack([np.concatenate([padded[t + history - 1 - j] for j in range(history)]) for t in range(T)])


@pytest.mark.parametrize("lam, history", [(0.7, 1), (1e-3, 1), (0.0, 1), (0.2, 2)])
def test_ridge_and_least_squares_are_numpys_per_position(lam, history):
    x = _sequences(1, B=2, T=12, d=3)
    got = RidgeReferee(lam, history)(x).numpy()
    for b in range(x.shape[0]):
        s = x[b].numpy()
        phi = _features(s, history)
        for t in range(s.shape[0]):
            X, Y = phi[:t], s[1:t + 1]  # pairs (φ_i, s_{i+1}), i < t (0-based: i + 1 ≤ t)
            if t == 0:
                W = np.zeros((s.shape[1], phi.shape[1]))
            elif lam > 0:
                W = np.linalg.solve(X.T @ X + lam * np.eye(phi.shape[1]), X.T @ Y).T
            else:
                W = np.linalg.lstsq(X, Y, rcond=None)[0].T
            np.testing.assert_allclose(got[b, t], W @ phi[t], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("steps, with_W0", [(1, True), (1, False), (4, True)])
def test_gd_steps_are_numpys_per_position(steps, with_W0):
    x = _sequences(2, B=2, T=10, d=3)
    W0 = 0.4 * np.random.default_rng(0).standard_normal((3, 3)) if with_W0 else None
    got = GDReferee(0.07, None if W0 is None else torch.tensor(W0), steps)(x).numpy()
    for b in range(x.shape[0]):
        s = x[b].numpy()
        for t in range(s.shape[0]):
            W = np.zeros((3, 3)) if W0 is None else W0.copy()
            for _ in range(steps):
                W = W - 0.07 * sum(np.outer(W @ s[i] - s[i + 1], s[i]) for i in range(t)) if t else W
            np.testing.assert_allclose(got[b, t], W @ s[t], rtol=1e-11, atol=1e-13)


def test_online_gd_is_the_delta_rule_per_position():
    x = _sequences(3, B=2, T=10, d=3)
    got = OnlineGDReferee(0.15)(x).numpy()
    for b in range(x.shape[0]):
        s, W = x[b].numpy(), np.zeros((3, 3))
        for t in range(s.shape[0]):
            np.testing.assert_allclose(got[b, t], W @ s[t], rtol=1e-11, atol=1e-13)
            if t + 1 < s.shape[0]:
                W = W - 0.15 * np.outer(W @ s[t] - s[t + 1], s[t])


def test_position_one_predicts_from_W0():
    x, W0 = _sequences(4), torch.eye(3, dtype=F64) * 0.5
    for referee in (RidgeReferee(), RidgeReferee(0.0), OnlineGDReferee(0.3), GDReferee(0.2)):
        assert torch.equal(referee(x)[:, 0], torch.zeros_like(x[:, 0]))
    torch.testing.assert_close(GDReferee(0.2, W0, steps=3)(x)[:, 0], 0.5 * x[:, 0])


def test_the_bayes_ridge_has_the_priors_lambda_and_beats_other_lambdas_under_a_gaussian_W():
    """λ = σ² / std² for Gaussian W (σ²·d / scale² for orthogonal W: the authors' 0.001 at their defaults); on the
    Gaussian law its mean loss over positions 2..T is below ridge at 4λ and λ/4 by more than 3 paired standard
    errors of 2000 sequences."""
    task = LinearDynamicsTask(d_s=4, length=12, noise=0.3, transitions=GaussianTransitions(0.3))
    bayes = bayes_ridge(task)
    assert bayes.lam == pytest.approx(1.0)
    assert bayes_ridge(LinearDynamicsTask()).lam == pytest.approx(1e-3)
    batch = task.sample(2000, seed=0, stream=Stream.TEST, dtype=F64)

    def losses(referee):
        return 0.5 * ((referee(batch.inputs) - batch.targets) ** 2).sum(-1)[:, 1:].mean(1)

    best = losses(bayes)
    for other in (RidgeReferee(4.0), RidgeReferee(0.25)):
        gap = losses(other) - best
        assert float(gap.mean()) > 3 * float(gap.std()) / len(gap) ** 0.5
    with pytest.raises(ConfigError):
        bayes_ridge(LinearDynamicsTask(observation=PartialObservation(d_o=5)))


# ------------------------------------------------------------------------------------------------------- tuners
def _held_out_loss(referee, task) -> torch.Tensor:
    batch = task.sample(512, seed=0, stream=Stream.TEST, dtype=F64)
    return 0.5 * ((referee(batch.inputs) - batch.targets) ** 2).sum(-1).mean(1)  # (B,) per sequence


def test_the_tuned_one_step_beats_untuned_steps_on_held_out_sequences():
    """η tuned on 256 TUNE-stream sequences of the authors' task beats η/2 and 2η on 512 TEST-stream sequences by
    more than 3 paired standard errors."""
    task = LinearDynamicsTask()
    tuned = tune_gd(task, seed=0, n_sequences=256)
    assert tuned.W0 is None and 0.005 < tuned.eta < 0.1
    best = _held_out_loss(tuned, task)
    for eta in (tuned.eta / 2, 2 * tuned.eta):
        gap = _held_out_loss(GDReferee(eta), task) - best
        assert float(gap.mean()) > 3 * float(gap.std()) / len(gap) ** 0.5


def test_the_fitted_W0_is_the_closed_form_minimiser_and_near_zero_under_the_symmetric_law():
    task = LinearDynamicsTask(d_s=4, length=20)
    fitted = tune_gd(task, seed=0, n_sequences=256, learn_W0=True)
    batch = task.sample(256, seed=0, step=0, stream=Stream.TUNE, dtype=F64)
    W0 = fitted.W0.clone().requires_grad_(True)
    loss = per_position_loss(lambda x: GDReferee(fitted.eta)(x) + _carried(x, fitted.eta) @ W0.T, batch).mean()
    (grad,) = torch.autograd.grad(loss, W0)
    assert grad.abs().max() < 1e-10  # stationary in W0: the closed form solved the right normal equations
    assert fitted.W0.abs().max() < 0.1  # the best W0 is 0 (tune_gd's docstring); this is its estimation noise


def _carried(x: torch.Tensor, eta: float) -> torch.Tensor:
    """(I - η G_t) s_t, what W0 multiplies in one GD step's prediction."""
    from icl_gd.regression.sequence.referees import pair_moments
    phi, G, _ = pair_moments(x)
    return phi - eta * (G @ phi[..., None])[..., 0]


def test_the_tuned_delta_rule_beats_halving_or_doubling_its_step():
    """η tuned on 128 TUNE-stream sequences beats η/2 and 2η on 512 TEST-stream sequences: the paired gap of
    min(L(η'), c) - L(η) exceeds 3 standard errors, c = 10 (far above any loss at the tuned η, measured max 1.1).

    The delta rule multiplies its error along s_t by 1 - η ‖s_t‖² at every step, so a sequence with
    η ‖s_1‖² > 2 (the orthogonal W keeps ‖s_t‖ near ‖s_1‖) grows geometrically: at 2η, 77 of the 512 sequences
    do (losses up to 1e9). A paired z of the raw gap is then about 1 however large the mean gap, since one sequence
    makes both its mean and its standard error; min(L, c) ≤ L keeps the test one-sided and exact (a lower bound
    on the gap) with a finite variance. Without the cap the raw z at 2η is 1.2 (mean gap 2e6)."""
    task = LinearDynamicsTask(d_s=5, length=20)
    tuned = tune_online_gd(task, seed=0, n_sequences=128)
    best = _held_out_loss(tuned, task)
    assert float(best.max()) < 10
    for eta in (tuned.eta / 2, 2 * tuned.eta):
        gap = _held_out_loss(OnlineGDReferee(eta), task).clamp_max(10.0) - best
        assert float(gap.mean()) > 3 * float(gap.std()) / len(gap) ** 0.5


def test_the_delta_rule_is_unstable_exactly_where_eta_times_the_squared_norm_exceeds_two():
    """The cause of the heavy tail above: a sequence whose W is the identity and σ = 0 keeps s_t = s_1, and the
    delta rule's error e_t = W_t s_1 - s_1 (e_1 = -s_1) obeys e_{t+1} = (1 - η ‖s_1‖²) e_t: ‖e_t‖ =
    ‖s_1‖ |1 - η ‖s_1‖²|^{t-1}, growing iff η ‖s_1‖² > 2."""
    s1 = torch.tensor([[[1.0, 1.0]]], dtype=F64)  # ‖s_1‖² = 2
    x = s1.expand(1, 30, 2)
    for eta, grows in ((0.9, False), (1.1, True)):
        errors = (OnlineGDReferee(eta)(x) - x).norm(dim=-1)[0]
        torch.testing.assert_close(errors, s1.norm() * torch.tensor(abs(1 - 2 * eta), dtype=F64) ** torch.arange(30))
        assert (errors[-1] > errors[0]) == grows


# ------------------------------------------------------------------------------------- the authors' stored losses
def _lagged_ridge_losses(lag: int) -> torch.Tensor:
    """(B, T) per-sequence losses of ridge λ = 0.001 fitted on all pairs but the last ``lag`` ones (the authors'
    referee drops one: rows [:k])."""
    batch = LinearDynamicsTask().sample(1280, seed=0, stream=Stream.TEST, dtype=F64)
    weights = RidgeReferee(1e-3).weights(batch.inputs)
    index = (torch.arange(batch.inputs.shape[1]) - lag).clamp_min(0)
    return 0.5 * ((predict_with(weights[index], batch.inputs) - batch.targets) ** 2).sum(-1)


def test_the_task_reproduces_the_authors_stored_least_squares_losses():
    """Ridge with the authors' one-pair lag on 1280 of our sequences against their 5 x 256: the mean loss over
    positions 1-11 (learning) and over 12-50 (the noise floor) each within 3 standard errors (ours over sequences,
    theirs over their 5 seeds; measured |z| 0.35 and 0.35). Without the lag the two differ by 10 and 5: the test
    can tell the readings apart."""
    stored = authors_losses()["lsq"].losses
    for lag, agrees in ((1, True), (0, False)):
        ours = _lagged_ridge_losses(lag)
        for part in (slice(0, 11), slice(11, 50)):
            mine, theirs = ours[:, part].mean(1), stored[:, part].mean(1)
            se = (mine.var() / len(mine) + theirs.var() / len(theirs)).sqrt()
            assert (abs(float(mine.mean() - theirs.mean())) < 3 * float(se)) == agrees


# ----------------------------------------------------------------------------------------------- constructions
@pytest.mark.parametrize("check", construction.IDENTITY_CHECKS, ids=lambda c: c.name)
def test_the_identity_checks_hold(check):
    result = check.run()
    assert result.passed, result


def test_the_gd_weights_are_the_blocks_the_docstring_writes():
    d, eta, W0 = 2, 0.3, torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)
    w = construction.gd_step_weights(d, eta, W0)
    O, I = torch.zeros(d, d, dtype=F64), torch.eye(d, dtype=F64)
    assert torch.equal(w.W_Q[0], torch.cat([O, I, O], 1)) and torch.equal(w.W_K[0], torch.cat([O, O, I], 1))
    assert torch.equal(w.W_V[0], torch.cat([O, I, -W0], 1)) and torch.equal(w.P[0], eta * torch.cat([I, O, O], 0))


def _attention_without_the_diagonal(weights: LSAWeights, tokens: torch.Tensor) -> torch.Tensor:
    """The off-by-one mask t' < t: the latest pair (s_{t-1}, s_t) left out."""
    q, k, v = (torch.einsum("hkD,btD->bhtk", W, tokens) for W in (weights.W_Q, weights.W_K, weights.W_V))
    T = tokens.shape[1]
    scores = (q @ k.transpose(-1, -2)).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(-1), 0.0)
    return tokens + torch.einsum("hDk,bhtk->btD", weights.P, scores @ v)


class _MeanLossGD(torch.nn.Module):
    """One GD step on the mean loss L_t / (t - 1): the 1/t the layer does not have."""

    def __init__(self, eta, W0):
        super().__init__()
        self.eta, self.W0 = eta, W0

    def forward(self, x):
        T = x.shape[1]
        pairs = (torch.arange(T, dtype=F64) - 1).clamp_min(1)[None, :, None]
        base = x @ (torch.zeros(x.shape[-1], x.shape[-1], dtype=F64) if self.W0 is None else self.W0).T
        return base + (GDReferee(self.eta, self.W0)(x) - base) / pairs


def _mesa_one_token_late(weights: MesaWeights, P: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Φ_{t-1} read at position t: the mesa layer's off-by-one."""
    keys, values, queries = (tokens @ W.T for W in (weights.W_K, weights.W_V, weights.W_Q))
    phi = mesa_fast_weights(keys, values, weights.lam)[:-1]
    return tokens + torch.einsum("tbvk,btk->btv", phi, queries) @ P.T


def _mesa_doubled_lambda(weights: MesaWeights, P: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    doubled = MesaWeights(weights.W_Q, weights.W_K, weights.W_V, 2 * weights.lam)
    return causal_mesa(doubled, P, tokens)


@pytest.mark.parametrize("slip", [
    lambda: construction.check_gd_step(attention=_attention_without_the_diagonal),
    lambda: construction.check_gd_step(referee=_MeanLossGD),
    lambda: construction.check_mesa_ridge(mesa=_mesa_one_token_late),
    lambda: construction.check_mesa_ridge(mesa=_mesa_doubled_lambda),
    lambda: construction.check_mesa_authors(mesa=_mesa_one_token_late),
], ids=["mask t' < t", "mean loss (1/t)", "mesa Φ_{t-1}", "mesa 2λ", "mesa Φ_{t-1}, authors' task"])
def test_planted_slips_fail_the_checks(slip):
    assert not slip().passed


def test_layers_and_tokens_reject_bad_shapes():
    x = _sequences(0)
    tokens = sequence_tokens(x)
    assert tokens.shape == (3, 9, 9) and torch.equal(tokens[:, 1:, 6:], x[:, :-1]) and not tokens[:, 0, 6:].any()
    with pytest.raises(ConfigError):
        sequence_tokens(x[0])
    with pytest.raises(ConfigError):
        causal_linear_attention(construction.gd_step_weights(2, 0.1), tokens)
    weights, P = construction.ridge_mesa_weights(3, 0.5)
    with pytest.raises(ConfigError):
        causal_mesa(weights, P[:, :2], tokens)


# ------------------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("make", [
    lambda: LinearDynamicsTask(d_s=0), lambda: LinearDynamicsTask(length=0), lambda: LinearDynamicsTask(noise=-0.1),
    lambda: LinearDynamicsTask(initial_range=0.0), lambda: LinearDynamicsTask(clip=0.0),
    lambda: LinearDynamicsTask(transitions="orthogonal"), lambda: LinearDynamicsTask(observation=3),
    lambda: OrthogonalTransitions(scale=0.0), lambda: GaussianTransitions(std=-1.0),
    lambda: PartialObservation(d_o=0), lambda: PartialObservation(d_o=2, scale=0.0),
    lambda: PartialObservation(d_o=2, noise=-1.0),
    lambda: LinearDynamicsTask().sample(0, seed=0), lambda: LinearDynamicsTask().sample(2, seed=-1),
    lambda: RidgeReferee(lam=-1.0), lambda: RidgeReferee(history=0), lambda: GDReferee(eta=-0.1),
    lambda: GDReferee(0.1, steps=0), lambda: GDReferee(0.1, W0=torch.zeros(3)), lambda: OnlineGDReferee(-1.0),
    lambda: GDReferee(0.1, W0=torch.zeros(2, 2))(_sequences(0)), lambda: RidgeReferee()(torch.zeros(3, 4)),
    lambda: position_losses(torch.zeros(2, 3, 4), torch.zeros(2, 3, 5)),
    lambda: tune_gd(LinearDynamicsTask(), seed=0, n_sequences=0),
])
def test_bad_config_is_a_config_error(make):
    with pytest.raises(ConfigError):
        make()


# ------------------------------------------------------------------------------------------------------- the docs
def test_the_docs_page_example_runs(capsys, tmp_path):
    page = (ROOT / "docs" / "sequence.md").read_text()
    code = re.search(r"<!-- sequence-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    runpy.run_path(str(tmp_path / "example.py"))
    lines = capsys.readouterr().out.splitlines()
    task = LinearDynamicsTask()
    batch = task.sample(1000, seed=0, stream=Stream.TEST, dtype=F64)
    gd = tune_gd(task, seed=0, n_sequences=256)
    assert float(re.search(r"max \|layer - GD\| = (\S+)", lines[0]).group(1)) < 1e-12
    for line, referee in zip(lines[1:], (gd, RidgeReferee(1e-3))):
        loss = per_position_loss(referee, batch)
        assert line.endswith(f"{loss[0]:.3f} {loss[9]:.3f} {loss[49]:.3f}, mean {loss.mean():.3f}")
    assert f"eta = {gd.eta:.4f}" in lines[1]


# -------------------------------------------------------------------------------------- the trained models, the study
def test_the_trained_models_are_causal():
    from icl_gd.regression.sequence.models import CausalLSAStack, CausalMesaModel, SoftmaxTransformer

    x = _sequences(6).float()
    for model in (CausalLSAStack(3, 2, 2, 4, seed=0), CausalMesaModel(3, 3, seed=0),
                  SoftmaxTransformer(3, 8, 2, 1, seed=0)):
        with torch.no_grad():
            assert model(x).shape == x.shape
            assert not any(_reads_after(model, x, u) for u in range(1, x.shape[1]))


def test_the_read_off_recovers_a_gd_steps_eta_and_W0():
    """fit_gd on the predictions of one GD step with known (η, W0) returns them (a loss of 0 is its minimum)."""
    from icl_gd.regression.sequence.referees import fit_gd

    x = LinearDynamicsTask(d_s=3, length=15).sample(64, seed=0, dtype=F64).inputs
    W0 = 0.2 * torch.randn(3, 3, generator=torch.Generator().manual_seed(1), dtype=F64)
    read = fit_gd(x, GDReferee(0.15, W0)(x))
    assert read.eta == pytest.approx(0.15, rel=1e-6)
    torch.testing.assert_close(read.W0, W0, rtol=0, atol=1e-6)


def test_the_interpolation_ends_are_the_trained_layer_and_the_construction():
    """α = 0 is the trained one-head layer itself (its products gauge-fixed, the function unchanged) and α = 1 the
    GD step (η, W0)."""
    from icl_gd.regression.sequence.models import CausalLSAStack
    from icl_gd.studies.sequence import mixed_layer_predictions

    x = _sequences(7, B=4, T=10, d=3)
    model = CausalLSAStack(3, 1, 1, 9, seed=0).double()
    with torch.no_grad():
        model.A.copy_(0.1 * torch.randn(3, 3, generator=torch.Generator().manual_seed(2)))
        trained = model(x)
    W0 = 0.3 * torch.eye(3, dtype=F64)
    torch.testing.assert_close(mixed_layer_predictions(model, 0.1, W0, 0.0, x), trained, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(mixed_layer_predictions(model, 0.1, W0, 1.0, x), GDReferee(0.1, W0)(x), rtol=1e-10,
                               atol=1e-12)


def test_the_interpolation_is_flat_between_a_layer_and_its_gauge_twin():
    """A trained layer that is the construction with W_Q, P negated and W_K, W_V rescaled (the same function): every
    point of the line is the construction. Without the sign in the gauge fixing the midpoint is the zero layer."""
    from icl_gd.regression.sequence.models import CausalLSAStack
    from icl_gd.studies.sequence import mixed_layer_predictions

    x, eta, W0 = _sequences(10, B=4, T=10, d=3), 0.1, 0.2 * torch.eye(3, dtype=F64)
    built = construction.gd_step_weights(3, eta, W0)
    model = CausalLSAStack(3, 1, 1, 3, seed=0).double()
    with torch.no_grad():
        model.W_Q.copy_(-2.0 * built.W_Q[None])
        model.W_K.copy_(0.5 * built.W_K[None])
        model.W_V.copy_(3.0 * built.W_V[None])
        model.P.copy_(-built.P[None] / 3.0)
        model.A.copy_(W0)
    reference = GDReferee(eta, W0)(x)
    torch.testing.assert_close(model(x), reference, rtol=1e-10, atol=1e-12)
    for alpha in (0.25, 0.5, 0.75):
        torch.testing.assert_close(mixed_layer_predictions(model, eta, W0, alpha, x), reference, rtol=1e-10,
                                   atol=1e-12)


TINY = ("steps=6", "batch_size=16", "n_test=32", "n_tune=32", "eval_every=3", "length=6", "d_s=3", "n_authors=32",
        "softmax_width=8", "n_probe=32", "order_permutations=2")


def test_the_study_runs_at_a_tiny_budget_and_writes_what_its_claims_read(tmp_path):
    from icl_gd.claims.evidence import seed_evidence
    from icl_gd.claims.registry.beyond_sequence import BEYOND_SEQUENCE_CLAIMS
    from icl_gd.core.results import read_json
    from icl_gd.studies import REGISTRY, get_study, run

    study = get_study("sequence")
    assert study.tiny == TINY
    run("sequence", tmp_path, overrides=list(TINY), threads=1, progress=False, figures=True)
    mean = read_json(tmp_path / "metrics.json")["mean"]
    for name in ("lsa1", "lsa2", "mesa", "softmax", "ridge", "least_squares", "bayes", "gd", "gd_k", "online_gd",
                 "zero"):
        assert math.isfinite(mean[f"loss_{name}"]), name
    assert mean["loss_ridge"] < mean["loss_zero"] and mean["eta_gd"] > 0
    assert (tmp_path / "figures" / "position_loss.png").exists()
    positions = (tmp_path / "position_loss.csv").read_text().splitlines()
    assert len(positions) == 1 + 11 * 6  # 7 referees and 4 trained models, 6 positions each
    evidence = seed_evidence([[tmp_path]])
    for claim in BEYOND_SEQUENCE_CLAIMS:
        assert math.isfinite(claim.statistic(evidence[0])), claim.id
    assert "sequence" in REGISTRY.names()
    probes = (tmp_path / "probes.csv").read_text().splitlines()
    assert len(probes) == 1 + (2 + 3) * 2 * 6  # lsa1 (2 streams) and lsa2 (3), two targets, 6 positions
    assert (tmp_path / "figures" / "probes.png").exists()
    order = {(r.split(",")[1]) for r in (tmp_path / "order.csv").read_text().splitlines()[1:]}
    assert order == {"ridge", "gd", "online_gd", "lsa1", "lsa2", "mesa", "softmax"}
    assert mean["order_sensitivity_ridge"] < 1e-12 < mean["order_sensitivity_online_gd"]
    assert mean["order_sensitivity_lsa1"] < 1e-12 < mean["order_sensitivity_lsa2"]
    assert (tmp_path / "figures" / "order.png").exists()


def test_the_preconditioned_input_is_numpys_per_position():
    from icl_gd.regression.sequence.probes import probe_targets

    x = _sequences(8, B=2, T=7, d=3)
    got = probe_targets(x, x, 0.3)["preconditioned"].numpy()
    for b in range(2):
        s = x[b].numpy()
        for t in range(7):
            G = sum((np.outer(s[i], s[i]) for i in range(t)), np.zeros((3, 3)))  # pairs i < t: inputs s_1..s_{t-1}
            np.testing.assert_allclose(got[b, t], np.linalg.solve(G + 0.3 * np.eye(3), s[t]), rtol=1e-10)


def test_a_probe_reads_an_affine_target_exactly_and_a_hidden_one_not():
    """R² = 1 where the target is an affine map of the features; about 0 (held out) where it is independent."""
    from icl_gd.regression.sequence.probes import fit_probes, probe_r2

    gen = torch.Generator().manual_seed(9)
    features = torch.randn(400, 5, 4, generator=gen, dtype=F64)
    A = torch.randn(4, 2, generator=gen, dtype=F64)
    affine = features @ A + 1.5
    hidden = torch.randn(400, 5, 2, generator=gen, dtype=F64)
    fit, test = slice(0, 200), slice(200, 400)
    exact = probe_r2(fit_probes(features[fit], affine[fit]), features[test], affine[test])
    torch.testing.assert_close(exact, torch.ones(5, dtype=F64), rtol=0, atol=1e-9)
    none = probe_r2(fit_probes(features[fit], hidden[fit]), features[test], hidden[test])
    assert none.abs().max() < 0.1


@pytest.mark.parametrize("make", [
    lambda: sequence_study.SequenceModelsConfig(depths=(0,)), lambda: sequence_study.SequenceModelsConfig(depths=()),
    lambda: sequence_study.SequenceTaskConfig(d_s=0), lambda: sequence_study.SequenceConfig(gd_steps=0),
])
def test_the_studys_bad_config_is_a_config_error(make):
    with pytest.raises(ConfigError):
        make()


def test_the_studys_authors_comparison_is_their_stored_means():
    from icl_gd.studies.sequence import authors_comparison

    stored = authors_losses()
    values = authors_comparison(64, seed=0)
    assert values["loss_authors_lsq"] == pytest.approx(float(stored["lsq"].losses.mean()), rel=1e-12)
    assert values["loss_authors_lsa2"] == pytest.approx(float(stored["transformer"].losses.mean()), rel=1e-12)
