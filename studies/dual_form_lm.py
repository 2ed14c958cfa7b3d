"""Study ``dual-form-lm``: which training passages does an LSTM language model attend to while it predicts the next
token? (the language-model half of Irie, Csordás & Schmidhuber 2022)

Two set-ups, as the authors' code has them (``tasks/simple/ff_as_attention/language_lstm_ff_attention*.py`` with
``sweeps/ff_as_attention/ff_as_attention_{aeshop,wikitext2}.yaml``):

- ``book``: a character-level LSTM "overfit" on a small public-domain book (theirs: Aesop's Fables, Project
  Gutenberg 49010; ours: Bierce's *The Devil's Dictionary* from Debian's ``dict-devil``, a book of the same kind and
  size that installs offline: short self-contained pieces, a moral or a gibe each, a few hundred thousand
  characters, each entry titled by its headword as a fable by its title);
- ``wiki``: a word-level LSTM on Wikipedia-like text (theirs: WikiText-2; ours: the largest offline one, the
  Wikipedia articles shipped in gensim's test data, ``data.corpus=auto``).

``setups`` says which run (the default: ``wiki`` at a few minutes' budget; ``--preset paper``: both, at the
authors' hyper-parameters where a 2-core CPU and the key store allow; docs/departures.md lists the scale-downs).
While a set-up trains by truncated BPTT, ``icl_gd.dual`` records, for every training token and step, the keys and
errors of each LSTM layer's gate map (key [x_t; h_{t-1}; 1]) and of the output layer (key h_t; unless
``record_output=false``) with their provenance (document title, position, step, epoch)
(``icl_gd.dual.lm_training``). The run reports perplexity on valid and test against a unigram model and the
``<unk>`` share, verifies every recorded layer's dual form against the trained weights, and scores test queries
against every stored key (``icl_gd.dual.lm_analysis``): the top-3 training passages of each layer, as the authors'
figure shows them (``passages.md``/``.html``, the first query printed), and statistics of ours (next-word match of
the top keys, effective keys, attention over training time, key removal). Every metric is prefixed by its set-up
(``wiki.perplexity_test``); per-layer ones are ``wiki.gates0.*``; the unprefixed-by-layer ones average the
recorded layers; ``<setup>.verify_max_rel_error`` is the maximum over layers and seeds, ``verify_max_rel_error``
over set-ups too.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from icl_gd.core.config import positive_int, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.plotting import plt, save_figure
from icl_gd.core.results import atomic_write_text, write_json
from icl_gd.core.study import RunContext, Study
from icl_gd.dual import metric_names as names
from icl_gd.dual.corpus import Corpus, CorpusConfig, require_length
from icl_gd.dual.lm_analysis import (LayerAnalysis, LMAnalysisConfig, LMQueries, analyse_lm, layer_metrics,
                                     passage_entries)
from icl_gd.dual.lm_training import LMTrainingConfig, lm_work, perplexity, train_lm, unigram_perplexity
from icl_gd.dual.study import DualRun, DualStudyConfig, run_memory

EVAL_BATCH = 10  # streams for valid/test perplexity
LAYER_MEAN = ("top_key_next_word_match", "removal_prob_drop_top", "removal_prob_drop_random", "effective_keys")
SetupName = Literal["book", "wiki"]


@dataclass(frozen=True)
class LMSetup:
    """One language-model set-up: its text, its model and training, and how much of a passage is shown."""

    data: CorpusConfig = setting(doc="the text", factory=CorpusConfig)
    training: LMTrainingConfig = setting(doc="the LSTM and its recorded training", factory=LMTrainingConfig)
    passage_tokens: int = positive_int(14, "tokens shown before a key's token in a passage (and of a query)")


def book_setup(data: dict | None = None, **training) -> LMSetup:
    """The small book at character level; our default budget, ``data`` and ``training`` override it."""
    corpus = {"corpus": "book", "level": "char", "vocab_size": 256, "lowercase": False, "max_train_tokens": 60_000,
              "max_eval_tokens": 10_000, "valid_fraction": 0.05, "test_fraction": 0.1}
    model = {"embed": 64, "hidden": 128, "bptt": 100, "batch_size": 16, "epochs": 3, "lr": 1.0, "lr_decay": 1.0,
             "grad_clip": 1.0}
    return LMSetup(CorpusConfig(**{**corpus, **(data or {})}), LMTrainingConfig(**{**model, **training}),
                   passage_tokens=60)


def wiki_setup(data: dict | None = None, **training) -> LMSetup:
    """Wikipedia-like text at word level; our default budget, ``data`` and ``training`` override it."""
    corpus = {"corpus": "auto", "level": "word", "vocab_size": 10_000, "max_train_tokens": 50_000,
              "max_eval_tokens": 20_000}
    model = {"embed": 64, "hidden": 128, "bptt": 35, "batch_size": 16, "epochs": 2, "lr": 1.0,
             "record_output": False}
    return LMSetup(CorpusConfig(**{**corpus, **(data or {})}), LMTrainingConfig(**{**model, **training}),
                   passage_tokens=14)


@dataclass(frozen=True)
class DualFormLMConfig(DualStudyConfig):
    setups: tuple[SetupName, ...] = setting(("wiki",), "set-ups run, in order: book (character level, a small "
                                                       "book), wiki (word level, Wikipedia articles)")
    book: LMSetup = setting(doc="the small-book set-up", factory=book_setup)
    wiki: LMSetup = setting(doc="the Wikipedia set-up", factory=wiki_setup)
    analysis: LMAnalysisConfig = setting(doc="test queries scored against the stored keys", factory=LMAnalysisConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.setups or len(set(self.setups)) != len(self.setups):
            raise ConfigError(f"setups must name book and/or wiki once each, got {','.join(self.setups) or 'none'}")


def paper_config() -> DualFormLMConfig:
    """Both set-ups at the authors' sweeps' settings (Adam, weight decay 1e-7, unroll 100, their sizes, dropout
    and clipping), scaled down where the CPU and the key store demand (docs/departures.md, ``dual-form-lm`` rows)."""
    adam = {"optimizer": "adam", "weight_decay": 1e-7, "lr_decay": 1.0, "bptt": 100, "key_dtype": "float16",
            "checkpoint_every": 100}
    book = book_setup({"max_train_tokens": None, "max_eval_tokens": 20_000},
                      **adam, embed=64, hidden=256, batch_size=16, steps=1000, lr=1e-3, grad_clip=1.0)
    wiki = wiki_setup({"vocab_size": 20_000, "max_train_tokens": None, "max_eval_tokens": 30_000},
                      **adam, embed=200, hidden=200, batch_size=16, steps=600, lr=3e-3, grad_clip=0.3, dropout=0.5)
    return DualFormLMConfig(setups=("book", "wiki"), book=book, wiki=wiki, keep_store=False, seeds=3)


@dataclass(frozen=True)
class SetupSeed:
    """What one (set-up, seed) produced: the kept result of a part of the run. The first seed's also keeps what
    its figures and passages show."""

    metrics: dict[str, float]
    layer_rows: list[dict]
    curves: list[dict]
    n_steps: int
    layers: list[LayerAnalysis] | None = None
    passages: tuple[str, str] | None = None


def run_setup_seed(name: str, setup: LMSetup, corpus: Corpus, config: DualFormLMConfig, seed: int,
                   run: DualRun) -> SetupSeed:
    """Train set-up ``name`` from ``seed`` while recording it (resuming from its checkpoint), then analyse its
    key store."""
    training = setup.training

    def compute(store) -> SetupSeed:
        unigram = {split: unigram_perplexity(corpus.train, getattr(corpus, split), corpus.vocab_size, EVAL_BATCH)
                   for split in ("valid", "test")}
        # Chance level of top_key_next_word_match: a key drawn at random continues with the predicted token as
        # often as that token follows a training position.
        next_word_share = np.bincount(corpus.train.ids[1:], minlength=corpus.vocab_size) / (len(corpus.train) - 1)
        trained = train_lm(training, corpus, seed, store, run.checkpoint(f"lstm_{name}_seed{seed}"), run.device,
                           run.ctx.progress)
        ppl_test = perplexity(trained.model, corpus.test, training.bptt, EVAL_BATCH)
        record = {"perplexity_valid": perplexity(trained.model, corpus.valid, training.bptt, EVAL_BATCH),
                  "perplexity_test": ppl_test, "perplexity_unigram": unigram["test"],
                  "perplexity_unigram_valid": unigram["valid"], "perplexity_ratio_unigram": ppl_test / unigram["test"],
                  "unk_share_train": corpus.unk_share("train"), "unk_share_test": corpus.unk_share("test"),
                  "train_seconds": trained.train_seconds, "n_steps": float(trained.n_steps),
                  "n_epochs": float(trained.n_epochs)}
        queries, layers = analyse_lm(trained.model, store, corpus, config.analysis, trained.n_epochs, seed)
        rows = []
        for a in layers:
            row = layer_metrics(a, queries, config.analysis.top_k)
            record.update({f"{a.name}.{k}": v for k, v in row.items()})
            rows.append({"setup": name, "layer": a.name, **row})
        record.update({names.VERIFY_MAX_REL_ERROR: max(a.verification.max_rel_error for a in layers),
                       **{k: float(np.mean([record[f"{a.name}.{k}"] for a in layers])) for k in LAYER_MEAN},
                       "prediction_accuracy_queries": float(np.mean(queries.pred == queries.target)),
                       names.TOP_KEY_NEXT_WORD_MATCH_CHANCE: float(np.mean(next_word_share[queries.pred]))})
        print(f"dual-form-lm {name} seed {seed}: perplexity {ppl_test:.1f} (test) vs unigram {unigram['test']:.1f}, "
              f"{trained.n_steps} steps in {trained.train_seconds:.0f} s")
        curves = [{**row, "model": f"lstm-{name}"} for row in trained.curves]
        if seed != config.seed:
            return SetupSeed(record, rows, curves, trained.n_steps)
        heading = f"{name}: test queries and the training passages their layers attend to"
        passages = passages_document(corpus, queries, layers, config.analysis.n_passages, setup.passage_tokens,
                                     heading)
        sections = passages[0].split("\n## ")
        if len(sections) > 1:  # the first query and its passages, in the run's own output
            print("## " + sections[1].strip())
        return SetupSeed(record, rows, curves, trained.n_steps, layers, passages)

    return run.part(name, seed, compute, setup, config.analysis, fresh_store=False)


def run_setup(name: str, setup: LMSetup, config: DualFormLMConfig, ctx: RunContext, run: DualRun) -> tuple[str, str]:
    """Train and analyse one set-up for every seed; its metrics go in as ``name.*``. Returns its passages
    (markdown, html body) of the first seed."""
    data, training = setup.data, setup.training
    corpus = data.build()
    require_length(corpus, training.bptt, training.batch_size, EVAL_BATCH)
    print(f"dual-form-lm {name}: corpus {corpus.name} ({corpus.level} level, corpus={data.corpus}): "
          f"{len(corpus.train)} train, {len(corpus.valid)} valid, {len(corpus.test)} test tokens, vocabulary "
          f"{corpus.vocab_size}, <unk> {corpus.unk_share('test'):.1%} of test tokens")
    passages = ("", "")
    for seed in run.seeds:
        result = run_setup_seed(name, setup, corpus, config, seed, run)
        run.add_rows("layers", result.layer_rows, seed=seed)
        run.record(seed, result.metrics, part=name)
        if result.passages is not None:
            passages = result.passages
            if ctx.figures:
                lm_figures(ctx.out, result.layers, result.n_steps, prefix=f"{name}.",
                           label=f"{ctx.label} · {name} set-up")
            run.add_rows("sorted_attention", [{"setup": name, "layer": a.name, "query": i, "rank": int(rank),
                                               "share": float(share)}
                                              for a in result.layers for i, curve in enumerate(a.scores.curves)
                                              for rank, share in zip(a.scores.curve_rank, curve)])
        run.add_rows("curves", result.curves)
    write_json(ctx.out / f"summary.{name}.json", {
        "corpus": corpus.name, "corpus_setting": data.corpus, "level": corpus.level, "vocab_size": corpus.vocab_size,
        "tokens": {"train": len(corpus.train), "valid": len(corpus.valid), "test": len(corpus.test)},
        "documents": {split: int(len(np.unique(getattr(corpus, split).document))) for split in ("train", "valid", "test")},
    })
    return passages


def run(config: DualFormLMConfig, ctx: RunContext) -> dict[str, float]:
    study_run = DualRun(ctx, config)
    documents = [run_setup(name, getattr(config, name), config, ctx, study_run) for name in config.setups]
    for seed in study_run.seeds:  # the construction check's number: the worst layer of every set-up
        study_run.record(seed, {names.VERIFY_MAX_REL_ERROR: study_run.worst(seed, names.VERIFY_MAX_REL_ERROR,
                                                                           config.setups)})
    atomic_write_text(ctx.out / "passages.md", "\n".join(md for md, _ in documents))
    atomic_write_text(ctx.out / "passages.html", passages_page([body for _, body in documents]))
    worst = {f"{name}.verify_max_rel_error": max for name in config.setups}
    return study_run.finish(reductions={**worst, "verify_max_rel_error": max},
                            columns={"sorted_attention": ["setup", "layer", "query", "rank", "share"]})


# ---------------------------------------------------------------------------------------------- passages and figures
def passages_document(corpus: Corpus, queries: LMQueries, layers: Sequence[LayerAnalysis], n_queries: int,
                      before: int, heading: str) -> tuple[str, str]:
    """``(markdown, html body)`` under ``heading``: for each of the first ``n_queries`` test queries, the words it
    read, the predicted and the actual next token, then per layer the top-3 training passages (document title,
    the key's token marked) by attention and by contribution to the predicted token's logit."""
    text = corpus.text
    gap = "" if corpus.level == "char" else " "  # a character's passage is shown as the text it is
    md = [f"# {heading}", "",
          f"Corpus `{corpus.name}` ({corpus.level} level). The key's token is **bold**; the model read up to it and "
          "the token after it is the key's next token. Scores: attention |k·q + 1|, contribution (r·v)(k·q + 1); "
          "a training position among a query's top units in several epochs is shown once (×n: its count).", ""]
    body = [f"<h1>{html.escape(heading)}</h1>",
            f"<p>Corpus <code>{html.escape(corpus.name)}</code> ({corpus.level} level). The key's token is "
            "<mark>marked</mark>; the token after it is its next token.</p>"]
    for j in range(min(n_queries, len(queries.position))):
        p = int(queries.position[j])
        doc = corpus.test.document[p]
        context = text(corpus.words(corpus.test.ids[max(0, p - before):p + 1]))
        pred, target = text([corpus.vocab[queries.pred[j]]]), text([corpus.vocab[queries.target[j]]])
        head = f"Query {j + 1}: {corpus.titles[doc]}"
        md += [f"## {head}", "", f"> … {context} → predicted **{pred}** (p = {queries.prob[j]:.3f}), "
               f"actual *{target}*", ""]
        body += [f"<h2>{html.escape(head)}</h2>",
                 f"<blockquote>… {html.escape(context)} → predicted <b>{html.escape(pred)}</b> "
                 f"(p = {queries.prob[j]:.3f}), actual <i>{html.escape(target)}</i></blockquote>"]
        for a in layers:
            for label, top in (("attention", a.scores.attention_top), ("contribution", a.scores.proponents)):
                md.append(f"**{a.name}, top-3 by {label}**")
                md.append("")
                body.append(f"<h3>{html.escape(a.name)}, top-3 by {label}</h3><ol>")
                for e in passage_entries(corpus, top, j, 3, before):
                    meta = f"{e.title}; step {e.step}, epoch {e.epoch}; score {e.score:.4g}; ×{e.repeats}"
                    md.append(f"1. [{meta}] … {text(e.before)}{gap}**{text([e.word])}**{gap}{text(e.after)} …")
                    body.append(f"<li><small>[{html.escape(meta)}]</small> … {html.escape(text(e.before))}{gap}"
                                f"<mark>{html.escape(text([e.word]))}</mark>{gap}{html.escape(text(e.after))} …</li>")
                md.append("")
                body.append("</ol>")
    return "\n".join(md) + "\n", "\n".join(body)


def passages_page(bodies: Sequence[str]) -> str:
    """One self-contained HTML page (no scripts, no external resources) of ``passages_document`` bodies."""
    return ("<!doctype html><html><head><meta charset='utf-8'><title>dual-form-lm passages</title></head><body>"
            + "\n".join(bodies) + "</body></html>\n")


def lm_figures(out: Path, layers: Sequence[LayerAnalysis], n_steps: int, prefix: str = "", label: str = "") -> None:
    """``{prefix}sorted_attention``, ``{prefix}attention_over_training`` and ``{prefix}key_removal``."""
    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 3), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], layers):
        for i, curve in enumerate(a.scores.curves):
            ax.loglog(a.scores.curve_rank, np.maximum(curve, 1e-30), lw=1, label=f"query {i + 1}")
        ax.set_title(f"{a.name} ({a.scores.n_keys} keys)", fontsize=8)
        ax.set_xlabel("rank of key")
    axes[0, 0].set_ylabel("share of the query's attention")
    axes[0, -1].legend(fontsize=6)
    fig.suptitle("sorted attention scores |k·q + 1| per query", fontsize=9)
    save_figure(fig, out, f"{prefix}sorted_attention", label)

    fig, axes = plt.subplots(1, len(layers), figsize=(3.6 * len(layers), 3), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], layers):
        share = a.scores.attention_by_bin / a.scores.attention_total[:, None]
        bins = share.shape[1]
        centres = (np.arange(bins) + 0.5) * n_steps / bins
        ax.plot(centres, share.mean(0), marker="o", ms=3)
        ax.axhline(1.0 / bins, color="grey", lw=0.8, ls="--")
        ax.set_title(a.name, fontsize=8)
        ax.set_xlabel("training step of the key")
    axes[0, 0].set_ylabel("share of attention (mean over queries)")
    fig.suptitle("attention mass over training time (dashed: uniform)", fontsize=9)
    save_figure(fig, out, f"{prefix}attention_over_training", label)

    fig, ax = plt.subplots(figsize=(1.6 * len(layers) + 2, 3))
    pos = np.arange(len(layers))
    ax.bar(pos - 0.2, [a.drop_top.mean() for a in layers], 0.4, label="top-k keys by attention")
    ax.bar(pos + 0.2, [a.drop_random.mean() for a in layers], 0.4, label="k random keys")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(pos, [a.name for a in layers])
    ax.set_ylabel("drop of p(predicted word)")
    ax.legend(fontsize=7)
    ax.set_title("removing keys from the dual sum", fontsize=9)
    save_figure(fig, out, f"{prefix}key_removal", label)


STUDY = Study(
    name="dual-form-lm",
    summary="Dual form of LSTM language models (a book by character, Wikipedia by word): top training passages "
            "per test query, verified",
    default_config=DualFormLMConfig,
    run=run,
    default_threads=1,
    headline=("wiki.perplexity_test", "wiki.perplexity_unigram", "wiki.unk_share_test", "wiki.verify_max_rel_error",
              "book.perplexity_test", "book.perplexity_unigram", "book.verify_max_rel_error"),
    presets={"paper": paper_config},
    memory=run_memory,
    training_work=lambda config: [lm_work(f"{name} LSTM", getattr(config, name).training,
                                          getattr(config, name).data.build()) for name in config.setups],
    # a run of seconds that writes every metric and table (the claims' tests)
    tiny=("book.data.max_train_tokens=3000", "book.data.max_eval_tokens=2000", "wiki.data.max_train_tokens=3000",
          "wiki.data.max_eval_tokens=2000", "book.training.steps=3", "wiki.training.steps=3", "n_queries=8",
          "context=20", "n_passages=1"),
)
