"""Every figure a study draws says what ran and speaks in words: tiny runs of every study with figures on, each
figure inspected as it is saved (``Figure.savefig``), before it is written."""

from __future__ import annotations

import re

import pytest

from icl_gd.core.errors import ICLGDError

pytestmark = pytest.mark.slow  # tiny runs of every study, each drawing its figures

# A code identifier where a reader needs words: snake_case (``input_law_exponential``), a dotted metric key
# (``hidden.vote_accuracy``) or a metric name with a reference suffix (``pred_diff vs gd``).
IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z]+\.[a-z_]+\b")
_REGRESSION = ("steps=6", "batch_size=16", "n_test=64", "n_tune=64", "eval_every=3")
TINY = {  # (study, preset, overrides): cheap, every figure of the study drawn
    "single-layer": ("default", (*_REGRESSION, "n_ood=16", "max_applications=3", "interpolation_points=3")),
    "multi-layer": ("default", (*_REGRESSION, "layers=2", "recurrent=true", "n_ood=16", "max_applications=3",
                                "gdpp_adam_steps=2")),
    "sine": ("default", _REGRESSION),
    "separate-tokens": ("default", (*_REGRESSION, "n_copy=8")),
    "softmax-heads": ("default", _REGRESSION),
    "which-algorithm": ("default", (*_REGRESSION, "n_contexts=20", "n_queries=10", "newton_steps=2", "gd_steps=1,2",
                                    "tuned_steps=2")),
    "dual-form": ("default", ("dataset=digits", "second_task=permuted", "train_examples=120", "hidden=8", "epochs=1",
                              "n_queries=6", "n_figure_queries=1", "settings=single")),
    "dual-form-lm": ("default", (*(f"{s}.data.{k}" for s in ("book", "wiki")
                                   for k in ("max_train_tokens=3000", "max_eval_tokens=2000")),
                                 "book.training.steps=3", "wiki.training.steps=3", "n_queries=4", "context=20",
                                 "n_passages=1")),
    "spotlights": ("default", ("train_examples=120", "hidden=8", "epochs=1", "n_queries=4", "subsets=4",
                               "retrain_seeds=1", "loo_queries=1", "loo_k=20", "methods=")),
}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """study -> [(figure file, its suptitle, its axes' x / y labels)] as saved, or the reason it could not run."""
    import matplotlib.figure

    from icl_gd.studies import run

    seen: list[tuple[str, str, list[str]]] = []
    original = matplotlib.figure.Figure.savefig

    def inspect(fig, fname, *args, **kwargs):
        if kwargs.get("format") == "png":
            labels = [text for ax in fig.axes for text in (ax.get_xlabel(), ax.get_ylabel()) if text]
            seen.append((fig.get_suptitle(), labels))
        return original(fig, fname, *args, **kwargs)

    out, result = tmp_path_factory.mktemp("figures"), {}
    matplotlib.figure.Figure.savefig = inspect
    try:
        for study, (preset, overrides) in TINY.items():
            seen.clear()
            try:
                run(study, out / study, preset=preset, overrides=list(overrides), seeds=2, threads=1)
            except ICLGDError as exc:  # e.g. a data set not installed here
                result[study] = f"{type(exc).__name__}: {exc}"
                continue
            result[study] = list(seen)
    finally:
        matplotlib.figure.Figure.savefig = original
    return result


@pytest.mark.parametrize("study", list(TINY))
def test_every_figure_names_what_ran_and_labels_its_axes_in_words(drawn, study):
    figures = drawn[study]
    if isinstance(figures, str):
        pytest.skip(figures)
    assert figures, f"{study} drew no figure"
    preset = TINY[study][0]
    for title, labels in figures:
        assert study in title and f"{preset} preset" in title and "2 seeds" in title, title
        for label in labels:
            assert not IDENTIFIER.search(label), f"{study}: axis label {label!r} is a code identifier ({title!r})"
