"""Corpora for dual-form-lm: every source read from files the tests write, the fallbacks of ``auto``, the split,
the vocabulary, and every bad input as a typed one-line error."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from icl_gd.dual import text_sources as sources
from icl_gd.dual.corpus import (
    build_vocab, detokenise, per_document_limit, require_length, split_documents, tokenise,
)
from icl_gd.dual.text_sources import (
    EOS, UNK, Document, RawCorpus, load_dictd, load_path, load_raw, resolve_corpus, words_of,
)
from icl_gd.core.errors import ConfigError, DatasetNotFoundError


def _dictd_number(value: int) -> str:
    digits = sources._DICTD_DIGITS
    out = ""
    while True:
        out = digits[value % 64] + out
        value //= 64
        if value == 0:
            return out


def write_dictd(tmp_path, entries: dict[str, str]):
    """A dictd dictionary in the dict-devil layout: NAME.dict.dz (gzip) and NAME.index (headword, b64 offset,
    b64 length), with a 00-database header entry and an alias headword pointing at an entry already listed."""
    header = "00-database-short\n     a test dictionary\n"
    data, index = header, [f"00databaseshort\t{_dictd_number(0)}\t{_dictd_number(len(header))}"]
    for headword, text in entries.items():
        index.append(f"{headword}\t{_dictd_number(len(data.encode()))}\t{_dictd_number(len(text.encode()))}")
        data += text
    first = index[1].split("\t")
    index.append(f"alias\t{first[1]}\t{first[2]}")
    path = tmp_path / "test.dict.dz"
    with gzip.open(path, "wb") as f:
        f.write(data.encode())
    (tmp_path / "test.index").write_text("\n".join(index) + "\n")
    return path


def test_words_and_eos_per_line_or_paragraph():
    assert words_of("Hello, World!\nit's here") == ["hello", ",", "world", "!", EOS, "it's", "here", EOS]
    assert words_of("a wrapped\nline\n\nnext", paragraphs=True) == ["a", "wrapped", "line", EOS, "next", EOS]
    assert words_of("Keep Case", lowercase=False) == ["Keep", "Case", EOS]


def test_dictd_book_one_document_per_entry_titled_by_headword(tmp_path):
    path = write_dictd(tmp_path, {"abasement": "ABASEMENT, n.  A decent\nattitude.\n\n",
                                  "abatis": "ABATIS, n.  Rubbish in front of a fort.\n\n",
                                  "zeal": "ZEAL, n.  A nervous disorder.\n"})
    raw = load_dictd(path)
    assert [d.title for d in raw.documents] == ["abasement", "abatis", "zeal"]  # header skipped, alias deduplicated
    assert raw.documents[0].words == ("abasement", ",", "n", ".", "a", "decent", "attitude", ".", EOS)
    assert load_path(path).documents == raw.documents  # a .dict.dz path reads the same way


def test_book_is_read_from_its_documented_path(tmp_path, monkeypatch):
    path = write_dictd(tmp_path, {f"w{i}": f"W{i}, n. entry {i}.\n" for i in range(4)})
    monkeypatch.setattr(sources, "DEVIL_DICT", path)
    raw = load_raw("book")
    assert raw.name == "book" and len(raw.documents) == 4


def test_text_file_paragraphs_and_wikitext_directory(tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("First paragraph\nwrapped.\n\nSecond one.\n\n\nThird.\n", encoding="utf-8")
    raw = load_path(text)
    assert [d.words for d in raw.documents] == [("first", "paragraph", "wrapped", ".", EOS),
                                                ("second", "one", ".", EOS), ("third", ".", EOS)]
    for split, title in (("train", "Alpha"), ("valid", "Beta"), ("test", "Gamma")):
        (tmp_path / f"wiki.{split}.tokens").write_text(
            f" = {title} = \n\n the {split} text . \n = = Section = = \n more words \n = {title}2 = \n last \n")
    raw = load_path(tmp_path)
    assert [d.title for d in raw.documents] == ["Alpha", "Alpha2", "Beta", "Beta2", "Gamma", "Gamma2"]
    assert raw.splits == {"train": (0, 1), "valid": (2, 3), "test": (4, 5)}
    assert raw.documents[0].words == ("the", "train", "text", ".", EOS, "=", "=", "section", "=", "=", EOS,
                                      "more", "words", EOS)  # section titles stay in the text


def test_auto_falls_back_wiki_then_book_then_pydoc(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "gensim_wiki_path", lambda: tmp_path / "dump.bz2")
    assert resolve_corpus("auto") == "wiki"
    monkeypatch.setattr(sources, "gensim_wiki_path", lambda: None)
    monkeypatch.setattr(sources, "DEVIL_DICT", write_dictd(tmp_path, {"a": "A, n. x.\n"}))
    assert resolve_corpus("auto") == "book"
    monkeypatch.setattr(sources, "DEVIL_DICT", tmp_path / "missing.dict.dz")
    assert resolve_corpus("auto") == "pydoc"
    raw = load_raw("auto")
    assert raw.name == "pydoc" and len(raw.documents) > 50 and all(d.words for d in raw.documents)
    assert resolve_corpus("/some/path") == "/some/path"


def test_missing_corpora_name_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "gensim_wiki_path", lambda: None)
    with pytest.raises(DatasetNotFoundError, match="pip install gensim"):
        load_raw("wiki")
    monkeypatch.setattr(sources, "DEVIL_DICT", tmp_path / "devil.dict.dz")
    with pytest.raises(DatasetNotFoundError, match="apt-get install dict-devil"):
        load_raw("book")
    with pytest.raises(DatasetNotFoundError, match="no such file"):
        load_raw(str(tmp_path / "nothing.txt"))
    with pytest.raises(DatasetNotFoundError, match="wiki.train.tokens"):
        load_raw(str(tmp_path))  # a directory without WikiText-2's files


def test_bad_files_are_config_errors(tmp_path):
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01\x02text")
    with pytest.raises(ConfigError, match="binary"):
        load_path(binary)
    latin = tmp_path / "l.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(ConfigError, match="UTF-8"):
        load_path(latin)
    empty = tmp_path / "e.txt"
    empty.write_text("")
    with pytest.raises(ConfigError, match="no text"):
        tokenise(load_path(empty), 10)
    with pytest.raises(ConfigError, match="at least 3"):
        tokenise(RawCorpus("two", (Document("a", ("x",)), Document("b", ("y",)))), 10)
    broken = tmp_path / "x.dict.dz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(ConfigError, match="gzip"):
        load_dictd(broken)


def test_split_is_by_document_deterministic_and_disjoint():
    a, b = split_documents(50, 0.1, 0.2), split_documents(50, 0.1, 0.2)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert (len(a["valid"]), len(a["test"]), len(a["train"])) == (5, 10, 35)
    assert sorted(np.concatenate(list(a.values())).tolist()) == list(range(50))
    small = split_documents(3, 0.1, 0.1)
    assert all(len(v) == 1 for v in small.values())


def test_vocabulary_counts_training_documents_only_and_maps_the_rest_to_unk():
    docs = tuple(Document(f"d{i}", words) for i, words in enumerate(
        [("b", "a", "a", "c"), ("a", "b", "z"), ("q", "q", "q", "q"), ("a", "c", "c", EOS)]))
    # counts: a 4, q 4, c 3, b 2, z 1; ties by word; <eos> is always in and never counted
    assert build_vocab(docs, 5) == (UNK, EOS, "a", "q", "c")
    assert build_vocab(docs, 4) == (UNK, EOS, "a", "q")
    corpus = tokenise(RawCorpus("toy", docs, {"train": (0, 1), "valid": (2,), "test": (3,)}), 4)
    assert corpus.vocab == (UNK, EOS, "a", "b")  # built on documents 0 and 1 only: a (3), b (2)
    assert corpus.words(corpus.test.ids) == ["a", UNK, UNK, EOS]
    assert corpus.train.document.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert corpus.train.position.tolist() == [0, 1, 2, 3, 0, 1, 2]
    capped = tokenise(RawCorpus("toy", docs, {"train": (0, 1), "valid": (2,), "test": (3,)}), 4, max_train_tokens=6)
    assert capped.vocab == corpus.vocab  # the cap does not change the vocabulary
    assert capped.train.document.tolist() == [0, 0, 0, 1, 1, 1]  # the first 3 words of each training document
    assert per_document_limit([10, 2, 50], 20) == 9 and per_document_limit([10, 2, 50], 100) is None
    assert per_document_limit([10, 2, 50], 5) == 1  # m = 2 would take 2 + 2 + 2 = 6 > 5 words
    with pytest.raises(ConfigError, match="fewer than one BPTT window"):
        require_length(corpus, window=3, batch_size=2, eval_batch_size=1)


def test_wiki_dump_articles_keep_titles_and_lose_markup(tmp_path):
    pytest.importorskip("gensim")  # in the 'test' extra (CI runs this); the wiki corpus itself is in '.[data]'
    import bz2

    page = ("<page><title>{title}</title><ns>{ns}</ns><id>1</id>{redirect}<revision><text>{text}</text>"
            "</revision></page>")
    bold = "&apos;&apos;&apos;"
    pages = [page.format(title="Anarchism", ns=0, redirect="",
                         text=f"{bold}Anarchism{bold} is a [[political philosophy]].\n== History ==\nThe term."),
             page.format(title="AccessibleComputing", ns=0, redirect="<redirect title='Computer accessibility' />",
                         text="#REDIRECT [[Computer accessibility]]"),
             page.format(title="Talk:Anarchism", ns=1, redirect="", text="a talk page"),
             page.format(title="Albedo", ns=0, redirect="", text="Albedo is [[reflection|reflectance]].")]
    xml = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">' + "".join(pages) + "</mediawiki>"
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(xml.encode()))
    raw = sources.load_wiki(path=path)
    assert [d.title for d in raw.documents] == ["Anarchism", "Albedo"]
    assert raw.documents[0].words == ("anarchism", "is", "a", "political", "philosophy", ".", EOS, "history", EOS,
                                      "the", "term", ".", EOS)
    assert raw.documents[1].words == ("albedo", "is", "reflectance", ".", EOS)


def test_character_level_reads_the_detokenised_text_and_counts_unk():
    # detokenise: no space before closing punctuation or after an opening bracket; <eos> is a newline
    assert detokenise(["A", "fox", ",", "vain", "(", "very", ")", "!", EOS, "Moral", "."]) == "A fox, vain (very)!\nMoral."
    docs = tuple(Document(f"FABLE{i}", tuple(words)) for i, words in enumerate(
        [("The", "crow", ".", EOS), ("A", "fox", "!", EOS), ("Zzz", EOS)]))
    corpus = tokenise(RawCorpus("book", docs, {"train": (0, 1), "valid": (2,), "test": (2,)}), 20, level="char")
    assert corpus.level == "char" and all(len(t) == 1 for t in corpus.vocab[2:])
    assert corpus.text(corpus.words(corpus.train.ids[:5])) == "The c"
    assert corpus.train.position.tolist()[:12] == [*range(10), 0, 1]  # positions count characters of each entry
    assert corpus.words(corpus.test.ids) == [UNK, UNK, UNK, "\n"]  # Z and z never occur in training
    assert corpus.unk_share("test") == 0.75 and corpus.unk_share("train") == 0.0
    words = tokenise(RawCorpus("book", docs, {"train": (0, 1), "valid": (2,), "test": (2,)}), 12)
    assert words.level == "word" and words.text(["a", "fox"]) == "a fox"
