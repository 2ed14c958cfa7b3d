"""Study `multi-layer` end to end on tiny settings: files, metric keys and shapes, batched == sequential seeds."""

import dataclasses

import pytest
import torch

from icl_gd.config import apply_overrides
from icl_gd.errors import ConfigError
from icl_gd.results import read_json
from studies import RunContext, get_study
from studies.multi_layer import MultiLayerConfig

TINY = dict(steps=12, batch_size=32, eval_every=6, checkpoint_every=6, n_test=128, n_tune=256, n_ood=32,
            max_applications=6, dampings=(1.0, 0.5), seeds=2)
REQUIRED = ("loss_trained", "loss_gd", "loss_gdpp", "loss_trained_per_layer", "loss_gd_per_step",
            "loss_gdpp_per_step", "cos_sensitivity_gd", "cos_sensitivity_gdpp", "gdpp_eta", "gdpp_gamma",
            "trained_eta", "trained_gamma")


def _run(tmp_path, **settings):
    config = MultiLayerConfig(**{**TINY, **settings})
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
    assert m["cos_sensitivity_gd_peak_step"] in (0.0, 6.0, 12.0)
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
    assert (config.layers, config.recurrent, config.dampings) == (3, True, (1.0, 0.5))
    assert config.training.steps == 5000 and config.training.grad_clip == 10.0
    assert MultiLayerConfig(layers=2).training.steps == 50_000
    assert MultiLayerConfig(layers=4).training.lr == 5e-4 and MultiLayerConfig(layers=4).model.clip_activations == 10
    for bad in (dict(layers=0), dict(dampings=(1.5,)), dict(steps=0), dict(lr=-1.0), dict(seeds=0)):
        with pytest.raises(ConfigError):
            dataclasses.replace(MultiLayerConfig(), **bad)
