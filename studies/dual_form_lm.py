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

import shutil
from dataclasses import dataclass
from typing import Literal

import numpy as np

from icl_gd.core.config import positive_int, require_non_negative, require_positive_ints, setting
from icl_gd.core.errors import ConfigError
from icl_gd.core.results import atomic_write_text, write_json
from icl_gd.core.study import RunContext, RunMemory, Study, StudyRun
from icl_gd.dual.corpus import CorpusConfig, require_length
from icl_gd.dual.lm_analysis import LMAnalysisConfig, analyse_lm, layer_metrics, passages_document, passages_page
from icl_gd.dual.lm_figures import lm_figures
from icl_gd.dual.lm_training import LMTrainingConfig, perplexity, train_lm, unigram_perplexity

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
class DualFormLMConfig:
    setups: tuple[SetupName, ...] = setting(("wiki",), "set-ups run, in order: book (character level, a small "
                                                       "book), wiki (word level, Wikipedia articles)")
    book: LMSetup = setting(doc="the small-book set-up", factory=book_setup)
    wiki: LMSetup = setting(doc="the Wikipedia set-up", factory=wiki_setup)
    analysis: LMAnalysisConfig = setting(doc="test queries scored against the stored keys", factory=LMAnalysisConfig)
    keep_memory: bool = setting(True, "keep the recorded keys and values under out/memory")
    seeds: int = setting(1, "number of training seeds (inits)")
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ...")

    def __post_init__(self) -> None:
        require_positive_ints(self, "seeds")
        require_non_negative("seed", self.seed)
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
    return DualFormLMConfig(setups=("book", "wiki"), book=book, wiki=wiki, keep_memory=False, seeds=3)


def run_setup(name: str, setup: LMSetup, config: DualFormLMConfig, ctx: RunContext, run: StudyRun) -> tuple[str, str]:
    """Train and analyse one set-up for every seed; its metrics go in as ``name.*``. Returns its passages
    (markdown, html body) of the first seed."""
    data, training = setup.data, setup.training
    corpus = data.build()
    require_length(corpus, training.bptt, training.batch_size, EVAL_BATCH)
    print(f"dual-form-lm {name}: corpus {corpus.name} ({corpus.level} level, corpus={data.corpus}): "
          f"{len(corpus.train)} train, {len(corpus.valid)} valid, {len(corpus.test)} test tokens, vocabulary "
          f"{corpus.vocab_size}, <unk> {corpus.unk_share('test'):.1%} of test tokens")
    unigram = {split: unigram_perplexity(corpus.train, getattr(corpus, split), corpus.vocab_size, EVAL_BATCH)
               for split in ("valid", "test")}
    # Chance level of top_key_next_word_match: a key drawn at random continues with the predicted token as often as
    # that token follows a training position.
    next_word_share = np.bincount(corpus.train.ids[1:], minlength=corpus.vocab_size) / (len(corpus.train) - 1)
    passages = ("", "")
    for seed in run.seeds:
        memory = ctx.out / "memory" / name / f"seed-{seed}"
        trained = train_lm(training, corpus, seed, memory, run.checkpoint(f"lstm_{name}_seed{seed}"), ctx.device,
                           ctx.progress)
        ppl_test = perplexity(trained.model, corpus.test, training.bptt, EVAL_BATCH)
        record = {"perplexity_valid": perplexity(trained.model, corpus.valid, training.bptt, EVAL_BATCH),
                  "perplexity_test": ppl_test, "perplexity_unigram": unigram["test"],
                  "perplexity_unigram_valid": unigram["valid"], "perplexity_ratio_unigram": ppl_test / unigram["test"],
                  "unk_share_train": corpus.unk_share("train"), "unk_share_test": corpus.unk_share("test"),
                  "train_seconds": trained.train_seconds, "n_steps": float(trained.n_steps),
                  "n_epochs": float(trained.n_epochs)}
        queries, layers = analyse_lm(trained.model, memory, corpus, config.analysis, trained.n_epochs, seed)
        for a in layers:
            row = layer_metrics(a, queries, config.analysis.top_k)
            record.update({f"{a.name}.{k}": v for k, v in row.items()})
            run.add_rows("layers", [{"setup": name, "layer": a.name, **row}], seed=seed)
        record.update({"verify_max_rel_error": max(a.verification.max_rel_error for a in layers),
                       **{k: float(np.mean([record[f"{a.name}.{k}"] for a in layers])) for k in LAYER_MEAN},
                       "prediction_accuracy_queries": float(np.mean(queries.pred == queries.target)),
                       "top_key_next_word_match_chance": float(np.mean(next_word_share[queries.pred]))})
        run.record(seed, {f"{name}.{k}": v for k, v in record.items()})
        print(f"dual-form-lm {name} seed {seed}: perplexity {ppl_test:.1f} (test) vs unigram {unigram['test']:.1f}, "
              f"{trained.n_steps} steps in {trained.train_seconds:.0f} s")
        if seed == config.seed:
            heading = f"{name}: test queries and the training passages their layers attend to"
            passages = passages_document(corpus, queries, layers, config.analysis.n_passages, setup.passage_tokens,
                                         heading)
            sections = passages[0].split("\n## ")
            if len(sections) > 1:  # the first query and its passages, in the run's own output
                print("## " + sections[1].strip())
            if ctx.figures:
                lm_figures(ctx.out, layers, trained.n_steps, prefix=f"{name}.")
            run.add_rows("sorted_attention", [{"setup": name, "layer": a.name, "query": i, "rank": int(rank),
                                               "share": float(share)}
                                              for a in layers for i, curve in enumerate(a.scores.curves)
                                              for rank, share in zip(a.scores.curve_rank, curve)])
        run.add_rows("curves", [{**row, "model": f"lstm-{name}"} for row in trained.curves])
        if not config.keep_memory:
            shutil.rmtree(memory)
    write_json(ctx.out / f"summary.{name}.json", {
        "corpus": corpus.name, "corpus_setting": data.corpus, "level": corpus.level, "vocab_size": corpus.vocab_size,
        "tokens": {"train": len(corpus.train), "valid": len(corpus.valid), "test": len(corpus.test)},
        "documents": {split: int(len(np.unique(getattr(corpus, split).document))) for split in ("train", "valid", "test")},
    })
    return passages


def run(config: DualFormLMConfig, ctx: RunContext) -> dict[str, float]:
    study_run = StudyRun(ctx, range(config.seed, config.seed + config.seeds))
    documents = [run_setup(name, getattr(config, name), config, ctx, study_run) for name in config.setups]
    for seed in study_run.seeds:  # the construction check's number: the worst layer of every set-up
        metrics = study_run.per_seed[seed]
        study_run.record(seed, {"verify_max_rel_error": max(metrics[f"{name}.verify_max_rel_error"]
                                                            for name in config.setups)})
    atomic_write_text(ctx.out / "passages.md", "\n".join(md for md, _ in documents))
    atomic_write_text(ctx.out / "passages.html", passages_page([body for _, body in documents]))
    worst = {f"{name}.verify_max_rel_error": max for name in config.setups}
    return study_run.finish(reductions={**worst, "verify_max_rel_error": max},
                            columns={"sorted_attention": ["setup", "layer", "query", "rank", "share"]})


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
    memory=lambda config: RunMemory(seeds_key="seeds", seeds=config.seeds),
)
