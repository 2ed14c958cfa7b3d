"""The LSTM language model's dual form: exact recording of every gate map and the output layer, resume after an
interrupt, blocked scoring against a dense reference, key removal, and the dual-form-lm study end to end."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from icl_gd.cli import app
from icl_gd.constructions.dual_lm import TINY, random_corpus, verify_trained
from icl_gd.dual.form import DualForm
from icl_gd.dual.lm_analysis import (
    LMAnalysisConfig, make_queries, removal_drops, score_lm,
)
from icl_gd.dual.lm_training import batchify, train_lm
from icl_gd.dual import text_sources as sources
from icl_gd.dual.lstm import layer_modules
from icl_gd.dual.store_reader import open_store
from icl_gd.dual.layer import dual_layer
from oracles import dense_scores, rebuild_weights

CPU = torch.device("cpu")
EXACT = 1e-10


def _train(tmp_path, config=TINY, seed=0, corpus=None, **kwargs):
    corpus = corpus or random_corpus(seed, documents=8, words=150)
    return train_lm(config, corpus, seed, tmp_path / "store", tmp_path / "checkpoint.pt", CPU, **kwargs), corpus


@pytest.mark.parametrize("layers,momentum,clip", [(2, 0.9, 0.3), (1, 0.0, None)])
def test_float64_dual_form_equals_the_trained_lstm(tmp_path, layers, momentum, clip):
    config = replace(TINY, layers=layers, momentum=momentum, grad_clip=clip)
    trained, corpus = _train(tmp_path, config)
    results = verify_trained(trained)
    assert [r.layer for r in results] == [f"gates{l}" for l in range(layers)] + ["output"]
    for r in results:
        assert r.weight_max_rel_error <= EXACT and r.output_max_rel_error <= EXACT, r
    # Every training position of every epoch is one row per layer, with its provenance.
    store = open_store(trained.store)
    n_rows = batchify(corpus.train, config.batch_size).ids[1:].numel() * config.epochs
    rows = store["gates0"].table("rows")
    assert rows.rows == n_rows
    example, label = rows.column("example"), rows.column("label")
    assert np.array_equal(label, corpus.train.ids[example + 1])  # the label is the next word of the key's word
    assert np.array_equal(rows.column("task"), corpus.train.document[example])
    assert set(rows.column("epoch")) == set(range(config.epochs))
    # The stored keys are the inputs [x_t; h_{t-1}]: the embedding part is the key word's embedding.
    keys = next(store["gates0"].table("rows").blocks(["key"]))[1]["key"][:50]
    embedded = trained.model.embedding.weight.detach().numpy()[corpus.train.ids[example[:50]]]
    assert not np.allclose(keys[:, :config.embed], embedded)  # weights moved since those rows were recorded...
    first_step = rows.column("step") == 0
    start = dual_layer(store["gates0"]).initial_weight  # ...but at step 0 the embedding was the initial one
    assert start.shape == (4 * config.hidden, config.embed + config.hidden)
    assert first_step.sum() == config.bptt * config.batch_size


def test_embedding_dropout_and_a_step_budget_keep_the_dual_form_exact(tmp_path):
    # Catches a key recorded before the dropout mask (the layer's real input is the dropped embedding) and a step
    # budget that stops at an epoch boundary instead of mid-epoch (masks drawn from a global generator: the resume
    # test below).
    corpus = random_corpus(0, documents=8, words=150)
    steps = len(batchify(corpus.train, TINY.batch_size).windows(TINY.bptt)) + 5  # 5 steps into the second epoch
    config = replace(TINY, layers=1, dropout=0.3, steps=steps, record_output=False)
    trained, _ = _train(tmp_path, config, corpus=corpus)
    results = verify_trained(trained)
    assert [r.layer for r in results] == ["gates0"]  # record_output=false: the output layer is not stored
    assert all(r.max_rel_error <= EXACT for r in results), results
    rows = open_store(trained.store)["gates0"].table("rows")
    assert trained.n_steps == steps and trained.n_epochs == 2
    assert set(rows.column("step")) == set(range(steps)) and set(rows.column("epoch")) == {0, 1}
    keys = np.concatenate([b["key"] for _, b in rows.blocks(["key"])])[:, :config.embed]
    assert 0.2 < np.mean(keys == 0) < 0.4  # the stored x_t is the dropped embedding


def test_float32_training_float32_keys_within_single_precision(tmp_path):
    config = replace(TINY, dtype="float32", key_dtype="float32", dropout=0.3)
    trained, _ = _train(tmp_path, config)
    for r in verify_trained(trained):
        assert r.max_rel_error <= 1e-5, r
        assert r.max_rel_error > 1e-13  # single-precision storage really is in play


def test_adam_leaves_a_reported_residual(tmp_path):
    config = replace(TINY, optimizer="adam", lr=0.01, grad_clip=None)
    trained, _ = _train(tmp_path, config)
    results = verify_trained(trained)
    assert all(not r.exact for r in results)
    assert max(r.max_unexplained_share for r in results) > 1e-3


@pytest.mark.slow
def test_interrupted_training_resumes_to_the_same_memory_and_weights(tmp_path):
    # few checkpoints (each one fsyncs every table); dropout: a resumed run must draw the masks of a whole one
    config = replace(TINY, layers=1, checkpoint_every=20, dropout=0.2)
    reference, corpus = _train(tmp_path / "whole", config)

    def interrupt(step: int) -> None:
        if step == 27:  # after the step-20 checkpoint: steps 21..27 are recorded, then lost
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path / "cut", config, corpus=corpus, on_step=interrupt)
    manifest = json.loads((tmp_path / "cut" / "store" / "manifest.json").read_text())
    assert not manifest.get("closed")
    resumed, _ = _train(tmp_path / "cut", config, corpus=corpus)
    for name, module in layer_modules(resumed.model).items():
        assert torch.equal(module.weight, layer_modules(reference.model)[name].weight)
    a, b = open_store(reference.store), open_store(resumed.store)
    for name in a:
        assert a[name].table("rows").rows == b[name].table("rows").rows
        assert np.array_equal(a[name].table("rows").column("example"), b[name].table("rows").column("example"))
        assert np.array_equal(rebuild_weights(dual_layer(a[name]))[0], rebuild_weights(dual_layer(b[name]))[0])
    # A finished run's checkpoint is reused: no training, same model.
    again, _ = _train(tmp_path / "cut", config, corpus=corpus)
    assert torch.equal(again.model.output.weight, resumed.model.output.weight)
    # Without its store (keep_store=false) a finished checkpoint is not enough: training and recording rerun.
    shutil.rmtree(resumed.store)
    rerun, _ = _train(tmp_path / "cut", config, corpus=corpus)
    assert open_store(rerun.store)["output"].table("rows").rows == a["output"].table("rows").rows
    assert torch.equal(rerun.model.output.weight, resumed.model.output.weight)


def test_blocked_scores_equal_the_dense_reference(tmp_path):
    trained, corpus = _train(tmp_path)
    config = LMAnalysisConfig(n_queries=6, context=5, top_k=4, n_passages=2, block_rows=97)
    queries = make_queries(trained.model, corpus, config)
    store = open_store(trained.store)
    for name in layer_modules(trained.model):
        layer = dual_layer(store[name])
        q, r = queries.inputs[name], queries.readouts[name]
        s = score_lm(layer, q, r, k=4, step_bins=3, n_epochs=2, n_curves=2, block_rows=97)
        attention, contribution, prov = dense_scores(layer, q, r)  # (units, nq)
        np.testing.assert_allclose(s.attention_total, attention.sum(0), rtol=1e-5)
        order = np.argsort(-attention, axis=0)[:4].T
        np.testing.assert_allclose(s.attention_top.score, np.take_along_axis(attention.T, order, 1), rtol=1e-5)
        assert np.array_equal(s.attention_top.example, prov["example"][s.attention_top.row])
        np.testing.assert_allclose(s.proponents.score, -np.sort(-contribution, axis=0)[:4].T, rtol=1e-4, atol=1e-9)
        p = attention / attention.sum(0)
        np.testing.assert_allclose(s.entropy, -(p * np.log(p)).sum(0), rtol=1e-5)
        np.testing.assert_allclose(s.attention_by_epoch.sum(1), s.attention_total, rtol=1e-6)
        np.testing.assert_allclose(s.attention_by_epoch[:, 0], attention[prov["epoch"] == 0].sum(0), rtol=1e-5)
        np.testing.assert_allclose(s.curves[:, 0], attention.max(0)[:2] / attention.sum(0)[:2], rtol=1e-5)
    # The output layer: initial part plus Σ contributions is the predicted word's logit.
    layer = dual_layer(store["output"])
    _, contribution, _ = dense_scores(layer, queries.inputs["output"], queries.readouts["output"])
    initial = (layer.initial_scale_w * queries.inputs["output"] @ layer.initial_weight.T
               + layer.initial_scale_b * layer.initial_bias)[np.arange(6), queries.pred]
    with torch.no_grad():
        logits = trained.model.output(torch.as_tensor(queries.inputs["output"]))
    np.testing.assert_allclose(initial + contribution.sum(0), logits[np.arange(6), queries.pred].numpy(), rtol=1e-9)


def test_removal_of_output_keys_matches_the_dual_sum(tmp_path):
    trained, corpus = _train(tmp_path)
    queries = make_queries(trained.model, corpus, LMAnalysisConfig(n_queries=4, context=5))
    layer = dual_layer(open_store(trained.store)["output"])
    selected = np.array([[0, 5, 9], [1, 2, 3], [7, 7, 8], [100, 200, 300]])
    form = DualForm(trained.store, trained.model, layer_modules(trained.model))
    drops = removal_drops(form, "output", queries, selected)
    key, value, bias = layer.gather(selected.reshape(-1))
    blocks = list(layer.blocks(block_rows=50))  # the units as the blocked reader gives them
    np.testing.assert_array_equal(key.reshape(12, -1), np.concatenate([b.key for b in blocks])[selected.reshape(-1)])
    np.testing.assert_array_equal(value.reshape(12, -1),
                                  np.concatenate([b.value for b in blocks])[selected.reshape(-1)])
    key, value, bias = (a.reshape(4, 3, -1) for a in (key, value, bias))
    with torch.no_grad():
        logits = trained.model.output(torch.as_tensor(queries.inputs["output"])).numpy()
    q = queries.inputs["output"]
    after = logits - np.einsum("jko,jki,ji->jo", value, key, q) - bias.sum(1)  # minus Σ v (k·q) + v^b
    p = np.exp(after - after.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(drops, queries.prob - p[np.arange(4), queries.pred], rtol=1e-7, atol=1e-12)
    assert np.all(drops != 0)
    # The model is restored exactly afterwards.
    again = make_queries(trained.model, corpus, LMAnalysisConfig(n_queries=4, context=5))
    assert np.array_equal(again.prob, queries.prob)


def _grammar_corpus(path):
    """A text with strong word order (a tiny grammar), so a few steps of training beat the unigram model."""
    rng = np.random.default_rng(0)
    subjects, verbs, objects = ["the cat", "a dog", "my bird"], ["eats", "sees", "likes"], ["fish", "seeds", "bones"]
    paragraphs = []
    for _ in range(40):
        sentences = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} ." for _ in range(12)]
        paragraphs.append(" ".join(sentences))
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    return path


def _book(path):
    """A small 'book' of titled entries (a dictd file, as dict-devil ships), read by character."""
    from test_dual_lm_corpus import write_dictd

    rng = np.random.default_rng(1)
    words = ["fox", "crow", "cheese", "moral", "wolf", "lamb", "flatter", "vain"]
    entries = {f"FABLE{i}": " ".join(rng.choice(words, 40)) + ".\n\n" for i in range(30)}
    return write_dictd(path, entries)


def _setting(setup: str, **values) -> list[str]:
    return [a for key, value in values.items() for a in ("--set", f"{setup}.{key}={value}")]


TINY_MODEL = {"training.embed": 8, "training.hidden": 16, "training.bptt": 8, "training.batch_size": 4,
              "training.lr": 0.5, "training.checkpoint_every": 50}
TINY_RUN = ["--no-progress", "--set", "n_queries=8", "--set", "context=6", "--set", "n_passages=2",
            "--set", "verify_queries=4"]


@pytest.mark.slow
def test_study_end_to_end_both_setups_on_written_texts(tmp_path):
    text = _grammar_corpus(tmp_path / "grammar.txt")
    book = _book(tmp_path)
    out = tmp_path / "run"
    args = ["run", "dual-form-lm", "--out", str(out), "--set", "setups=book,wiki", *TINY_RUN,
            *_setting("wiki", **TINY_MODEL, **{"data.corpus": text, "training.epochs": 2,
                                               "training.record_output": "true"}),
            *_setting("book", **TINY_MODEL, **{"data.corpus": book, "training.steps": 30, "passage_tokens": 20})]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "## Query 1: " in result.output  # the first query's passages are printed
    mean = json.loads((out / "metrics.json").read_text())["mean"]
    for setup in ("book", "wiki"):
        for key in ("perplexity_valid", "perplexity_test", "perplexity_unigram", "verify_max_rel_error",
                    "unk_share_test", "top_key_next_word_match", "removal_prob_drop_top", "removal_prob_drop_random"):
            assert np.isfinite(mean[f"{setup}.{key}"]), (setup, key)
        assert mean[f"{setup}.verify_max_rel_error"] < 1e-4
        np.testing.assert_allclose(mean[f"{setup}.perplexity_ratio_unigram"],
                                   mean[f"{setup}.perplexity_test"] / mean[f"{setup}.perplexity_unigram"])
    assert mean["wiki.perplexity_test"] < 0.7 * mean["wiki.perplexity_unigram"]
    assert mean["book.n_steps"] == 30  # stopped by steps, mid-epoch
    # chance level of the next-word match: a probability, and on this grammar the keys the model attends to
    # continue with the predicted word more often than a random training position does
    assert 0 < mean["wiki.top_key_next_word_match_chance"] < 1
    assert mean["wiki.top_key_next_word_match"] > mean["wiki.top_key_next_word_match_chance"]
    passages = (out / "passages.md").read_text()
    assert "# book: " in passages and "# wiki: " in passages and "grammar.txt ¶" in passages
    assert "FABLE" in passages and "(char level)" in passages  # the book's sections are its entries' headwords
    assert "**gates0, top-3 by attention**" in passages and "**output, top-3 by contribution**" in passages
    wiki = passages.split("# wiki: ")[1]
    assert wiki.count("1. [") == 2 * 2 * 2 * 3  # queries × layers × (attention, contribution) × top-3
    page = (out / "passages.html").read_text()
    assert page.startswith("<!doctype html>") and "<mark>" in page and "<script" not in page
    for figure in ("sorted_attention", "attention_over_training", "key_removal"):
        assert (out / "figures" / f"wiki.{figure}.png").is_file() and (out / "figures" / f"book.{figure}.png").is_file()
    assert json.loads((out / "summary.wiki.json").read_text())["documents"]["train"] == 32
    assert json.loads((out / "summary.book.json").read_text())["level"] == "char"


def test_cli_corpus_errors_are_one_line(tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.setattr(sources, "DEVIL_DICT", tmp_path / "devil.dict.dz")  # as on a machine without dict-devil
    no_book = runner.invoke(app, ["run", "dual-form-lm", "--out", str(tmp_path / "n"), "--set", "setups=book",
                                  "--no-progress"])
    assert no_book.exit_code == 1 and no_book.output.count("\n") == 1 and "apt-get install dict-devil" in no_book.output
    missing = runner.invoke(app, ["run", "dual-form-lm", "--out", str(tmp_path / "a"), "--set",
                                  f"wiki.data.corpus={tmp_path / 'none.txt'}", "--no-progress"])
    assert missing.exit_code == 1 and missing.output.count("\n") == 1 and "no such file" in missing.output
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\x00\x00\x00")
    bad = runner.invoke(app, ["run", "dual-form-lm", "--out", str(tmp_path / "b"), "--set",
                              f"wiki.data.corpus={binary}", "--no-progress"])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "binary" in bad.output
    short = tmp_path / "s.txt"
    short.write_text("one two.\n\nthree four.\n\nfive six.\n\nseven.\n")
    too_short = runner.invoke(app, ["run", "dual-form-lm", "--out", str(tmp_path / "c"), "--set",
                                    f"wiki.data.corpus={short}", "--no-progress"])
    assert too_short.exit_code == 2 and "fewer than one BPTT window" in too_short.output
