"""Study ``dual-form-lm``: which training passages does an LSTM language model attend to while it predicts the next
word? (the language-model half of Irie, Csordás & Schmidhuber 2022)

A word-level LSTM language model is trained by truncated BPTT with SGD (momentum, weight decay, per-epoch lr
decay, gradient clipping) while ``icl_gd.dual`` records, for every training token and step, the keys and errors
of the output layer (key h_t) and of each LSTM layer's gate map (key [x_t; h_{t-1}; 1]) with their provenance
(article title, position, step, epoch) in the memory-mapped store (``icl_gd.dual.lm_training``). The corpus is
``data.corpus`` (``auto``: gensim's Wikipedia articles, else The Devil's Dictionary, else Python's help topics;
``icl_gd.dual.text_sources``). The run reports perplexity on valid and test against a unigram model, verifies every
recorded layer's dual form against the trained weights, and scores test queries against every stored key
(``icl_gd.dual.lm_analysis``): top training passages (``passages.md``/``.html``), next-word match of the top keys,
effective keys, attention over training time and key removal. Headline metrics in ``metrics.json`` ``mean``
average the per-layer ones over the recorded layers; ``verify_max_rel_error`` is the maximum over layers and seeds.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import numpy as np

from icl_gd.core.config import require_non_negative, require_positive_ints, setting
from icl_gd.dual.corpus import CorpusConfig, require_length
from icl_gd.dual.lm_analysis import LMAnalysisConfig, analyse_lm, layer_metrics, passages_document
from icl_gd.dual.lm_figures import lm_figures
from icl_gd.dual.lm_training import LMTrainingConfig, perplexity, train_lm, unigram_perplexity
from icl_gd.core.results import atomic_write_text, write_json
from icl_gd.core.study import RunContext, RunMemory, Study, StudyRun

EVAL_BATCH = 10  # streams for valid/test perplexity
LAYER_MEAN = ("top_key_next_word_match", "removal_prob_drop_top", "removal_prob_drop_random", "effective_keys")


@dataclass(frozen=True)
class DualFormLMConfig:
    data: CorpusConfig = setting(doc="the text", factory=CorpusConfig)
    training: LMTrainingConfig = setting(doc="the LSTM and its recorded training", factory=LMTrainingConfig)
    analysis: LMAnalysisConfig = setting(doc="test queries scored against the stored keys", factory=LMAnalysisConfig)
    keep_memory: bool = setting(True, "keep the recorded keys and values under out/memory")
    seeds: int = setting(1, "number of training seeds (inits)")
    seed: int = setting(0, "first seed; seeds are seed, seed+1, ...")

    def __post_init__(self) -> None:
        require_positive_ints(self, "seeds")
        require_non_negative("seed", self.seed)


def run(config: DualFormLMConfig, ctx: RunContext) -> dict[str, float]:
    data, training = config.data, config.training
    corpus = data.build()
    require_length(corpus, training.bptt, training.batch_size, EVAL_BATCH)
    print(f"dual-form-lm: corpus {corpus.name} (corpus={data.corpus}): {len(corpus.train)} train, "
          f"{len(corpus.valid)} valid, {len(corpus.test)} test tokens, vocabulary {corpus.vocab_size}")
    unigram = {split: unigram_perplexity(corpus.train, getattr(corpus, split), corpus.vocab_size, EVAL_BATCH)
               for split in ("valid", "test")}
    # Chance level of top_key_next_word_match: a key drawn at random continues with the predicted word as often as
    # that word follows a training position.
    next_word_share = np.bincount(corpus.train.ids[1:], minlength=corpus.vocab_size) / (len(corpus.train) - 1)
    run = StudyRun(ctx, range(config.seed, config.seed + config.seeds))
    for seed in run.seeds:
        memory = ctx.out / "memory" / f"seed-{seed}"
        trained = train_lm(training, corpus, seed, memory, run.checkpoint(f"lstm_seed{seed}"), ctx.device,
                           ctx.progress)
        run.record(seed, {"perplexity_valid": perplexity(trained.model, corpus.valid, training.bptt, EVAL_BATCH),
                          "perplexity_test": perplexity(trained.model, corpus.test, training.bptt, EVAL_BATCH),
                          "perplexity_unigram": unigram["test"], "perplexity_unigram_valid": unigram["valid"],
                          "train_seconds": trained.train_seconds, "n_steps": float(trained.n_steps)})
        queries, layers = analyse_lm(trained.model, memory, corpus, config.analysis, trained.n_epochs, seed)
        for a in layers:
            row = layer_metrics(a, queries, config.analysis.top_k)
            run.record(seed, {f"{a.name}.{k}": v for k, v in row.items()})
            run.add_rows("layers", [{"layer": a.name, **row}], seed=seed)
        metrics = run.per_seed[seed]
        run.record(seed, {"verify_max_rel_error": max(a.verification.max_rel_error for a in layers),
                          **{k: float(np.mean([metrics[f"{a.name}.{k}"] for a in layers])) for k in LAYER_MEAN},
                          "prediction_accuracy_queries": float(np.mean(queries.pred == queries.target)),
                          "top_key_next_word_match_chance": float(np.mean(next_word_share[queries.pred]))})
        if seed == config.seed:
            markdown, page = passages_document(corpus, queries, layers, config.analysis.n_passages,
                                               config.analysis.passage_words)
            atomic_write_text(ctx.out / "passages.md", markdown)
            atomic_write_text(ctx.out / "passages.html", page)
            lm_figures(ctx.out, layers, trained.n_steps)
            run.add_rows("sorted_attention", [{"layer": a.name, "query": i, "rank": int(rank), "share": float(share)}
                                              for a in layers for i, curve in enumerate(a.scores.curves)
                                              for rank, share in zip(a.scores.curve_rank, curve)])
        run.add_rows("curves", trained.curves)
        if not config.keep_memory:
            shutil.rmtree(memory)
    write_json(ctx.out / "summary.json", {
        "corpus": corpus.name, "corpus_setting": data.corpus, "vocab_size": corpus.vocab_size,
        "tokens": {"train": len(corpus.train), "valid": len(corpus.valid), "test": len(corpus.test)},
        "documents": {split: int(len(np.unique(getattr(corpus, split).document))) for split in ("train", "valid", "test")},
    })
    return run.finish(reductions={"verify_max_rel_error": max},
                      columns={"sorted_attention": ["layer", "query", "rank", "share"]})


STUDY = Study(
    name="dual-form-lm",
    summary="Dual form of an LSTM language model: top training passages per test query, verified exactly",
    default_config=DualFormLMConfig,
    run=run,
    default_threads=1,
    headline=("perplexity_test", "perplexity_unigram", "top_key_next_word_match", "top_key_next_word_match_chance",
              "verify_max_rel_error"),
    memory=lambda config: RunMemory(seeds_key="seeds", seeds=config.seeds),
)
