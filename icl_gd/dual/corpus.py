"""Tokenised corpora for the language-model dual form: a vocabulary, a split by document, token-id streams.

The documents come from ``icl_gd.dual.text_sources`` (gensim's Wikipedia articles, a dictd book, pydoc topics, a
path or WikiText-2). A token is a word (``level=word``) or a character (``level=char``: each document's words joined
back into text, ``<eos>`` as a newline, ``detokenise``). The vocabulary is the ``vocab_size - 2`` most frequent
training tokens plus ``<unk>`` and ``<eos>``. The split is by document: a fixed permutation (``SPLIT_SEED``, part of the corpus definition) gives the
valid and test documents; a WikiText-2 directory keeps its own split.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from icl_gd.core.config import check_settings, positive_int, require_positive, setting
from icl_gd.core.errors import ConfigError
from icl_gd.dual.text_sources import EOS, UNK, Document, RawCorpus, load_raw

SPLIT_SEED = 20220101  # the document split is part of the corpus, not of a run


@dataclass(frozen=True)
class TokenStream:
    """Documents of one split laid end to end: word ids ``ids (N,)``, the document of each token ``document (N,)``
    (index into ``Corpus.titles``) and its position in that document ``position (N,)``."""

    ids: np.ndarray
    document: np.ndarray
    position: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Corpus:
    """A tokenised corpus: ``vocab`` (id → word; 0 is ``<unk>``, 1 is ``<eos>``), document ``titles``, the three
    split streams and the words of every document (for showing passages)."""

    name: str
    vocab: tuple[str, ...]
    titles: tuple[str, ...]
    train: TokenStream
    valid: TokenStream
    test: TokenStream
    level: Literal["word", "char"] = "word"

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def words(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab[i] for i in ids]

    def text(self, tokens: Sequence[str]) -> str:
        """Tokens shown as text: words with spaces between them, characters as they are (a newline as ⏎)."""
        if self.level == "char":
            return "".join(tokens).replace("\n", " ⏎ ")
        return " ".join(tokens)

    def unk_share(self, split: str) -> float:
        """Share of the split's tokens that are ``<unk>`` (id 0)."""
        ids = getattr(self, split).ids
        return float(np.mean(ids == 0)) if len(ids) else 0.0


_NO_SPACE_BEFORE = frozenset(".,;:!?)]}'’”")
_NO_SPACE_AFTER = frozenset("([{‘“")


def detokenise(words: Sequence[str]) -> str:
    """Word and punctuation tokens back to text for a character model: a space between tokens except before closing
    punctuation and after opening brackets, ``<eos>`` as a newline. (The sources keep tokens, not the original
    spacing; this is the text the character model reads.)"""
    out: list[str] = []
    for word in words:
        if word == EOS:
            out.append("\n")
        elif not out or out[-1] == "\n" or out[-1][-1] in _NO_SPACE_AFTER or word in _NO_SPACE_BEFORE:
            out.append(word)
        else:
            out.append(" " + word)
    return "".join(out)


def characters(raw: RawCorpus) -> RawCorpus:
    """The same documents with characters as tokens (``detokenise``)."""
    return replace(raw, documents=tuple(Document(d.title, tuple(detokenise(d.words))) for d in raw.documents))


def split_documents(n: int, valid_fraction: float, test_fraction: float) -> dict[str, np.ndarray]:
    """Document indices of train/valid/test: a fixed permutation, at least one document in each split."""
    if n < 3:
        raise ConfigError(f"the corpus has {n} document(s); a train/valid/test split by document needs at least 3")
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    n_valid = max(1, int(round(valid_fraction * n)))
    n_test = max(1, int(round(test_fraction * n)))
    if n_valid + n_test >= n:
        raise ConfigError(f"valid_fraction and test_fraction leave no training document out of {n}")
    return {"valid": np.sort(order[:n_valid]), "test": np.sort(order[n_valid:n_valid + n_test]),
            "train": np.sort(order[n_valid + n_test:])}


def build_vocab(documents: Sequence[Document], size: int) -> tuple[str, ...]:
    """``<unk>``, ``<eos>`` and the ``size - 2`` most frequent other words (ties broken alphabetically)."""
    counts = Counter(w for d in documents for w in d.words)
    counts.pop(UNK, None)
    counts.pop(EOS, None)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return (UNK, EOS, *[w for w, _ in ranked[:size - 2]])


def per_document_limit(lengths: Sequence[int], max_tokens: int | None) -> int | None:
    """The largest m with Σ min(length, m) <= ``max_tokens``: a cap spread evenly over the documents (short ones
    whole), so a capped split still holds every document's beginning. None when nothing needs cutting."""
    if max_tokens is None or sum(lengths) <= max_tokens:
        return None
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _stream(documents: Sequence[Document], indices: Sequence[int], lookup: dict[str, int],
            max_tokens: int | None = None) -> TokenStream:
    limit = per_document_limit([len(documents[d].words) for d in indices], max_tokens)
    ids, doc, pos = [], [], []
    for d in indices:
        words = documents[d].words if limit is None else documents[d].words[:limit]
        if not words:
            continue
        ids.append(np.fromiter((lookup.get(w, 0) for w in words), dtype=np.int64, count=len(words)))
        doc.append(np.full(len(words), d, dtype=np.int64))
        pos.append(np.arange(len(words), dtype=np.int64))
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
    return TokenStream(cat(ids), cat(doc), cat(pos))


def tokenise(raw: RawCorpus, vocab_size: int, valid_fraction: float = 0.1, test_fraction: float = 0.1,
             max_train_tokens: int | None = None, max_eval_tokens: int | None = None,
             level: Literal["word", "char"] = "word") -> Corpus:
    """Split ``raw`` by document, build the vocabulary on the training documents (all of them, before any cap),
    and map words to ids. ``max_*_tokens`` cap a split by keeping the first m words of every document, m as large
    as the cap allows (``per_document_limit``)."""
    if vocab_size < 3:
        raise ConfigError(f"vocab_size must be at least 3 (<unk>, <eos> and one word), got {vocab_size}")
    if not raw.documents:
        raise ConfigError(f"corpus {raw.name} holds no text")
    if level == "char":
        raw = characters(raw)
    splits = ({k: np.asarray(v, dtype=np.int64) for k, v in raw.splits.items()} if raw.splits is not None
              else split_documents(len(raw.documents), valid_fraction, test_fraction))
    for split in ("train", "valid", "test"):
        if not len(splits[split]):
            raise ConfigError(f"corpus {raw.name} has no {split} document")
    vocab = build_vocab([raw.documents[i] for i in splits["train"]], vocab_size)
    lookup = {w: i for i, w in enumerate(vocab)}
    return Corpus(
        name=raw.name, vocab=vocab, titles=tuple(d.title for d in raw.documents),
        train=_stream(raw.documents, splits["train"], lookup, max_train_tokens),
        valid=_stream(raw.documents, splits["valid"], lookup, max_eval_tokens),
        test=_stream(raw.documents, splits["test"], lookup, max_eval_tokens), level=level,
    )


def require_length(corpus: Corpus, window: int, batch_size: int, eval_batch_size: int) -> None:
    """``ConfigError`` when a split is too short for one BPTT window per stream."""
    for split, stream, batch in (("train", corpus.train, batch_size), ("valid", corpus.valid, eval_batch_size),
                                 ("test", corpus.test, eval_batch_size)):
        need = batch * (window + 1)
        if len(stream) < need:
            raise ConfigError(f"corpus {corpus.name}: the {split} split has {len(stream)} tokens, fewer than one "
                              f"BPTT window of {window}+1 tokens per stream x {batch} streams ({need}); use a longer "
                              f"text or lower bptt/batch_size")


@dataclass(frozen=True)
class CorpusConfig:
    """Which text, its vocabulary and how much of it is used."""

    corpus: str = setting("auto", "auto, wiki (gensim's Wikipedia articles), book (dict-devil), pydoc (Python's help "
                                  "topics), or a path: a UTF-8 text file or a WikiText-2 directory")
    level: Literal["word", "char"] = setting("word", "tokens are words or characters")
    vocab_size: int = positive_int(10_000, "tokens in the vocabulary, <unk> and <eos> included")
    max_train_tokens: int | None = positive_int(100_000, "train on N tokens, the first words of every training "
                                                         "document (as many as fit; none: all); the output layer "
                                                         "stores a vocab-wide value per token and step")
    max_eval_tokens: int | None = positive_int(30_000, "N tokens of valid and of test, capped the same way "
                                                       "(none: all)")
    valid_fraction: float = setting(0.1, "share of documents in the valid split", check=require_positive)
    test_fraction: float = setting(0.1, "share of documents in the test split", check=require_positive)
    lowercase: bool = setting(True, "lower-case every word")

    def __post_init__(self) -> None:
        check_settings(self)
        if not self.corpus.strip():
            raise ConfigError("corpus must name auto, wiki, book, pydoc or a path")

    def build(self) -> Corpus:
        """The corpus read, split and tokenised."""
        return tokenise(load_raw(self.corpus, self.lowercase), self.vocab_size, self.valid_fraction,
                        self.test_fraction, self.max_train_tokens, self.max_eval_tokens, self.level)
