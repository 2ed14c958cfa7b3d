"""Offline text sources for the language-model dual form: documents with titles and their words.

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
stripped wiki markup is a paragraph; wrapped texts join their lines up to a blank line). ``icl_gd.dual.corpus``
turns the documents into a vocabulary, a split and token ids.
"""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from icl_gd.core.errors import ConfigError, DatasetNotFoundError

GENSIM_WIKI = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
DEVIL_DICT = Path("/usr/share/dictd/devil.dict.dz")
WIKITEXT_FILES = ("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens")
UNK, EOS = "<unk>", "<eos>"
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
