"""Offline text corpora for the language-model dual form: documents with titles, words, a vocabulary, a split.

Sources (``resolve_corpus``; nothing is downloaded):

- ``wiki``: the shortened English Wikipedia dump shipped inside the ``gensim`` wheel's test data (a WikiText-2
  stand-in: real articles with their titles); markup is stripped by gensim's own ``filter_wiki``.
- ``book``: Ambrose Bierce's *The Devil's Dictionary* (1911) from Debian's ``dict-devil`` (a dictzip file, read with
  ``gzip``); one document per dictionary entry, titled by its headword.
- ``pydoc``: the English help topics CPython ships (``pydoc_data.topics``); one document per topic.
- a path: a UTF-8 text file (one document per blank-line separated paragraph, or per ``= Title =`` heading when
  the file has WikiText headings), or a directory holding WikiText-2's ``wiki.{train,valid,test}.tokens``.
- ``auto``: ``wiki`` when gensim is installed, else ``book`` when its file is present, else ``pydoc``.

Words are lower-cased word and punctuation tokens; every paragraph ends with ``<eos>`` (a line of WikiText or of
stripped wiki markup is a paragraph; wrapped texts join their lines up to a blank line); the vocabulary is the
``vocab_size - 2`` most frequent training words plus ``<unk>`` and ``<eos>``. The split is by document: a fixed
permutation (``SPLIT_SEED``, part of the corpus definition) gives the valid and test documents; a WikiText-2
directory keeps its own split.
"""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from icl_gd.core.config import require_positive, require_positive_ints, setting
from icl_gd.core.errors import ConfigError, DatasetNotFoundError

GENSIM_WIKI = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
DEVIL_DICT = Path("/usr/share/dictd/devil.dict.dz")
WIKITEXT_FILES = ("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens")
NAMED = ("auto", "wiki", "book", "pydoc")
UNK, EOS = "<unk>", "<eos>"
SPLIT_SEED = 20220101  # the document split is part of the corpus, not of a run
_TOKEN = re.compile(r"<unk>|[\w]+(?:['’][\w]+)*|[^\w\s]")
_WIKITEXT_TITLE = re.compile(r"^ ?= ([^=].*?) = ?$")
_DICTD_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@dataclass(frozen=True)
class Document:
    """One document: its title and its words (``<eos>`` after every line)."""

    title: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class RawCorpus:
    """Documents as read: ``name`` says which source was used; ``splits`` maps valid/test to document indices
    when the source fixes them (WikiText-2), else None."""

    name: str
    documents: tuple[Document, ...]
    splits: dict[str, tuple[int, ...]] | None = None


def words_of(text: str, lowercase: bool = True, paragraphs: bool = False) -> list[str]:
    """Word and punctuation tokens of ``text``, ``<eos>`` after every non-empty line (``paragraphs``: after every
    blank-line separated paragraph, for texts whose lines are wrapped)."""
    out: list[str] = []
    lines = re.split(r"\n\s*\n", text) if paragraphs else text.splitlines()
    for line in lines:
        tokens = _TOKEN.findall(line.lower() if lowercase else line)
        if tokens:
            out.extend(tokens)
            out.append(EOS)
    return out


# ------------------------------------------------------------------------------------------------ sources
def gensim_wiki_path() -> Path | None:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GENSIM_WIKI
    return path if path.is_file() else None


def load_wiki(lowercase: bool = True, path: Path | None = None) -> RawCorpus:
    """The articles (namespace 0, no redirects) of a bz2 MediaWiki dump: by default the one in gensim's test
    data. Markup is stripped by gensim's ``filter_wiki``, so gensim must be installed either way."""
    path = path or gensim_wiki_path()
    if path is None or importlib.util.find_spec("gensim") is None:
        raise DatasetNotFoundError("corpus=wiki needs gensim's bundled Wikipedia dump: pip install gensim "
                                   "(or pip install -e '.[data]')")
    from gensim.corpora.wikicorpus import filter_wiki

    documents = []
    with bz2.open(path, "rb") as stream:
        for _, element in ET.iterparse(stream):
            if not element.tag.endswith("}page"):
                continue
            ns = element.findtext("{*}ns")
            title = element.findtext("{*}title") or ""
            text = element.findtext("{*}revision/{*}text") or ""
            if ns == "0" and element.find("{*}redirect") is None and not text.lstrip().lower().startswith("#redirect"):
                words = words_of(_clean_wiki(filter_wiki(text)), lowercase)
                if words:
                    documents.append(Document(title, tuple(words)))
            element.clear()
    return RawCorpus("wiki", tuple(documents))


def _clean_wiki(text: str) -> str:
    """What ``filter_wiki`` leaves of headings and tables: drop ``==`` marks, table rows and bullet marks."""
    lines = []
    for line in text.splitlines():
        line = line.replace("'''", "").replace("''", "").strip().strip("=").strip()
        if not line or line.startswith(("{|", "|", "!")):
            continue
        lines.append(line.lstrip("*#:; "))
    return "\n".join(lines)


def _dictd_number(text: str) -> int:
    value = 0
    for ch in text:
        value = value * 64 + _DICTD_DIGITS.index(ch)
    return value


def load_dictd(dict_path: Path, lowercase: bool = True) -> RawCorpus:
    """A dictd dictionary (``NAME.dict.dz`` gzip-readable, ``NAME.index`` beside it): one document per entry,
    titled by its headword; without an index the whole text is split at blank-line paragraphs."""
    try:
        with gzip.open(dict_path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        raise ConfigError(f"{dict_path} is not a readable dictzip/gzip file ({exc})") from None
    index = Path(str(dict_path).removesuffix(".dz").removesuffix(".dict") + ".index")
    if not index.is_file():
        return _from_text(dict_path.name, _decode(data, dict_path))
    documents, seen = [], set()
    for line in index.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith(("00database", "00-database")):
            continue
        try:
            offset, length = _dictd_number(parts[1]), _dictd_number(parts[2])
        except ValueError:
            raise ConfigError(f"{index}: malformed index line {line[:60]!r}") from None
        if offset in seen:
            continue  # an alias headword of an entry already read
        seen.add(offset)
        words = words_of(data[offset:offset + length].decode("utf-8", errors="replace"), lowercase, paragraphs=True)
        if words:
            documents.append(Document(parts[0], tuple(words)))
    return RawCorpus("book", tuple(documents))


def load_book(path: Path | None = None, lowercase: bool = True) -> RawCorpus:
    path = DEVIL_DICT if path is None else path
    if not path.is_file():
        raise DatasetNotFoundError(f"corpus=book needs The Devil's Dictionary at {path}: apt-get install dict-devil")
    return load_dictd(path, lowercase)


def load_pydoc(lowercase: bool = True) -> RawCorpus:
    """The help topics of CPython's ``pydoc_data.topics``, one document per topic, in sorted order."""
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise DatasetNotFoundError("corpus=pydoc needs the standard library's pydoc_data (reinstall Python)") from None
    documents = [Document(name, tuple(words_of(topics[name], lowercase, paragraphs=True))) for name in sorted(topics)]
    return RawCorpus("pydoc", tuple(d for d in documents if d.words))


def _decode(data: bytes, path: Path) -> str:
    if b"\x00" in data[:65536]:
        raise ConfigError(f"corpus file {path} is binary, not UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"corpus file {path} is not UTF-8 text (byte {exc.start})") from None


def _from_text(name: str, text: str, lowercase: bool = True) -> RawCorpus:
    """A plain text: documents at WikiText ``= Title =`` headings when it has them, else at blank lines."""
    lines = text.splitlines()
    if any(_WIKITEXT_TITLE.match(line) for line in lines):
        return RawCorpus(name, tuple(_wikitext_documents(lines, name, lowercase)))
    documents, block = [], []
    for line in lines + [""]:
        if line.strip():
            block.append(line)
        elif block:
            words = words_of("\n".join(block), lowercase, paragraphs=True)
            documents.append(Document(f"{name} ¶{len(documents) + 1}", tuple(words)))
            block = []
    return RawCorpus(name, tuple(documents))


def _wikitext_documents(lines: Sequence[str], name: str, lowercase: bool) -> list[Document]:
    documents, title, body = [], f"{name} (before the first title)", []
    for line in lines + [" = <end> = "]:
        match = _WIKITEXT_TITLE.match(line)
        if match:
            words = words_of("\n".join(body), lowercase)
            if words:
                documents.append(Document(title, tuple(words)))
            title, body = match.group(1).strip(), []
        else:
            body.append(line)
    return documents


def load_path(path: Path, lowercase: bool = True) -> RawCorpus:
    """A text file or a WikiText-2 directory (its own train/valid/test split, documents at top-level titles)."""
    if path.is_dir():
        missing = [f for f in WIKITEXT_FILES if not (path / f).is_file()]
        if missing:
            raise DatasetNotFoundError(f"corpus directory {path} lacks {', '.join(missing)} (WikiText-2's files)")
        documents: list[Document] = []
        splits: dict[str, tuple[int, ...]] = {}
        for split, file in zip(("train", "valid", "test"), WIKITEXT_FILES):
            text = _decode((path / file).read_bytes(), path / file)
            part = _wikitext_documents(text.splitlines(), file, lowercase)
            splits[split] = tuple(range(len(documents), len(documents) + len(part)))
            documents.extend(part)
        return RawCorpus(f"wikitext:{path}", tuple(documents), splits)
    if not path.is_file():
        raise DatasetNotFoundError(f"corpus={path}: no such file or directory")
    if path.name.endswith(".dict.dz"):
        return load_dictd(path, lowercase)
    return _from_text(str(path), _decode(path.read_bytes(), path), lowercase)


def resolve_corpus(name: str) -> str:
    """``auto`` → ``wiki`` (gensim installed), else ``book`` (dict-devil installed), else ``pydoc``."""
    if name != "auto":
        return name
    if gensim_wiki_path() is not None:
        return "wiki"
    return "book" if DEVIL_DICT.is_file() else "pydoc"


def load_raw(name: str, lowercase: bool = True) -> RawCorpus:
    name = resolve_corpus(name)
    if name == "wiki":
        return load_wiki(lowercase)
    if name == "book":
        return load_book(lowercase=lowercase)
    if name == "pydoc":
        return load_pydoc(lowercase)
    return load_path(Path(name).expanduser(), lowercase)


# ------------------------------------------------------------------------------------------------ vocabulary, split
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

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def words(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab[i] for i in ids]


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
             max_train_tokens: int | None = None, max_eval_tokens: int | None = None) -> Corpus:
    """Split ``raw`` by document, build the vocabulary on the training documents (all of them, before any cap),
    and map words to ids. ``max_*_tokens`` cap a split by keeping the first m words of every document, m as large
    as the cap allows (``per_document_limit``)."""
    if vocab_size < 3:
        raise ConfigError(f"vocab_size must be at least 3 (<unk>, <eos> and one word), got {vocab_size}")
    if not raw.documents:
        raise ConfigError(f"corpus {raw.name} holds no text")
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
        test=_stream(raw.documents, splits["test"], lookup, max_eval_tokens),
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
    vocab_size: int = setting(2000, "words in the vocabulary, <unk> and <eos> included")
    max_train_tokens: int | None = setting(100_000, "train on N tokens, the first words of every training document "
                                                    "(as many as fit; none: all); the output layer stores a "
                                                    "vocab-wide value per token and step")
    max_eval_tokens: int | None = setting(30_000, "N tokens of valid and of test, capped the same way (none: all)")
    valid_fraction: float = setting(0.1, "share of documents in the valid split")
    test_fraction: float = setting(0.1, "share of documents in the test split")
    lowercase: bool = setting(True, "lower-case every word")

    def __post_init__(self) -> None:
        require_positive_ints(self, "vocab_size")
        for name in ("max_train_tokens", "max_eval_tokens"):
            if getattr(self, name) is not None:
                require_positive_ints(self, name)
        for name in ("valid_fraction", "test_fraction"):
            require_positive(name, getattr(self, name))
        if not self.corpus.strip():
            raise ConfigError("corpus must name auto, wiki, book, pydoc or a path")

    def build(self) -> Corpus:
        """The corpus read, split and tokenised."""
        return tokenise(load_raw(self.corpus, self.lowercase), self.vocab_size, self.valid_fraction,
                        self.test_fraction, self.max_train_tokens, self.max_eval_tokens)
