"""Ground truth for attributions by retraining: the linear datamodeling score (LDS) and leave-k-out.

An attribution gives every training example i a score τ_i(q) for a query q: its predicted effect on the query's
target f(q) (here the logit of the class the fully trained model predicts) when the example is in the training
set. Retraining measures that effect:

- **LDS** (Park et al. 2023, "TRAK", §2): draw S random subsets S_j of a fraction α of the training set, retrain on
  each with R seeds and average the target, f̄_j(q); the LDS of a query is the Spearman rank correlation over j
  between the attribution's additive prediction Σ_{i∈S_j} τ_i(q) and f̄_j(q). The several seeds are part of the
  definition: the datamodel predicts the expected output of training, not one run's noise.
- **Leave-k-out**: retrain without the k examples an attribution ranks highest for q (R seeds, averaged) and
  measure how far f(q) moves from the full set's retrained value; random k is the control.

Retraining runs the study's SGD loop without a recorder (``retrain``): on the full set with the same seed it gives
the recorded model's weights bit for bit (tests/test_spotlights.py), so nothing but the removed examples separates a
retrained model from the model whose dual form is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.stats import rankdata
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.dual.classifier import MLP, ClassificationTask
from icl_gd.dual.settings import ClassifierTrainingConfig, mlp_run, train_phase, training_set

# (keep (m,) example indices, seed) -> the target of every query (nq,) after training on those examples.
TrainTargets = Callable[[np.ndarray, int], np.ndarray]


def retrain(config: ClassifierTrainingConfig, task: ClassificationTask, keep: np.ndarray, seed: int,
            device: torch.device, on_epoch: Callable[[int, MLP, float], None] | None = None) -> MLP:
    """Train a fresh MLP on ``task``'s training examples ``keep (m,)`` as ``settings.train_setting`` trains the
    ``single`` setting (``settings.mlp_run`` and ``settings.train_phase``: the same generator draws, SGD, schedule,
    cap and clipping), without recording. ``on_epoch(epoch, model, lr)`` follows every epoch (``lr``: the rate
    the epoch used)."""
    run, generator = mlp_run(config, (task,), seed, device)
    data = training_set((task,), device, examples=keep)
    train_phase(run, data, config, "single", generator, label=f"retraining seed {seed}",
                on_epoch=None if on_epoch is None else lambda epoch, lr: on_epoch(epoch, run.model, lr))
    return run.model


def logits_of(model: nn.Module, x: torch.Tensor, classes: np.ndarray) -> np.ndarray:
    """The logit of ``classes (nq,)`` for the queries ``x (nq, D)``: the target every attribution predicts."""
    with torch.no_grad():
        logits = model(x)
    return logits[torch.arange(len(classes)), torch.as_tensor(classes, device=logits.device)].cpu().numpy()


def random_subsets(n: int, n_subsets: int, fraction: float, seed: int) -> np.ndarray:
    """``(n_subsets, round(fraction·n))`` sorted example indices, each row a uniform subset without replacement."""
    if not 0 < fraction < 1:
        raise ConfigError(f"subset fraction must be in (0, 1), got {fraction}")
    size = int(round(fraction * n))
    rng = np.random.default_rng(seed)
    return np.stack([np.sort(rng.choice(n, size, replace=False)) for _ in range(n_subsets)])


def mean_targets(train_targets: TrainTargets, keep: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
    """(nq,) the targets after training on ``keep``, averaged over the retraining ``seeds``."""
    return np.mean([train_targets(keep, seed) for seed in seeds], axis=0)


def subset_targets(train_targets: TrainTargets, subsets: np.ndarray, seeds: Sequence[int],
                   on_subset: Callable[[int], None] | None = None) -> np.ndarray:
    """(S, nq): for every subset row of ``subsets (S, m)``, the targets averaged over the retraining ``seeds``."""
    rows = []
    for j, keep in enumerate(subsets):
        rows.append(mean_targets(train_targets, keep, seeds))
        if on_subset is not None:
            on_subset(j)
    return np.stack(rows)


def lds(scores: np.ndarray, subsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(nq,) linear datamodeling score per query: the Spearman correlation over subsets j between
    Σ_{i∈S_j} τ_i(q) (``scores (nq, N)``, ``subsets (S, m)`` example indices) and the retrained targets
    ``targets (S, nq)``. A query whose predictions or targets are all tied has no rank correlation: NaN."""
    scores = np.asarray(scores, dtype=np.float64)
    predicted = np.stack([scores[:, keep].sum(axis=1) for keep in subsets])  # (S, nq)
    a, b = rankdata(predicted, axis=0), rankdata(np.asarray(targets, dtype=np.float64), axis=0)
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    norm = np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm > 0, (a * b).sum(axis=0) / np.where(norm > 0, norm, 1.0), np.nan)


def top_examples(scores: np.ndarray, k: int) -> np.ndarray:
    """(k,) indices of the k largest ``scores (N,)``, largest first (ties: the lower index first)."""
    if not 0 < k <= len(scores):
        raise ConfigError(f"k={k} must be in 1..{len(scores)} training examples")
    return np.argsort(-np.asarray(scores), kind="stable")[:k]


def without(n: int, removed: np.ndarray) -> np.ndarray:
    """The example indices 0..n-1 except ``removed``."""
    keep = np.ones(n, dtype=bool)
    keep[np.asarray(removed, dtype=np.int64)] = False
    return np.flatnonzero(keep)
