"""The dual form of an LSTM language model, checked exactly: every gate map and the output layer.

Layer l's gate pre-activations z_t = W_l [x_t; h_{t-1}] + b_l are linear in the key [x_t; h_{t-1}; 1], so truncated
BPTT with SGD ends at W_T = a W_0 + Σ_u v_u k_uᵀ over every (token, step) unit, with values v_u = c_s δ_t. Each
check trains a small two-layer LSTM LM in float64 on a random token stream (momentum, weight decay, per-epoch lr
decay, global-norm clipping; embedding dropout and a step budget) while ``icl_gd.dual`` records it, then rebuilds every recorded layer's weights and its
dual outputs W_0 q + Σ v (k·q) on random queries and compares them with the trained model's own parameters.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from icl_gd.dual.corpus import tokenise
from icl_gd.dual.form import DualForm
from icl_gd.dual.lm_training import LMTrainingConfig, TrainedLM, train_lm
from icl_gd.dual.lstm import layer_modules
from icl_gd.dual.text_sources import Document, RawCorpus
from icl_gd.dual.verification import DualVerification

from icl_gd.constructions.verify import CheckResult, IdentityCheck, merge

TOLERANCE = 1e-10
TINY = LMTrainingConfig(embed=5, hidden=6, layers=2, bptt=7, batch_size=4, epochs=2, lr=0.5, momentum=0.9,
                        weight_decay=0.01, lr_decay=0.5, grad_clip=0.3, dtype="float64", key_dtype="float64",
                        checkpoint_every=1000)


def random_corpus(seed: int = 0, documents: int = 10, words: int = 300, vocab: int = 30):
    """Ten documents of uniformly random words; vocabulary capped below the word count so ``<unk>`` occurs."""
    rng = np.random.default_rng(seed)
    names = [f"w{i}" for i in range(vocab)]
    docs = tuple(Document(f"doc {d}", tuple(rng.choice(names, words))) for d in range(documents))
    return tokenise(RawCorpus("random", docs), vocab - 10)


def verify_trained(trained: TrainedLM, n_queries: int = 6, seed: int = 1) -> list[DualVerification]:
    """Each recorded layer against the trained model's parameters, on random queries."""
    form = DualForm(trained.store, trained.model, layer_modules(trained.model))
    rng = np.random.default_rng(seed)
    return [form.verify(name, rng.standard_normal((n_queries, form.modules[name].in_features)), against="model")
            for name in form.names]


def _check(config: LMTrainingConfig, seed: int) -> CheckResult:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trained = train_lm(config, random_corpus(seed), seed, root / "store", root / "checkpoint.pt",
                           torch.device("cpu"))
        results = verify_trained(trained)
    return merge([CheckResult(max(r.weight_max_abs_error, r.output_max_abs_error), r.max_rel_error, TOLERANCE)
                  for r in results])


IDENTITY_CHECKS: tuple[IdentityCheck, ...] = (
    IdentityCheck("dual form LSTM LM: 2 layers, SGD momentum+decay+clip+lr decay", lambda: _check(TINY, 0)),
    IdentityCheck("dual form LSTM LM: 1 layer, plain SGD, no clipping",
                  lambda: _check(replace(TINY, layers=1, momentum=0.0, grad_clip=None), 1)),
    IdentityCheck("dual form LSTM LM: embedding dropout 0.3, stopped mid-epoch by steps",
                  lambda: _check(replace(TINY, layers=1, dropout=0.3, steps=11), 2)),
)
