"""One checkpoint policy (``icl_gd.core.checkpoints``) in every loop that resumes: a damaged or foreign checkpoint
is set aside with one notice and the run finishes with the numbers of a run that never had one. (The regression
trainer's own cases are in test_training.py.)"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from icl_gd.constructions.dual_lm import TINY, random_corpus
from icl_gd.core.checkpoints import load_checkpoint, save_checkpoint
from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ICLGDNotice
from icl_gd.core.study import RunContext
from icl_gd.dual.lm_training import train_lm
from icl_gd.studies import get_study

CPU = torch.device("cpu")


def test_absent_resumed_corrupt_and_stale(tmp_path):
    path = tmp_path / "part.pt"
    assert load_checkpoint(path, "a") is None and load_checkpoint(None, "a") is None
    save_checkpoint(path, "a", {"step": 3, "w": torch.ones(2)})
    assert load_checkpoint(path, "a")["step"] == 3
    with pytest.warns(ICLGDNotice, match="part.pt belongs to other settings; moved to part.pt.stale"):
        assert load_checkpoint(path, "b") is None
    assert not path.exists() and (tmp_path / "part.pt.stale").exists()
    for damaged in (b"", b"not a checkpoint"):
        path.write_bytes(damaged)
        with pytest.warns(ICLGDNotice, match="part.pt is unreadable.*moved to part.pt.corrupt"):
            assert load_checkpoint(path, "a") is None
        assert not path.exists() and (tmp_path / "part.pt.corrupt").exists()
    torch.save({"step": 3}, path)  # a torch file, but not one of ours
    with pytest.warns(ICLGDNotice, match="unreadable"):
        assert load_checkpoint(path, "a") is None


@pytest.mark.slow
def test_language_model_sets_a_damaged_checkpoint_aside_and_finishes(tmp_path):
    config, corpus = replace(TINY, layers=1, checkpoint_every=20), random_corpus(0, documents=8, words=150)
    reference = train_lm(config, corpus, 0, tmp_path / "whole" / "store", tmp_path / "whole" / "ckpt.pt", CPU)

    def interrupt(step: int) -> None:
        if step == 27:
            raise KeyboardInterrupt

    store, checkpoint = tmp_path / "cut" / "store", tmp_path / "cut" / "ckpt.pt"
    with pytest.raises(KeyboardInterrupt):
        train_lm(config, corpus, 0, store, checkpoint, CPU, on_step=interrupt)
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    with pytest.warns(ICLGDNotice, match="ckpt.pt is unreadable"):
        resumed = train_lm(config, corpus, 0, store, checkpoint, CPU)
    assert (tmp_path / "cut" / "ckpt.pt.corrupt").exists()
    assert resumed.n_steps == reference.n_steps
    assert torch.equal(resumed.model.output.weight, reference.model.output.weight)  # trained again from scratch


@pytest.mark.slow
def test_dual_form_study_sets_a_damaged_or_stale_result_aside_and_finishes(tmp_path):
    study = get_study("dual-form")
    tiny = ["dataset=digits", "hidden=12", "epochs=2", "n_queries=8", "top_k=3", "n_figure_queries=0",
            "train_examples=128", "settings=single", "steps=3"]  # no per-query figures: three runs draw them
    config = apply_overrides(study.default_config(), tiny)

    def run(config) -> dict:
        (tmp_path / "metrics.json").unlink(missing_ok=True)  # as if interrupted before the end
        mean = study.run(config, RunContext(tmp_path, CPU, progress=False))
        # NaN (a Table-1 split with no queries) as None, so that a resumed run can equal the first
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in mean.items()
                if "wall_seconds" not in k}

    first = run(config)
    result = tmp_path / "results" / "single" / "seed-0.pt"
    result.write_bytes(result.read_bytes()[:50])
    with pytest.warns(ICLGDNotice, match="seed-0.pt is unreadable"):
        assert run(config) == first
    assert result.with_name("seed-0.pt.corrupt").exists()
    with pytest.warns(ICLGDNotice, match="seed-0.pt belongs to other settings"):
        other = run(apply_overrides(config, ["top_k=2"]))
    assert result.with_name("seed-0.pt.stale").exists()
    assert other["test_accuracy"] == first["test_accuracy"]  # top_k changes the analysis, not the training
