"""The study skeleton (icl_gd.core.study): the worked example of docs/adding-a-study.md runs as written, and what
every study shares."""

import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from icl_gd.core.config import apply_overrides, describe
from icl_gd.core.errors import ConfigError
from icl_gd.core.study import RunContext
from icl_gd.regression.study import TrainingConfig
from icl_gd.studies import get_study, study_names

EXAMPLE_PAGE = Path(__file__).resolve().parents[1] / "docs" / "adding-a-study.md"
TINY = ["steps=30", "n_test=256", "n_tune=512", "batch_size=64", "eval_every=10", "seeds=2"]


def _documented_example(tmp_path):
    text = EXAMPLE_PAGE.read_text()
    code = re.search(r"<!-- example-study -->\n```python\n(.*?)```", text, re.S).group(1)
    assert len(code.splitlines()) <= 40
    path = tmp_path / "noisy_labels.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("noisy_labels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("example")
    module = _documented_example(tmp)
    config = apply_overrides(module.STUDY.default_config(), TINY + ["ridge=0.25"])
    out = tmp / "run"
    out.mkdir()
    mean = module.STUDY.run(config, RunContext(out, torch.device("cpu"), progress=False))
    return config, out, mean


def test_documented_example_writes_a_complete_run(example_run):
    config, out, mean = example_run
    assert config.ridge == 0.25 and config.task.label_noise == 0.5
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["trained_seed0.pt", "trained_seed1.pt"]
    assert {p.name for p in (out / "figures").iterdir()} == {"loss_curves.png", "loss_curves.pdf"}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["mean"] == mean and set(metrics) == {"mean", "std", "seeds"}
    seeds = [metrics["seeds"][s]["loss_trained"] for s in ("0", "1")]
    assert mean["loss_trained"] == pytest.approx(sum(seeds) / 2, rel=1e-12)
    assert metrics["std"]["loss_trained"] == pytest.approx(abs(seeds[0] - seeds[1]) / 2 ** 0.5, rel=1e-9)
    assert metrics["std"]["loss_gd"] == 0.0  # a reference does not depend on the training seed
    # noisy labels: ridge shrinks towards zero and beats one GD step, as theory says for this noise level
    assert mean["loss_ridge"] < mean["loss_gd"]


def test_curves_hold_model_rows_aligned_with_gd_and_reference_losses(example_run):
    _, out, mean = example_run
    with open(out / "curves.csv") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["step", "seed", "model", "metric", "value"]
        rows = list(reader)
    for seed in ("0", "1"):
        mine = [r for r in rows if r["seed"] == seed]
        assert sorted({int(r["step"]) for r in mine}) == [0, 10, 20, 30]
        trained = {r["metric"] for r in mine if r["model"] == "trained"}
        # aligned with GD (align=True), not with ridge (align=False)
        assert trained == {"loss", "pred_diff_vs_gd", "cos_sensitivity_vs_gd", "sensitivity_diff_vs_gd"}
        for name in ("gd", "ridge"):
            losses = [float(r["value"]) for r in mine if r["model"] == name]
            assert losses == pytest.approx([mean[f"loss_{name}"]] * 4, rel=1e-12)  # one row per evaluation
        final = [float(r["value"]) for r in mine if r["model"] == "trained" and r["metric"] == "loss"
                 and r["step"] == "30"]
        assert final == [pytest.approx(json.loads((out / "metrics.json").read_text())["seeds"][seed]["loss_trained"],
                                       rel=1e-6)]


def test_training_none_means_the_authors_value_for_the_depth_in_every_study():
    t = TrainingConfig()
    assert (t.resolve(1, False, 100).steps, t.resolve(2, True, 100).steps, t.resolve(2, False, 100).steps) == \
        (5000, 5000, 50_000)
    assert (t.resolve(2, False, 100).grad_clip, t.resolve(3, False, 100).grad_clip) == (1e-3, 10.0)
    assert (t.resolve(3, True, 100).lr, t.resolve(4, True, 100).lr) == (1e-3, 5e-4)
    assert TrainingConfig(grad_clip=0.0).resolve(1, False, 100).grad_clip is None  # 0: off
    explicit = TrainingConfig(steps=7, lr=0.1, grad_clip=2.0)
    assert explicit.resolve(4, False, 25) == explicit.resolve(1, True, 25)  # explicit values win at any depth
    for bad in (dict(steps=0), dict(lr=0.0), dict(grad_clip=-1.0), dict(batch_size=0), dict(beta2=1.0)):
        with pytest.raises(ConfigError):
            TrainingConfig(**bad)


@pytest.mark.parametrize("name", study_names())
def test_every_key_of_every_study_is_documented_and_settable_by_suffix(name):
    config = get_study(name).default_config()
    rows = describe(config)
    undocumented = [key for key, _, doc in rows if not doc]
    assert not undocumented, undocumented
    leaves = [key.rsplit(".", 1)[-1] for key, _, _ in rows]
    for key, value, _ in rows:
        leaf = key.rsplit(".", 1)[-1]
        if leaves.count(leaf) == 1 and isinstance(value, int) and not isinstance(value, bool):
            try:
                changed = apply_overrides(config, [f"{leaf}={value + 1}"])
            except ConfigError as error:  # a key tied to another (d to a spectrum's length): set, then refused
                assert leaf in str(error) and str(value + 1) in str(error), (key, str(error))
                continue
            assert any(k == key and v == value + 1 for k, v, _ in describe(changed)), key


def test_config_json_shows_the_training_the_study_declares(tmp_path):
    from dataclasses import dataclass

    from icl_gd.core.study import Study, write_resolved_config

    @dataclass(frozen=True)
    class Toy:  # no train_config: what is shown comes from the study's declaration alone
        steps: int = 7

    for resolved, shown in [(lambda config: {"steps": config.steps * 2}, {"steps": 14}), (None, None)]:
        study = Study(name="toy", summary="toy", default_config=Toy, run=lambda config, ctx: {},
                      resolved_training=resolved)
        write_resolved_config(RunContext(tmp_path, torch.device("cpu")), study, Toy())
        written = json.loads((tmp_path / "config.json").read_text())
        assert written["study"] == "toy" and written["resolved_training"] == shown
