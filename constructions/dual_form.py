"""The dual form of a trained network (Irie, Csordás & Schmidhuber 2022), checked exactly on a small MLP.

A linear layer trained by SGD ends at W_T = a W_0 + Σ_u v_u k_uᵀ: keys are the layer's inputs on the training
examples, values their error signals times each step's coefficient (learning rate, momentum, Nesterov, coupled
weight decay, gradient clipping, schedule). So W_T q = a W_0 q + Σ_u v_u (k_u·q), attention over every training
input. Each check trains a small two-hidden-layer ReLU MLP in float64 while ``icl_gd.dual`` records it, then
rebuilds every recorded layer's weights and dual outputs and compares them with the primal ones. Training goes
through the library's one SGD loop (``icl_gd.dual.training``), the check through ``icl_gd.dual.form.DualForm``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from icl_gd.core.config import require_non_negative, require_positive, require_positive_ints
from icl_gd.core.optim import make_optimizer, make_schedule
from icl_gd.dual.form import DualForm
from icl_gd.dual.recorder import DualRecorder
from icl_gd.dual.settings import LAYERS, mlp_layers
from icl_gd.dual.store_reader import LayerStore, open_store
from icl_gd.dual.training import EpochLoop, SGDRun, TrainingSet, train_epochs
from icl_gd.dual.verification import DualVerification

from icl_gd.constructions.verify import CheckResult, IdentityCheck, merge

TOLERANCE = 1e-10


@dataclass(frozen=True)
class DualCase:
    """A small recorded training run: SGD settings, loss reduction, bias, optimizer family."""

    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 0.2
    momentum: float = 0.9
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.01
    clip_norm: float | None = 0.3  # global-norm clipping (small enough to trigger)
    schedule_gamma: float = 0.5  # StepLR: lr × gamma every 3 steps
    reduction: Literal["mean", "sum"] = "mean"
    bias: bool = True
    n_examples: int = 48
    batch_size: int = 12
    epochs: int = 3
    d_in: int = 6
    hidden: int = 8
    n_classes: int = 3
    seed: int = 0
    dtype: torch.dtype = torch.float64
    beta1: float = 0.9  # optimizer="adam" (at lr × 0.05)
    beta2: float = 0.999

    def __post_init__(self) -> None:
        require_positive_ints(self, "n_examples", "batch_size", "epochs", "d_in", "hidden", "n_classes")
        require_positive("lr", self.lr)
        if self.clip_norm is not None:
            require_positive("clip_norm", self.clip_norm)
        for name in ("momentum", "dampening", "weight_decay"):
            require_non_negative(name, getattr(self, name))


@dataclass(frozen=True)
class RecordedRun:
    """A finished recorded run: the model, its recorded modules, the training inputs and the store."""

    model: nn.Sequential
    modules: tuple[nn.Linear, ...]
    inputs: torch.Tensor  # (N, d_in)
    labels: torch.Tensor  # (N,)
    store: dict[str, LayerStore]

    def dual_form(self) -> DualForm:
        """The trained MLP in dual form, its layers named ``LAYERS``."""
        return DualForm(self.store, self.model, dict(zip(LAYERS, self.modules)))


def small_mlp(case: DualCase, generator: torch.Generator) -> nn.Sequential:
    """d_in → hidden → hidden → n_classes with ReLU, initialised from ``generator``."""
    model = nn.Sequential(
        nn.Linear(case.d_in, case.hidden, bias=case.bias), nn.ReLU(),
        nn.Linear(case.hidden, case.hidden, bias=case.bias), nn.ReLU(),
        nn.Linear(case.hidden, case.n_classes, bias=case.bias),
    ).to(case.dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=case.dtype) / np.sqrt(p.shape[-1]))
    return model


def train_recorded(case: DualCase, root: Path, key_dtype: str = "float64", check_gradients: bool = True) -> RecordedRun:
    """Train ``small_mlp`` on random data while recording all three linear layers (the first compressed)."""
    g = torch.Generator().manual_seed(case.seed)
    x = torch.randn(case.n_examples, case.d_in, generator=g, dtype=case.dtype)
    y = torch.randint(0, case.n_classes, (case.n_examples,), generator=g)
    model = small_mlp(case, g)
    modules = (model[0], model[2], model[4])
    opt = make_optimizer(case.optimizer, model.parameters(),
                         case if case.optimizer == "sgd" else replace(case, lr=case.lr * 0.05))
    schedule = make_schedule(opt, case.schedule_gamma, every=3)
    recorder = DualRecorder(mlp_layers(modules), opt, root, key_dtype=key_dtype, chunk_rows=40,
                            check_gradients=check_gradients)
    data = TrainingSet(x, y, example=torch.arange(case.n_examples),
                       task=torch.zeros(case.n_examples, dtype=torch.int64))
    loop = EpochLoop(case.epochs, case.batch_size, case.clip_norm, schedule_every="step", reduction=case.reduction)
    train_epochs(SGDRun(model, opt, schedule, recorder), data, loop, g)
    recorder.close()
    return RecordedRun(model, modules, x, y, open_store(root))


def verify_run(run: RecordedRun, n_queries: int = 16) -> list[DualVerification]:
    """Every recorded layer against the stored trained weights, on the first ``n_queries`` training inputs."""
    form = run.dual_form()
    batch = form.inputs(run.inputs[:n_queries], readouts=False)
    return [form.verify(name, batch.query(name)) for name in form.names]


def _check(case: DualCase) -> CheckResult:
    with tempfile.TemporaryDirectory() as tmp:
        results = verify_run(train_recorded(case, Path(tmp)))
    return merge([
        CheckResult(max(r.weight_max_abs_error, r.output_max_abs_error), r.max_rel_error, TOLERANCE)
        for r in results
    ])


IDENTITY_CHECKS: tuple[IdentityCheck, ...] = (
    IdentityCheck("dual form: SGD heavy-ball+decay+clip+schedule, mean loss", lambda: _check(DualCase())),
    IdentityCheck("dual form: SGD Nesterov+decay+clip+schedule, mean loss",
                  lambda: _check(DualCase(nesterov=True, seed=1))),
    IdentityCheck("dual form: SGD momentum+dampening, sum loss, no bias",
                  lambda: _check(DualCase(dampening=0.3, reduction="sum", bias=False, lr=0.02, seed=2))),
    IdentityCheck("dual form: plain SGD+decay+schedule, no clipping",
                  lambda: _check(DualCase(momentum=0.0, clip_norm=None, seed=3))),
)
