"""Sequences of linear dynamical systems (von Oswald et al. 2023b, "Uncovering mesa-optimization algorithms in
Transformers", §2 and App. A), one fresh transition matrix W per sequence:

    s_1 ~ U(-r, r)^{d_s},   s_{t+1} = clip(W s_t + σ ε_t, ±c),   ε_t ~ N(0, I),

as the authors' generator draws them (mtavit/transformers_mesa_optimization_paper at commit
0512b9b7f9aefd45e84326bff6f5594d52c1a1c8, src/data/seq/linear_seq.py, ``create_batch`` and ``generate_sequence``;
defaults from configs/config.py, ``data_configurator``): W a random orthogonal matrix (``jax.random.orthogonal``,
Haar, unscaled), d_s = 10, r = 1, σ = 0.01, c = 10, T = 50 positions scored (T + 1 states drawn: the model reads
s_1..s_T and is scored on s_2..s_{T+1}). For orthogonal W the clip never binds at these sizes (‖s_t‖ stays
within ‖s_1‖ ≤ √d_s plus the noise's random walk).

Partially observed (the same file, ``eye_obs=False``): the model sees o_t = C s_t + σ_o ξ_t, C (d_o, d_s) with
entries 0.5 N(0, 1), one C per sequence, ξ_t ~ N(0, I); fully observed is o_t = s_t (their ``eye_obs=True``).

A position t = 1..T is scored on next-token squared error ½ ‖ô_{t+1} - o_{t+1}‖², the project's ½ convention,
which is theirs: their per-position loss (the sandbox notebook's ``loss_fn``) is Σ (p - t)² / (2B) over the batch
and coordinates, and their training loss (src/train.py, ``_compute_loss``) its mean over the T positions.

A batch is a pure function of (task, seed, step, stream) (``icl_gd.regression.tasks.AddressedTask``); every draw is
made in float64 and then cast, so a float32 batch is the float64 batch rounded. Shapes: B sequences, T positions,
d_s the state, d_o the observation, d the width a predictor sees (d_o, or d_s when fully observed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import torch

from icl_gd.core.config import require_non_negative, require_positive, require_positive_int, require_positive_ints
from icl_gd.core.errors import ConfigError
from icl_gd.regression.tasks import AddressedTask

F64 = torch.float64


# ---------------------------------------------------------------------------------------------- laws of W and C
@dataclass(frozen=True)
class OrthogonalTransitions:
    """W = scale · Q, Q Haar-random orthogonal (the QR factor of a Gaussian matrix, the signs of R's diagonal moved
    into Q). The authors' law at scale 1; each entry has E W_ij² = scale² / d_s."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        require_positive("the orthogonal transitions' scale", self.scale)

    def entry_variance(self, d_s: int) -> float:
        return self.scale ** 2 / d_s

    def sample(self, batch_size: int, d_s: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        """(B, d_s, d_s) in float64."""
        q, r = torch.linalg.qr(torch.randn(batch_size, d_s, d_s, generator=gen, device=device, dtype=F64))
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
        return q if self.scale == 1.0 else self.scale * q


@dataclass(frozen=True)
class GaussianTransitions:
    """W with i.i.d. N(0, std²) entries: not the authors' law, but the one whose Bayes-optimal next-token predictor
    is closed (``referees.bayes_ridge``: the posterior mean is ridge with λ = σ² / std²). The spectral radius is
    about std √d_s: keep it below 1 for sequences that do not grow."""

    std: float = 0.15

    def __post_init__(self) -> None:
        require_positive("the Gaussian transitions' std", self.std)

    def entry_variance(self, d_s: int) -> float:
        return self.std ** 2

    def sample(self, batch_size: int, d_s: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
        return self.std * torch.randn(batch_size, d_s, d_s, generator=gen, device=device, dtype=F64)


TransitionLaw = Union[OrthogonalTransitions, GaussianTransitions]


@dataclass(frozen=True)
class PartialObservation:
    """o_t = C s_t + noise · ξ_t with C (d_o, d_s) of i.i.d. scale · N(0, 1) entries, one C per sequence: the
    authors' ``eye_obs=False`` (scale 0.5, their ``noise_obs`` 0 by default)."""

    d_o: int
    scale: float = 0.5
    noise: float = 0.0

    def __post_init__(self) -> None:
        require_positive_int("the observed dimension d_o", self.d_o)
        require_positive("the observation matrix's scale", self.scale)
        require_non_negative("the observation noise", self.noise)


# ---------------------------------------------------------------------------------------------------- batches
@dataclass(frozen=True)
class SequenceBatch:
    """B sequences of T + 1 tokens. states (B, T+1, d_s) s_1..s_{T+1}; observed (B, T+1, d) what a predictor sees
    (the states themselves when fully observed); W (B, d_s, d_s); C (B, d_o, d_s) or None when fully observed."""

    states: torch.Tensor
    observed: torch.Tensor
    W: torch.Tensor
    C: torch.Tensor | None = None

    @property
    def inputs(self) -> torch.Tensor:  # (B, T, d): tokens 1..T, what a predictor reads
        return self.observed[:, :-1]

    @property
    def targets(self) -> torch.Tensor:  # (B, T, d): tokens 2..T+1, what position t is scored on
        return self.observed[:, 1:]

    def to(self, device=None, dtype=None) -> "SequenceBatch":
        return SequenceBatch(*(None if t is None else t.to(device, dtype)
                               for t in (self.states, self.observed, self.W, self.C)))


@dataclass(frozen=True)
class LinearDynamicsTask(AddressedTask):
    """Linear dynamical systems (module docstring): ``d_s`` the state dimension, ``length`` T the positions scored,
    ``noise`` σ the transition noise's std, ``initial_range`` r (s_1 ~ U(-r, r)), ``clip`` c (states clipped to
    [-c, c] after every step), ``transitions`` the law of W, ``observation`` None (fully observed) or
    ``PartialObservation``. Defaults: the authors' configuration."""

    d_s: int = 10
    length: int = 50
    noise: float = 0.01
    initial_range: float = 1.0
    clip: float = 10.0
    transitions: TransitionLaw = field(default_factory=OrthogonalTransitions)
    observation: PartialObservation | None = None

    def __post_init__(self) -> None:
        require_positive_ints(self, "d_s", "length")
        require_non_negative("the transition noise σ", self.noise)
        require_positive("the initial state's range r", self.initial_range)
        require_positive("the state clip c", self.clip)
        if not isinstance(self.transitions, (OrthogonalTransitions, GaussianTransitions)):
            raise ConfigError(f"transitions must be OrthogonalTransitions or GaussianTransitions, got "
                              f"{type(self.transitions).__name__}")
        if self.observation is not None and not isinstance(self.observation, PartialObservation):
            raise ConfigError(f"observation must be None or PartialObservation, got {type(self.observation).__name__}")

    @property
    def d(self) -> int:
        """The width of what a predictor sees: d_o when partially observed, else d_s."""
        return self.d_s if self.observation is None else self.observation.d_o

    def draw(self, batch_size: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype) -> SequenceBatch:
        B, T, d_s = batch_size, self.length, self.d_s
        W = self.transitions.sample(B, d_s, gen, device)
        s = (2 * torch.rand(B, d_s, generator=gen, device=device, dtype=F64) - 1) * self.initial_range
        eps = torch.randn(B, T, d_s, generator=gen, device=device, dtype=F64)
        states = [s]
        for t in range(T):
            s = (W @ s[..., None])[..., 0] + self.noise * eps[:, t]
            s = s.clamp(-self.clip, self.clip)
            states.append(s)
        states = torch.stack(states, dim=1)  # (B, T+1, d_s)
        observed, C = states, None
        if self.observation is not None:
            obs = self.observation
            C = obs.scale * torch.randn(B, obs.d_o, d_s, generator=gen, device=device, dtype=F64)
            xi = torch.randn(B, T + 1, obs.d_o, generator=gen, device=device, dtype=F64)
            observed = states @ C.transpose(1, 2) + obs.noise * xi
        return SequenceBatch(states, observed, W, C).to(dtype=dtype)


# ------------------------------------------------------------------------------------------------------- scoring
Referee = Callable[[torch.Tensor], torch.Tensor]  # inputs (B, T, d) -> predictions (B, T, d) of the next token


def position_losses(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(T,) ½ ‖ŝ_{t+1} - s_{t+1}‖² at every position, averaged over the batch (predictions, targets (B, T, d))."""
    if predictions.shape != targets.shape:
        raise ConfigError(f"predictions {tuple(predictions.shape)} and targets {tuple(targets.shape)} differ")
    return 0.5 * ((predictions - targets) ** 2).sum(-1).mean(0)


def per_position_loss(predictor: Referee, batch: SequenceBatch) -> torch.Tensor:
    """(T,) the next-token loss of ``predictor`` (inputs (B, T, d) -> predictions (B, T, d)) at every position of
    ``batch``; its mean over positions is the authors' training loss."""
    return position_losses(predictor(batch.inputs), batch.targets)
