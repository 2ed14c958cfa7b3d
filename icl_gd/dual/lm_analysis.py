"""What a trained LSTM language model's dual form says about its next-word predictions.

A query is a position in the test text: the model reads the ``context`` words up to it from a zero state and
predicts the next word. Each recorded layer's query is its input at that last step (the output layer: h_t; gate
layer l: [x_t; h_{t-1}]), scored against every stored key (blocked, by ``scan.scan_units`` as for images, through
``form.DualForm``): attention a_u = |k_u·q + 1| and contribution c_u = (r·v_u)(k_u·q + 1) to the predicted word's
logit, where r = ∂ logit / ∂ (layer output at the last step): one-hot for the output layer, where Σ_u c_u plus the initial
weights' part is the logit exactly; for gate layers it is the first-order effect through the last step's gates.

Per layer: verification against the trained weights, top keys (with their training passages), how often the top
keys' next word is the predicted word, entropy and effective number of keys, attention over training steps,
sorted attention curves, and key removal: the predicted word's probability after dropping a query's top-k keys
from the layer against dropping k random keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from icl_gd.core.config import check_settings, positive_int
from icl_gd.core.errors import ConfigError
from icl_gd.dual import metric_names as names
from icl_gd.dual.corpus import Corpus
from icl_gd.dual.lstm import OUTPUT, LSTMLanguageModel, layer_modules
from icl_gd.dual.form import DualForm
from icl_gd.dual.layer import DualLayer, UnitBlock
from icl_gd.dual.scan import ScoreFunction, TopUnits, scan_units
from icl_gd.dual.verification import DualVerification

CURVE_POINTS = 200  # log-spaced ranks kept of each sorted attention curve
# Top units kept per query: enough that a passage seen in many epochs (an over-fitted book) still leaves three
# distinct training positions to show.
TOP_UNITS = 64


@dataclass(frozen=True)
class LMAnalysisConfig:
    """The test queries scored against the stored keys, and what is shown of them."""

    n_queries: int = positive_int(100, "test positions scored against every stored key")
    context: int = positive_int(100, "tokens each query reads (from a zero state) before predicting the next (the "
                                     "authors' lm.example_context)")
    top_k: int = positive_int(10, "keys per query for the next-word match and kept as top lists")
    n_passages: int = positive_int(5, "queries shown in passages.md/html with their top-3 training passages per layer")
    removal_keys: int = positive_int(10, "keys dropped per query and layer: its top-k by attention vs k random keys")
    step_bins: int = positive_int(20, "bins of training steps for the attention-over-training curve")
    verify_queries: int = positive_int(32, "queries on which each layer's dual outputs are compared with the primal")
    block_rows: int = positive_int(4096, "keys scored per block (an output-layer value is vocabulary-wide)")

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class LMQueries:
    """``tokens (C, nq)`` read by the queries, their test-stream ``position (nq,)`` (of the last word read), the
    true next word ``target (nq,)``, the prediction ``pred (nq,)`` and its probability ``prob (nq,)``; per layer
    the query vectors ``(nq, in)`` and read-outs ``(nq, out)``."""

    tokens: torch.Tensor
    position: np.ndarray
    target: np.ndarray
    pred: np.ndarray
    prob: np.ndarray
    inputs: dict[str, np.ndarray]
    readouts: dict[str, np.ndarray]


def query_positions(n_test: int, n: int, context: int) -> np.ndarray:
    """``n`` positions spread evenly over the test stream, each with ``context`` words read and a next word."""
    if n_test < context + 1:
        raise ConfigError(f"the test split has {n_test} tokens, fewer than context={context} + 1")
    return np.unique(np.linspace(context - 1, n_test - 2, n).round().astype(np.int64))


def last_step(model: LSTMLanguageModel, tokens: torch.Tensor) -> tuple[torch.Tensor, object, torch.Tensor]:
    """Run ``tokens (C, nq)`` from a zero state: ``(logits of the last step (nq, V), capture, h_last)``."""
    h, _, capture = model.hidden_states(tokens, model.initial_state(tokens.shape[1]), capture=True)
    return model.output(h[-1]), capture, h[-1]


def make_queries(model: LSTMLanguageModel, corpus: Corpus, config: LMAnalysisConfig) -> LMQueries:
    position = query_positions(len(corpus.test), config.n_queries, config.context)
    offsets = np.arange(-config.context + 1, 1)
    device = model.output.weight.device
    tokens = torch.as_tensor(corpus.test.ids[position[None, :] + offsets[:, None]], device=device)
    names = list(layer_modules(model))
    with torch.enable_grad():
        logits, capture, h_last = last_step(model, tokens)
        pred = logits.argmax(1)
        picked = logits.gather(1, pred[:, None]).sum()
        last = [z[-1] for z in capture.preactivations]
        grads = torch.autograd.grad(picked, [*last, logits])
    inputs = {name: keys[-1].detach().cpu().double().numpy() for name, keys in zip(names, capture.keys)}
    inputs[OUTPUT] = h_last.detach().cpu().double().numpy()
    readouts = {name: g.detach().cpu().double().numpy() for name, g in zip(names, grads)}
    prob = torch.softmax(logits.detach().double(), 1).gather(1, pred[:, None])[:, 0]
    return LMQueries(tokens, position, corpus.test.ids[position + 1], pred.cpu().numpy(), prob.cpu().numpy(),
                     inputs, readouts)


@dataclass(frozen=True)
class LMScores:
    """One layer's scores for ``nq`` queries: top-k by attention and by contribution, attention totals, entropy,
    attention per step bin ``(nq, bins)`` and per epoch ``(nq, E)``, sorted attention curves ``(nc, points)`` of
    the first ``nc`` queries (share of the total at ``curve_rank``)."""

    attention_top: TopUnits
    proponents: TopUnits
    attention_total: np.ndarray
    entropy: np.ndarray
    attention_by_bin: np.ndarray
    attention_by_epoch: np.ndarray
    curve_rank: np.ndarray
    curves: np.ndarray
    n_keys: int

    @property
    def effective_keys(self) -> np.ndarray:
        return np.exp(self.entropy)


def score_lm(layer: DualLayer, queries: np.ndarray, readouts: np.ndarray, k: int, step_bins: int, n_epochs: int,
             n_curves: int, block_rows: int = 4096) -> LMScores:
    """Score ``queries (nq, in)`` with ``readouts (nq, out)`` against every key of ``layer`` (``scan_units``:
    float32 products, float64 totals); the first ``n_curves`` queries also keep their full attention for the
    curves."""
    nq = len(queries)
    n_keys = layer.store.table("rows").rows
    n_steps = max(layer.n_steps, 1)
    step_bins = min(step_bins, n_steps)  # no empty bins on short runs
    total = torch.zeros(nq, dtype=torch.float64)
    by_group = torch.zeros(nq, step_bins + n_epochs, dtype=torch.float64)
    n_curves = min(n_curves, nq)
    full = np.zeros((n_curves, n_keys), dtype=np.float32)

    def add(block: UnitBlock, attention: torch.Tensor, contribution: torch.Tensor) -> None:
        first, b = int(block.row[0]), len(block.row)
        steps = np.minimum(block.step, n_steps - 1)
        groups = np.concatenate([np.minimum(steps * step_bins // n_steps, step_bins - 1)[:, None],
                                 step_bins + np.minimum(block.epoch, n_epochs - 1)[:, None]], 1)
        onehot = torch.zeros(b, step_bins + n_epochs, dtype=torch.float32)
        onehot.scatter_(1, torch.from_numpy(groups.astype(np.int64)), 1.0)
        by_group.add_((attention @ onehot).double())
        total.add_(attention.sum(1).double())
        if n_curves:
            full[:, first:first + b] = attention[:n_curves].numpy()

    scan = scan_units(layer, queries, readouts, k, block_rows, [ScoreFunction(add)])
    rank = np.unique(np.geomspace(1, max(n_keys, 1), CURVE_POINTS).astype(np.int64)) - 1
    curves = np.sort(full, axis=1)[:, ::-1][:, rank] / np.maximum(total[:n_curves, None].numpy(), 1e-300)
    groups = by_group.numpy()
    return LMScores(scan.attention_top, scan.proponents, total.numpy(), scan.entropy(total).numpy(),
                    groups[:, :step_bins], groups[:, step_bins:], rank + 1, curves, n_keys)


def removal_drops(form: DualForm, name: str, queries: LMQueries, selected: np.ndarray) -> np.ndarray:
    """``(nq,)`` drop of each query's predicted-word probability when the units ``selected[j] (k,)`` are removed
    from layer ``name`` (W - Σ v kᵀ, b - Σ v^b), the query's words read again from a zero state."""
    # Every selected unit read once (a query's k rows are few, the chunks they lie in many).
    unique, inverse = np.unique(selected, return_inverse=True)
    key, value, bias = form.layer(name).gather(unique)
    inverse = inverse.reshape(selected.shape)
    drops = np.zeros(len(selected))
    for j in range(len(selected)):
        units = inverse[j]
        delta_b = None if bias is None else bias[units].sum(0)
        with form.subtracted(name, value[units].T @ key[units], delta_b) as model, torch.no_grad():
            logits, _, _ = last_step(model, queries.tokens[:, j:j + 1])
            prob = torch.softmax(logits.double(), 1)[0, int(queries.pred[j])]
        drops[j] = queries.prob[j] - float(prob)
    return drops


@dataclass(frozen=True)
class LayerAnalysis:
    """One recorded layer: its verification, its scores and the removal drops of every query."""

    verification: DualVerification
    scores: LMScores
    drop_top: np.ndarray  # (nq,)
    drop_random: np.ndarray  # (nq,)

    @property
    def name(self) -> str:
        return self.verification.layer


def analyse_layer(form: DualForm, name: str, queries: LMQueries, config: LMAnalysisConfig, n_epochs: int,
                  rng: np.random.Generator) -> LayerAnalysis:
    """Verify layer ``name``, score the queries against its keys, and remove each query's top keys vs random ones
    (``rng`` draws the random keys)."""
    layer = form.layer(name)
    q, r = queries.inputs[name], queries.readouts[name]
    verification = form.verify(name, q[:config.verify_queries], block_rows=config.block_rows)
    k = max(config.top_k, config.removal_keys, TOP_UNITS)
    scores = score_lm(layer, q, r, k, config.step_bins, n_epochs, config.n_passages, config.block_rows)
    n_keys = scores.n_keys
    top = scores.attention_top.row[:, :config.removal_keys]
    random = rng.integers(0, n_keys, size=top.shape)
    drop_top = removal_drops(form, name, queries, top)
    drop_random = removal_drops(form, name, queries, random)
    return LayerAnalysis(verification, scores, drop_top, drop_random)


def layer_metrics(a: LayerAnalysis, queries: LMQueries, top_k: int) -> dict[str, float]:
    s = a.scores
    match = s.attention_top.label[:, :top_k] == queries.pred[:, None]
    match_contribution = s.proponents.label[:, :top_k] == queries.pred[:, None]
    epoch_share = s.attention_by_epoch / s.attention_total[:, None]
    bin_share = s.attention_by_bin / s.attention_total[:, None]
    return {
        "verify_weight_rel_error": a.verification.weight_max_rel_error,
        "verify_output_rel_error": a.verification.output_max_rel_error,
        names.VERIFY_MAX_REL_ERROR: a.verification.max_rel_error,
        "unexplained_share_max": a.verification.max_unexplained_share,  # the dual residual: > 0 under Adam
        "n_keys": float(s.n_keys),
        "attention_entropy": float(np.mean(s.entropy)),  # nats, of p_u = |a_u| / Σ|a|
        "effective_keys": float(np.mean(s.effective_keys)),
        "effective_keys_share": float(np.mean(s.effective_keys) / max(s.n_keys, 1)),
        names.TOP_KEY_NEXT_WORD_MATCH: float(np.mean(match)),
        "top_contribution_next_word_match": float(np.mean(match_contribution)),
        "attention_share_last_epoch": float(np.mean(epoch_share[:, -1])),
        "attention_share_last_step_bin": float(np.mean(bin_share[:, -1])),
        names.REMOVAL_PROB_DROP_TOP: float(np.mean(a.drop_top)),
        names.REMOVAL_PROB_DROP_RANDOM: float(np.mean(a.drop_random)),
    }


# ---------------------------------------------------------------------------------------------- passages
def passage(corpus: Corpus, position: int, before: int, after: int = 3) -> tuple[str, list[str], str, list[str]]:
    """The training words around stream ``position`` within its document: ``(title, words before, the key's word,
    words after (the first is the next word))``."""
    stream = corpus.train
    doc = stream.document[position]
    lo, hi = max(0, position - before), min(len(stream), position + 1 + after)
    same = stream.document[lo:hi] == doc
    idx = np.arange(lo, hi)[same]
    words = corpus.words(stream.ids[idx])
    at = int(np.searchsorted(idx, position))
    return corpus.titles[doc], words[:at], words[at], words[at + 1:]


@dataclass(frozen=True)
class PassageEntry:
    """One shown training passage: its document title, the tokens around the key's token, the score of its best
    unit, its step and epoch, and how many of the query's top units fall on the same training position."""

    title: str
    before: list[str]
    word: str
    after: list[str]
    score: float
    step: int
    epoch: int
    repeats: int


def passage_entries(corpus: Corpus, top: TopUnits, j: int, n: int, before: int) -> list[PassageEntry]:
    """The first ``n`` distinct training positions among query ``j``'s top units (as the authors' script shows
    them: a position seen in several epochs is shown once, with its count among the top units)."""
    examples = [int(e) for e in top.example[j]]
    entries, shown = [], set()
    for i, example in enumerate(examples):
        if example in shown:
            continue
        shown.add(example)
        title, pre, word, post = passage(corpus, example, before)
        entries.append(PassageEntry(title, pre, word, post, float(top.score[j, i]), int(top.step[j, i]),
                                    int(top.epoch[j, i]), examples.count(example)))
        if len(entries) == n:
            break
    return entries


def analyse_lm(model: LSTMLanguageModel, store: Path, corpus: Corpus, config: LMAnalysisConfig, n_epochs: int,
               seed: int) -> tuple[LMQueries, list[LayerAnalysis]]:
    """Queries, then every recorded layer's analysis (recording order: gate layers, then the output layer)."""
    queries = make_queries(model, corpus, config)
    form = DualForm(store, model, layer_modules(model))
    rng = np.random.default_rng(seed)
    return queries, [analyse_layer(form, name, queries, config, n_epochs, rng) for name in form.names]
