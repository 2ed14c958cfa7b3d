"""Attribution scores of every training example for test queries: the dual form's, dattri's, and random.

Every method returns ``(nq, N)`` scores τ_i(q) with one sign convention: the predicted effect on the query's
target (the logit of the class the trained model predicts) of having example i in the training set, so a large
positive score is a proponent. Attention is unsigned (a magnitude, not an effect), and is scored as it is.

- The dual form (``dual_scores``; ``icl_gd.dual.scan``): per layer, an example's attention is Σ |a_u| over its
  units (one per step it was seen) and its contribution Σ c_u, c_u = (r·v_u)(k_u·q) + r·v^b_u with r the gradient
  of the target with respect to the layer's output. On the output layer Σ_i contribution_i plus the initial
  weights' part is exactly the target; on the others it is first order. Summed over layers: contributions add (one
  unit, the logit); attention is summed as each layer's share of the query's attention (its layers' scales differ).
- dattri (``dattri_scores``, the optional extra ``attribution``): TracIn-CP (Pruthi et al. 2020) over the per-epoch
  checkpoints weighted by each epoch's learning rate, TRAK (Park et al. 2023) with a random projection, and the
  influence function with an explicit inverse Hessian restricted to the output layer (the full Hessian of the MLP
  does not fit a 2-core budget). TracIn and the influence function score ∇target·(H⁻¹)∇loss_i; training on i moves
  the parameters along -∇loss_i, so their effect on the target is minus that, and they are negated here. TRAK's
  train gradients are of the margin log p/(1-p) (an output that training on i raises), so its score is the effect.
- ``random_scores``: N(0, 1) per (query, example), the baseline every method must beat.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icl_gd.core.errors import ConfigError
from icl_gd.dual.classifier import MLP
from icl_gd.dual.settings import LAYERS, TrainedSetting

EXTRA = "attribution"  # pyproject's optional extra that installs dattri
DATTRI_METHODS = ("tracin", "trak", "influence")
DUAL_METHODS = tuple(f"{kind}_{layer}" for kind in ("attention", "contribution") for layer in (*LAYERS, "sum"))


def require_dattri():
    """The ``dattri`` package, or a one-line ``ConfigError`` naming the extra that installs it."""
    try:
        return importlib.import_module("dattri")
    except ImportError:
        raise ConfigError(f"dattri methods ({', '.join(DATTRI_METHODS)}) need the optional extra: "
                          f"pip install 'icl-gd[{EXTRA}]' (or drop them from methods)") from None


def dual_scores(trained: TrainedSetting, x: torch.Tensor, n_examples: int,
                block_rows: int = 32768) -> dict[str, np.ndarray]:
    """The dual form's ``(nq, N)`` scores of the queries ``x (nq, D)`` against the store ``trained`` recorded:
    ``attention_<layer>``, ``contribution_<layer>`` for each of ``LAYERS`` and their sums over layers (``_sum``),
    computed in float64. The read-out of every query is its predicted class's logit."""
    form = trained.dual_form()
    batch = form.inputs(x)
    out: dict[str, np.ndarray] = {}
    for name in LAYERS:
        s = form.score(name, batch.query(name), batch.readout(name), k=1,
                       n_classes=trained.model.output.out_features, n_epochs=trained.n_epochs,
                       n_examples=n_examples, block_rows=block_rows, dtype=torch.float64)
        out[f"attention_{name}"] = s.attention_by_example
        out[f"contribution_{name}"] = s.contribution_by_example
    out["attention_sum"] = sum(out[f"attention_{name}"] / out[f"attention_{name}"].sum(1, keepdims=True)
                               for name in LAYERS)
    out["contribution_sum"] = sum(out[f"contribution_{name}"] for name in LAYERS)
    return out


def random_scores(n_queries: int, n_examples: int, seed: int) -> np.ndarray:
    """(nq, N) standard normal scores: an attribution that knows nothing."""
    return np.random.default_rng(seed).standard_normal((n_queries, n_examples))


@dataclass(frozen=True)
class DattriSettings:
    """How dattri's methods are run: TRAK's projection size and ridge, the influence function's damping."""

    trak_projection_dim: int = 512
    trak_regularization: float = 0.0
    influence_damping: float = 0.01
    seed: int = 0  # the random projection's


def _single(image: torch.Tensor) -> torch.Tensor:
    # dattri calls the loss one example at a time under vmap ((D,)) and, for the Hessian, on a whole batch ((B, D)).
    return image.unsqueeze(0) if image.ndim == 1 else image


def dattri_scores(model: MLP, checkpoints: Sequence[dict], epoch_lrs: Sequence[float],
                  train_x: np.ndarray, train_y: np.ndarray, query_x: np.ndarray, query_class: np.ndarray,
                  methods: Sequence[str], settings: DattriSettings) -> dict[str, np.ndarray]:
    """``(nq, N)`` scores of ``methods`` (of ``DATTRI_METHODS``) for the queries ``query_x (nq, D)`` and their
    target classes ``query_class (nq,)``, against ``train_x (N, D)``, ``train_y (N,)``. ``model`` gives the
    architecture; ``checkpoints`` are its state dicts after each epoch (the last: the trained model) and
    ``epoch_lrs`` each epoch's learning rate (TracIn's weights). dattri runs in float32 on the CPU."""
    require_dattri()
    from dattri.algorithm import IFAttributorExplicit, TracInAttributor, TRAKAttributor
    from dattri.task import AttributionTask
    from torch.utils.data import DataLoader, TensorDataset

    unknown = [m for m in methods if m not in DATTRI_METHODS]
    if unknown:
        raise ConfigError(f"unknown dattri methods {unknown}; known: {', '.join(DATTRI_METHODS)}")
    net = MLP(model.input.in_features, model.input.out_features, model.output.out_features,
              torch.Generator()).float().eval()  # the architecture only: dattri loads each checkpoint into it
    checkpoints = [{k: v.detach().to("cpu", torch.float32) for k, v in state.items()} for state in checkpoints]

    def loss(params, data):
        image, label = data
        return nn.functional.cross_entropy(torch.func.functional_call(net, params, _single(image)), label.reshape(-1))

    def margin(params, data):  # log p/(1-p) of the label: TRAK's output function
        logp = -loss(params, data)
        return logp - torch.log1p(-torch.exp(logp))

    def correct_probability(params, data):
        return torch.exp(-loss(params, data))

    def target(params, data):  # the logit of the query's target class
        image, cls = data
        return torch.gather(torch.func.functional_call(net, params, _single(image)), 1, cls.reshape(1, 1)).sum()

    train = TensorDataset(torch.as_tensor(train_x, dtype=torch.float32), torch.as_tensor(train_y))
    test = TensorDataset(torch.as_tensor(query_x, dtype=torch.float32), torch.as_tensor(query_class))
    # Whole sets as one batch: dattri recomputes the test side for every train batch (N x parameters floats: 52 MB
    # for the default digits MLP).
    train_loader = DataLoader(train, batch_size=len(train), shuffle=False)
    test_loader = DataLoader(test, batch_size=len(test), shuffle=False)
    out: dict[str, np.ndarray] = {}
    torch.manual_seed(settings.seed)  # dattri's random projections draw from the global generator
    # dattri draws a tqdm bar on stderr for every pass over the data: kept out of the run's progress lines.
    with contextlib.redirect_stderr(io.StringIO()):
        if "tracin" in methods:
            task = AttributionTask(loss_func=loss, model=net, checkpoints=list(checkpoints), target_func=target)
            tracin = TracInAttributor(task, weight_list=torch.tensor(list(epoch_lrs), dtype=torch.float32),
                                      normalized_grad=False, projector_kwargs={"device": "cpu"})
            out["tracin"] = -tracin.attribute(train_loader, test_loader).detach().T.double().numpy()
        if "trak" in methods:
            task = AttributionTask(loss_func=margin, model=net, checkpoints=[checkpoints[-1]], target_func=target)
            trak = TRAKAttributor(task, correct_probability_func=correct_probability, device="cpu",
                                  projector_kwargs={"device": "cpu", "proj_dim": settings.trak_projection_dim,
                                                    "proj_seed": settings.seed},
                                  regularization=settings.trak_regularization)
            trak.cache(train_loader)
            out["trak"] = trak.attribute(test_loader).detach().T.double().numpy()
        if "influence" in methods:
            task = AttributionTask(loss_func=loss, model=net, checkpoints=[checkpoints[-1]], target_func=target)
            influence = IFAttributorExplicit(task, layer_name=["output.weight", "output.bias"], device="cpu",
                                             regularization=settings.influence_damping)
            influence.cache(train_loader)  # one batch: the mean training loss's Hessian
            out["influence"] = -influence.attribute(train_loader, test_loader).detach().T.double().numpy()
    return out
