"""Study `multi-layer` end to end on tiny settings: files, metric keys and shapes, batched == sequential seeds."""

import csv

import pytest
import torch

from icl_gd.config import apply_overrides
from icl_gd.errors import ConfigError
from icl_gd.results import read_json
from studies import RunContext, get_study
from studies.multi_layer import MultiLayerConfig

TINY = dict(steps=12, batch_size=32, eval_every=6, checkpoint_every=6, n_test=128, n_tune=256, n_ood=32,
            max_applications=6, dampings="1.0,0.5", seeds=2)


def _config(**settings):
    return apply_overrides(MultiLayerConfig(), [f"{k}={v}" for k, v in {**TINY, **settings}.items()])
REQUIRED = ("loss_trained", "loss_gd", "loss_gdpp", "loss_trained_per_layer", "loss_gd_per_step",
            "loss_gdpp_per_step", "cos_sensitivity_gd", "cos_sensitivity_gdpp", "gdpp_eta", "gdpp_gamma",
            "trained_eta", "trained_gamma")


def _run(tmp_path, **settings):
    config = _config(**settings)
    mean = get_study("multi-layer").run(config, RunContext(out=tmp_path, device=torch.device("cpu"),
                                                           progress=False))
    return config, mean, read_json(tmp_path / "metrics.json")


def test_recurrent_run_writes_everything(tmp_path):
    config, mean, metrics = _run(tmp_path, layers=2, recurrent=True)
    assert all(k in metrics["mean"] for k in REQUIRED)
    m = metrics["mean"]
    assert len(m["loss_trained_per_layer"]) == len(m["loss_gd_per_step"]) == len(m["loss_gdpp_per_step"]) == 2
    assert all(isinstance(m[k], float) for k in ("gdpp_eta", "gdpp_gamma", "trained_eta", "trained_gamma"))
    assert m["loss_trained_per_layer"][-1] == pytest.approx(m["loss_trained"], rel=1e-6)
    assert m["loss_gdpp_per_step"][-1] == pytest.approx(m["loss_gdpp"], rel=1e-5)
    assert m["loss_gdpp_constructed"] == pytest.approx(m["loss_gdpp"], rel=1e-4)  # the LSA weights do GD++
    assert m["loss_gdpp"] < m["loss_gd"]
    # GD++ run with the (η, γ) read off the trained layer (K applications of one pair)
    assert 0 < m["loss_gdpp_at_trained_params"] < float("inf")
    # The peak is read back independently from curves.csv: the step where seed 0's cosine vs GD is highest.
    with open(tmp_path / "curves.csv") as handle:
        rows = [r for r in csv.DictReader(handle) if r["seed"] == "0" and r["model"] == "trained"]
    cosines = {int(r["step"]): float(r["value"]) for r in rows if r["metric"] == "cos_sensitivity_vs_gd"}
    assert sorted(cosines) == [0, 6, 12]
    peak = max(cosines, key=cosines.get)
    seed0 = metrics["seeds"]["0"]
    assert seed0["cos_sensitivity_gd_peak_step"] == peak
    assert seed0["cos_sensitivity_gd_peak"] == pytest.approx(cosines[peak], rel=1e-6)
    assert seed0["cos_sensitivity_gd"] == pytest.approx(cosines[12], rel=1e-6)  # final metrics = last curve row
    assert set(metrics["seeds"]) == {"0", "1"}
    for name in ("curves.csv", "ood.csv", "depth.csv", "weights.json"):
        assert (tmp_path / name).exists()
    for fig in ("loss_curves", "alignment_vs_gd", "alignment_vs_gdpp", "cosine_gd_then_gdpp", "per_layer_loss",
                "effective_params", "ood", "past_training_depth"):
        assert (tmp_path / "figures" / f"{fig}.png").exists()
    depth = (tmp_path / "depth.csv").read_text().splitlines()
    assert len(depth) == 1 + 2 * 2 * 3 * 6  # seeds x dampings x models x applications


def test_separate_layers_and_sequential_seeds_match_batched(tmp_path):
    _, _, batched = _run(tmp_path / "a", layers=3, recurrent=False)
    _, _, sequential = _run(tmp_path / "b", layers=3, recurrent=False, batched_seeds=False)
    a, b = batched["mean"], sequential["mean"]
    assert len(a["trained_eta"]) == len(a["gdpp_gamma"]) == len(a["loss_trained_per_layer"]) == 3
    assert not (tmp_path / "a" / "depth.csv").exists()  # past-depth runs need a tied layer
    for key in ("loss_trained", "cos_sensitivity_gdpp", "pred_diff_gd"):
        assert a[key] == pytest.approx(b[key], rel=1e-4)


def test_config_validation_and_overrides():
    config = apply_overrides(MultiLayerConfig(), ["layers=3", "recurrent=true", "dampings=1.0,0.5"])
    assert (config.model.layers, config.model.recurrent, config.dampings) == (3, True, (1.0, 0.5))
    assert config.train_config().steps == 5000 and config.train_config().grad_clip == 10.0
    assert apply_overrides(MultiLayerConfig(), ["layers=2"]).train_config().steps == 50_000
    deep = apply_overrides(MultiLayerConfig(), ["layers=4"])
    assert deep.train_config().lr == 5e-4 and deep.model.lsa_config(_Layout()).clip_activations == 10
    assert apply_overrides(deep, ["lr=0.01", "grad_clip=0"]).train_config().grad_clip is None  # 0: no clipping
    for bad in ("layers=0", "dampings=1.5", "steps=0", "lr=-1", "seeds=0", "grad_clip=-1"):
        with pytest.raises(ConfigError):
            apply_overrides(MultiLayerConfig(), [bad])


class _Layout:
    d_model, d_y = 11, 1
