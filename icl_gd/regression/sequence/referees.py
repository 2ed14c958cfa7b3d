"""Referees of the sequence task: predictors of the next token from the tokens so far, at every position, all
answering one call, inputs (B, T, d) -> predictions (B, T, d), prediction t from tokens s_1..s_t only.

Each fits a matrix W (d, k) on the pairs seen so far, (φ_i, s_{i+1}) for i < t, and predicts ŝ_{t+1} = W φ_t,
with φ_t = (s_t, s_{t-1}, ..., s_{t-h+1}) (k = h d, zeros before s_1): h = ``history`` = 1 is the paper's
least-squares objective (von Oswald et al. 2023b, Eq. 4 and Prop. 1)

    L_t(W) = ½ Σ_{i<t} ‖s_{i+1} - W s_i‖²,

and h > 1 is what the authors' least-squares referee of a partially observed sequence regresses on (their
``lsq_partobs``: src/models/auxiliary_models.py and src/util/sequence_performance/sequenceloss_eval.py at commit
0512b9b7f9aefd45e84326bff6f5594d52c1a1c8 of mtavit/transformers_mesa_optimization_paper). Position 1 has no pair
yet and predicts W0 φ_1 (ridge, least squares and online GD: W0 = 0; GD: its given W0).

- ``RidgeReferee``: W_t = M_t (G_t + λ I)⁻¹, G_t = Σ_{i<t} φ_i φ_iᵀ, M_t = Σ_{i<t} s_{i+1} φ_iᵀ (the mesa layer's
  answer); λ = 0 is least squares, the minimum-norm solution while G_t is singular.
- ``GDReferee``: K steps W ← W - η ∇L_t(W) = W - η (W G_t - M_t) from W0 (η, W0 given; ``tune_gd`` fits them).
- ``OnlineGDReferee``: the delta rule, one pass over the pairs in order from W = 0,
  W ← W - η (W φ_i - s_{i+1}) φ_iᵀ (``tune_online_gd`` fits η).
- ``bayes_ridge``: the posterior mean of W, ridge with the prior's λ = σ² / Var(W_ij), Bayes-optimal for a Gaussian
  W (``GaussianTransitions``); for the authors' orthogonal W no posterior mean is closed, and this is the stated
  approximation (a Gaussian prior of the same entry variance).

Each referee of history 1 also reads a sequence as its pairs, ``from_pairs(current, previous)`` with (s_t, s_{t-1})
at position t (s_0 = 0): position t fits the pairs of positions 1..t (position 1's (0, s_1) adds nothing to any of
these fits) and predicts W_t current_t, which on a sequence's own pairs is ``forward``; the pairs in another order
measure its order sensitivity (``icl_gd.regression.sequence.order``).

Float64 inside; predictions in the inputs' dtype. The tuners fit on TUNE-stream sequences and minimise the mean of
the per-position losses (the authors' training loss).
"""

from __future__ import annotations

import torch
from torch import nn

from icl_gd.core.config import require_non_negative, require_positive, require_positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.regression.online.algorithms import online_gd_weights_per_token, ridge_weights_per_prefix
from icl_gd.regression.sequence.tasks import LinearDynamicsTask, position_losses
from icl_gd.regression.tasks import Stream
from icl_gd.regression.tuning import tune_step_size

F64 = torch.float64


def _require_inputs(inputs: torch.Tensor) -> None:
    if inputs.ndim != 3 or inputs.shape[1] < 1:
        raise ConfigError(f"a referee reads sequences (B, T, d) with T ≥ 1, got {tuple(inputs.shape)}")


def lagged_features(inputs: torch.Tensor, history: int = 1) -> torch.Tensor:
    """(B, T, h d) φ_t = (s_t, s_{t-1}, ..., s_{t-h+1}) from inputs (B, T, d), zeros before s_1."""
    require_positive_int("history", history)
    _require_inputs(inputs)
    lags = [inputs] + [nn.functional.pad(inputs[:, :-j], (0, 0, j, 0)) for j in range(1, history)]
    return torch.cat(lags, dim=-1)


def pair_moments(inputs: torch.Tensor, history: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(φ (B, T, k), G (B, T, k, k), M (B, T, d, k)): the features and, at every position t, G_t = Σ_{i<t} φ_i φ_iᵀ
    and M_t = Σ_{i<t} s_{i+1} φ_iᵀ over the pairs whose target is at most s_t (zero at t = 1)."""
    phi = lagged_features(inputs, history)
    x, y = phi[:, :-1], inputs[:, 1:]
    pad = (0, 0, 0, 0, 1, 0)  # one leading position of zeros: position t holds the sum over i < t
    G = nn.functional.pad(torch.cumsum(x[..., :, None] * x[..., None, :], dim=1), pad)
    M = nn.functional.pad(torch.cumsum(y[..., :, None] * x[..., None, :], dim=1), pad)
    return phi, G, M


def _require_pairs(current: torch.Tensor, previous: torch.Tensor, history: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs in float64, checked: two (B, T, d) tensors of one shape, for a referee of history 1."""
    if history != 1:
        raise ConfigError(f"a referee reads pairs (s_t, s_(t-1)) only with history 1, got history {history}")
    if current.ndim != 3 or previous.shape != current.shape:
        raise ConfigError(f"pairs are two tensors (B, T, d) of one shape, got {tuple(current.shape)} and "
                          f"{tuple(previous.shape)}")
    return current.to(F64), previous.to(F64)


def predict_with(weights: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """(B, T, d) W_t φ_t from weights (T, B, d, k), W_t fitted on the pairs i < t, and features φ (B, T, k)."""
    return torch.einsum("tbij,btj->bti", weights, phi)


class RidgeReferee(nn.Module):
    """Ridge (λ > 0) or minimum-norm least squares (λ = 0) on the pairs so far, at every position (module
    docstring); λ = 0.001 is the authors' least-squares referee (their sandbox notebook's ``lamb``)."""

    def __init__(self, lam: float = 1e-3, history: int = 1) -> None:
        super().__init__()
        require_non_negative("the ridge regulariser λ", lam)
        require_positive_int("history", history)
        self.lam, self.history = float(lam), history

    def weights(self, inputs: torch.Tensor) -> torch.Tensor:
        """(T, B, d, k) W_t fitted on the pairs i < t (W_1 = 0)."""
        phi = lagged_features(inputs.to(F64), self.history)
        x, y = phi[:, :-1], inputs.to(F64)[:, 1:]
        if self.lam > 0:
            return ridge_weights_per_prefix(x, y, self.lam)
        # λ = 0: W_t = Y_tᵀ (X_tᵀ)⁺, the minimum-norm least-squares solution, by a pseudo-inverse per prefix.
        B, T, k = phi.shape
        out = [phi.new_zeros(B, y.shape[-1], k)]
        out += [(torch.linalg.pinv(x[:, :n]) @ y[:, :n]).transpose(1, 2) for n in range(1, T)]
        return torch.stack(out)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        _require_inputs(inputs)
        phi = lagged_features(inputs.to(F64), self.history)
        return predict_with(self.weights(inputs), phi).to(inputs.dtype)

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs (module docstring)."""
        y, x = _require_pairs(current, previous, self.history)
        if self.lam > 0:
            weights = ridge_weights_per_prefix(x, y, self.lam)[1:]
        else:
            weights = torch.stack([(torch.linalg.pinv(x[:, :n]) @ y[:, :n]).transpose(1, 2)
                                   for n in range(1, x.shape[1] + 1)])
        return predict_with(weights, y).to(current.dtype)


def gd_predictions(phi: torch.Tensor, G: torch.Tensor, M: torch.Tensor, eta: float | torch.Tensor,
                   W0: torch.Tensor | None, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_K φ_t with W0 = 0, (I - η G_t)^K φ_t), each (B, T, ·), for K = ``steps`` GD steps on L_t: the GD
    prediction is their W0-free part plus W0 times the second (W_K = W0 (I - ηG)^K + η M Σ_{j<K} (I - ηG)^j),
    linear in W0 at fixed η, which ``tune_gd`` solves for."""
    u, p = phi, torch.zeros(*phi.shape[:2], M.shape[-2], dtype=phi.dtype, device=phi.device)
    for _ in range(steps):
        p = p + eta * (M @ u[..., None])[..., 0]
        u = u - eta * (G @ u[..., None])[..., 0]
    return p, u


class GDReferee(nn.Module):
    """K = ``steps`` GD steps with step η on L_t from W0 (d, k) (None: 0) at every position (module docstring)."""

    def __init__(self, eta: float, W0: torch.Tensor | None = None, steps: int = 1, history: int = 1) -> None:
        super().__init__()
        require_non_negative("the GD step size η", eta)
        require_positive_int("steps", steps)
        require_positive_int("history", history)
        if W0 is not None and W0.ndim != 2:
            raise ConfigError(f"W0 must be a matrix (d, k), got shape {tuple(W0.shape)}")
        self.eta, self.steps, self.history = float(eta), steps, history
        self.W0 = None if W0 is None else W0.detach().to(F64)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        phi, G, M = pair_moments(inputs.to(F64), self.history)
        if self.W0 is not None and self.W0.shape != (inputs.shape[-1], phi.shape[-1]):
            raise ConfigError(f"W0 is {tuple(self.W0.shape)} but these sequences need ({inputs.shape[-1]}, "
                              f"{phi.shape[-1]})")
        free, carried = gd_predictions(phi, G, M, self.eta, self.W0, self.steps)
        out = free if self.W0 is None else free + carried @ self.W0.to(phi.device).T
        return out.to(inputs.dtype)

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs (module docstring)."""
        y, x = _require_pairs(current, previous, self.history)
        G = torch.cumsum(x[..., :, None] * x[..., None, :], dim=1)
        M = torch.cumsum(y[..., :, None] * x[..., None, :], dim=1)
        free, carried = gd_predictions(y, G, M, self.eta, self.W0, self.steps)
        out = free if self.W0 is None else free + carried @ self.W0.to(y.device).T
        return out.to(current.dtype)


class OnlineGDReferee(nn.Module):
    """The delta rule: one pass of online GD with step η over the pairs in order, from W = 0 (module docstring)."""

    def __init__(self, eta: float, history: int = 1) -> None:
        super().__init__()
        require_non_negative("the online step size η", eta)
        require_positive_int("history", history)
        self.eta, self.history = float(eta), history

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        _require_inputs(inputs)
        phi = lagged_features(inputs.to(F64), self.history)
        weights = online_gd_weights_per_token(phi[:, :-1], inputs.to(F64)[:, 1:], self.eta)  # (T, B, d, k)
        return predict_with(weights, phi).to(inputs.dtype)

    def from_pairs(self, current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, T, d) predictions from the pairs, read in their order (module docstring)."""
        y, x = _require_pairs(current, previous, self.history)
        return predict_with(online_gd_weights_per_token(x, y, self.eta)[1:], y).to(current.dtype)


def bayes_ridge(task: LinearDynamicsTask) -> RidgeReferee:
    """Ridge with λ = σ² / Var(W_ij): the posterior mean of W given the pairs so far under a Gaussian prior of the
    task's entry variance (s_1 is independent of W, so the pairs' Gaussian likelihood is all that informs it).
    Bayes-optimal for ``GaussianTransitions`` (up to the clip, which does not bind for a stable W); for the
    authors' orthogonal W, the stated approximation (module docstring). Fully observed tasks only: a partially
    observed one has a hidden state whose posterior is not closed over W and C."""
    if task.observation is not None:
        raise ConfigError("bayes_ridge needs a fully observed task: with o_t = C s_t no posterior mean is closed")
    return RidgeReferee(task.noise ** 2 / task.transitions.entry_variance(task.d_s))


# ------------------------------------------------------------------------------------------------------ tuners
def _tuning_batch(task: LinearDynamicsTask, seed: int, n_sequences: int) -> tuple[torch.Tensor, torch.Tensor]:
    require_positive_int("n_sequences", n_sequences)
    batch = task.sample(n_sequences, seed, 0, Stream.TUNE, dtype=F64)
    return batch.inputs, batch.targets


def tune_gd(task: LinearDynamicsTask, seed: int, n_sequences: int = 1024, steps: int = 1, history: int = 1,
            learn_W0: bool = False) -> GDReferee:
    """The η, and with ``learn_W0`` the W0, of K = ``steps`` GD steps minimising the mean per-position loss on
    ``n_sequences`` TUNE-stream sequences of ``task``: W0 in closed form at every η (the prediction is linear in W0,
    ``gd_predictions``), η by L-BFGS over log η on that profile (``tuning.tune_step_size``), from η = 1 / mean tr G_t.

    W0 = 0 unless ``learn_W0``: with ``history`` 1, under both laws of W, the best W0 is 0. W and -W are equally
    likely, and -W turns a sequence into (-1)^{t-1} s_t (noise, clip and s_1 are symmetric), which maps the
    prediction from W0 into minus the prediction from -W0, so the expected loss, a convex quadratic in W0, is even
    in W0. A fitted W0 is then estimation noise (measured at the defaults: +0.4% test loss, 5 paired standard
    errors, at 1024 tuning sequences). With h > 1 the lag-j block of φ flips by (-1)^j as well, and only W0's blocks
    of even lag vanish."""
    inputs, targets = _tuning_batch(task, seed, n_sequences)
    return fit_gd(inputs, targets, steps, history, learn_W0)


def fit_gd(inputs: torch.Tensor, targets: torch.Tensor, steps: int = 1, history: int = 1,
           learn_W0: bool = True) -> GDReferee:
    """The K-step GD referee (η, and with ``learn_W0`` W0) whose predictions from ``inputs`` (B, T, d) are closest
    to ``targets`` (B, T, d) in the mean per-position ½ ‖·‖²: W0 in closed form at every η, η by L-BFGS over log η
    (``tune_gd``'s fit). With the next tokens as targets it tunes the referee; with a trained model's predictions it
    reads off the (η, W0) the model is closest to."""
    inputs, targets = inputs.to(F64), targets.to(F64)
    phi, G, M = pair_moments(inputs, history)

    def fit(eta: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        free, carried = gd_predictions(phi, G, M, eta, None, steps)
        if not learn_W0:
            return None, position_losses(free, targets).mean()
        a, r = carried.flatten(0, 1), (targets - free).flatten(0, 1)  # W0 = argmin Σ ‖r - W0 a‖²
        W0 = torch.linalg.solve(a.T @ a, a.T @ r).T
        return W0, position_losses(free + carried @ W0.T, targets).mean()

    start = 1.0 / float(torch.diagonal(G, dim1=-2, dim2=-1).sum(-1).mean())
    eta = tune_step_size(lambda e: fit(e)[1], start)
    with torch.no_grad():
        W0, _ = fit(torch.tensor(eta, dtype=F64))
    return GDReferee(eta, W0, steps, history)


def tune_online_gd(task: LinearDynamicsTask, seed: int, n_sequences: int = 256, history: int = 1
                   ) -> OnlineGDReferee:
    """The delta rule's η minimising the mean per-position loss on TUNE-stream sequences (L-BFGS over log η from
    η = 1 / mean ‖φ‖²).

    The delta rule multiplies its error along φ_t by 1 - η ‖φ_t‖² at each step, so a sequence with η ‖φ_t‖² > 2
    all along grows geometrically; under the orthogonal law ‖s_t‖ stays near ‖s_1‖, and the held-out loss at η
    above the tuned one has a heavy tail (one sequence in several hundred makes its mean). At the tuned η the
    loss stays finite on held-out sequences (d_s = 5, T = 20: max 1.1 over 512, median 0.19); compare its
    held-out losses through a statistic with a finite variance (``tests/test_sequence.py``)."""
    inputs, targets = _tuning_batch(task, seed, n_sequences)
    phi = lagged_features(inputs, history)

    def loss(eta: torch.Tensor) -> torch.Tensor:
        weights = online_gd_weights_per_token(phi[:, :-1], inputs[:, 1:], eta)
        return position_losses(predict_with(weights, phi), targets).mean()

    return OnlineGDReferee(tune_step_size(loss, 1.0 / float((phi * phi).sum(-1).mean())), history)
