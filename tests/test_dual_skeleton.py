"""The dual-form skeleton (``icl_gd.dual.study``) and ``DualForm`` (``icl_gd.dual.form``): the worked example of
docs/adding-a-study.md runs as written and its scorer agrees with the library's class totals; a (part, seed) is
kept, reused and its store removed as configured; ``DualForm``'s answers and refusals."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from icl_gd.constructions.dual_form import DualCase, train_recorded
from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import RunContext
from icl_gd.dual.removal import UnitSelection, removal_delta
from icl_gd.dual.settings import LAYERS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "adding-a-study.md"
TINY = ["train_examples=120", "hidden=8", "epochs=2", "batch_size=40", "n_queries=15", "seeds=2"]
CPU = torch.device("cpu")


def _example(tmp_path):
    code = re.search(r"<!-- example-dual-study -->\n```python\n(.*?)```", PAGE.read_text(), re.S).group(1)
    assert len(code.splitlines()) <= 60
    path = tmp_path / "predicted_class_attention.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("predicted_class_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dual-example")
    module = _example(tmp)
    config = apply_overrides(module.STUDY.default_config(), TINY)
    out = tmp / "run"
    out.mkdir()
    mean = module.STUDY.run(config, RunContext(out, CPU, progress=False))
    return module, config, out, mean


def test_documented_dual_example_writes_a_complete_run(example):
    module, config, out, mean = example
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["mean"] == mean and set(metrics["seeds"]) == {"0", "1"}
    for name in LAYERS:
        shares = [metrics["seeds"][s][f"single.{name}.predicted_class_share"] for s in ("0", "1")]
        assert all(0.0 < v < 1.0 for v in shares) and shares[0] != shares[1]  # two seeds, two networks
    assert sorted(p.name for p in (out / "results" / "single").iterdir()) == ["seed-0.pt", "seed-1.pt"]
    assert (out / "store" / "single" / "seed-0" / "manifest.json").is_file()  # keep_store defaults to true


def test_the_example_scorer_agrees_with_the_class_totals(example, tmp_path):
    """The scorer sees every unit's |k·q + 1| once: its per-query share equals score_queries's attention of the
    predicted class over the total (a scan feeding scorers the raw k·q, or a block twice, fails here)."""
    module, config, _, _ = example
    tasks = config.data.build()
    trained = module.train_setting(config.training, "single", tasks, 0, tmp_path / "store", CPU)
    form = trained.dual_form()
    assert all(form.layer(name).n_steps == trained.n_steps for name in LAYERS)  # what the spotlights' steps read
    batch = form.inputs(torch.as_tensor(tasks[0].data.test_x[:9], dtype=torch.float64))
    predicted = batch.logits.argmax(1).numpy()
    for name in LAYERS:
        share = module.PredictedClassShare(predicted)
        form.scan(name, batch.query(name), batch.readout(name), [share], block_rows=50)
        scores = form.score(name, batch.query(name), batch.readout(name), n_classes=10, n_epochs=trained.n_epochs)
        expected = scores.attention_by_class[np.arange(9), predicted] / scores.attention_total
        np.testing.assert_allclose((share.same / share.total).numpy(), expected, rtol=1e-5)


def test_a_rerun_reuses_every_finished_part_and_keep_store_false_removes_the_store(example, tmp_path, monkeypatch):
    module, config, _, _ = example
    config = apply_overrides(config, ["seeds=1", "keep_store=false"])
    out = tmp_path / "run"
    (out / "store" / "single" / "seed-0").mkdir(parents=True)
    (out / "store" / "single" / "seed-0" / "leftover").write_text("an interrupted attempt")
    first = module.STUDY.run(config, RunContext(out, CPU, progress=False))
    assert not (out / "store" / "single" / "seed-0").exists()  # the leftover went first, the store after reading

    def no_training(*args, **kwargs):
        raise AssertionError("a finished (part, seed) was trained again")

    monkeypatch.setattr(module, "train_setting", no_training)
    assert module.STUDY.run(config, RunContext(out, CPU, progress=False)) == first


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return train_recorded(DualCase(epochs=2, n_examples=24, batch_size=8), tmp_path_factory.mktemp("form"))


def test_dual_form_verifies_against_the_stored_and_the_model_weights(recorded):
    form = recorded.dual_form()
    batch = form.inputs(recorded.inputs[:6], readouts=False)
    for name in form.names:
        stored, model = form.verify(name, batch.query(name)), form.verify(name, batch.query(name), against="model")
        assert stored.max_rel_error < 1e-12 and model.max_rel_error < 1e-12
    with torch.no_grad():  # a model that moved since training no longer matches its dual form
        recorded.modules[2].weight.add_(0.1)
    try:
        assert form.verify("output", batch.query("output"), against="model").weight_max_rel_error > 1e-3
        assert form.verify("output", batch.query("output")).max_rel_error < 1e-12
    finally:
        with torch.no_grad():
            recorded.modules[2].weight.sub_(0.1)


def test_dual_form_removal_subtracts_exactly_and_restores(recorded):
    form = recorded.dual_form()
    before = [m.weight.detach().clone() for m in recorded.modules]
    selection = UnitSelection(epochs=(0,))
    dW, _ = removal_delta(form.layer("hidden"), selection)
    with form.removed({"hidden": selection}):
        np.testing.assert_allclose(recorded.modules[1].weight.detach().numpy(), before[1].numpy() - dW, atol=1e-15)
        assert torch.equal(recorded.modules[0].weight, before[0])  # only the named layer
    rows = np.array([0, 3, 3, 7])
    key, value, _ = form.layer("output").gather(rows)
    with form.without_rows("output", rows):
        np.testing.assert_allclose(recorded.modules[2].weight.detach().numpy(), before[2].numpy() - value.T @ key,
                                   atol=1e-15)
    assert all(torch.equal(m.weight, w) for m, w in zip(recorded.modules, before))  # restored bit for bit


def test_dual_form_refuses_what_it_cannot_answer(recorded):
    form = recorded.dual_form()
    with pytest.raises(ConfigError, match="unknown layer 'fc9'"):
        form.layer("fc9")
    with pytest.raises(ConfigError, match="without read-outs"):
        form.inputs(recorded.inputs[:2], readouts=False).readout("input")
    with pytest.raises(ConfigError, match="not in the key store"):
        type(form)(recorded.store, recorded.model, {"fc9": recorded.modules[0]})
