"""One optimiser part (``icl_gd.core.optim``): the same key names and meanings in every study, one factory."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from operator import attrgetter

import pytest
import torch

from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ConfigError
from icl_gd.core.optim import clip_gradients, make_optimizer, require_optimizer_keys
from icl_gd.studies import get_study, study_names


def _training_paths(config, prefix: str = "") -> list[str]:
    """Dotted paths of every ``training`` part of a config ("" prefix for ``training`` at the top; a study with
    several set-ups, e.g. dual-form-lm's book and wiki, has one per set-up)."""
    paths = []
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name == "training":
            paths.append(prefix)
        elif is_dataclass(value):
            paths += _training_paths(value, f"{prefix}{f.name}.")
    return paths


# Studies with no optimiser part, each for a reason of the theory it referees: finite-tasks solves its layer in
# closed form, where gradient descent from zero ends (least squares on the layer's d² features; tests/
# test_theory_asymptotics.py runs the descent to it); plateaus runs plain full-batch gradient descent with a step size
# per layer, no clipping and no decay, as the gradient flow it is compared with.
NO_OPTIMISER = ("finite-tasks", "plateaus")


@pytest.mark.parametrize("name", NO_OPTIMISER)
def test_a_study_without_an_optimiser_has_no_training_part(name):
    assert _training_paths(get_study(name).default_config()) == []


@pytest.mark.parametrize("name", [n for n in study_names() if n not in NO_OPTIMISER])
def test_grad_clip_is_one_key_in_every_study(name):
    """grad_clip, lr and weight_decay are the same keys in every study's training part (one per set-up)."""
    default = get_study(name).default_config()
    paths = _training_paths(default)
    assert paths, f"{name} has no training part"
    for prefix in paths:
        key = f"{prefix}training." if prefix else ""  # one training part: the bare key names reach it
        config = apply_overrides(default, [f"{key}grad_clip=1", f"{key}lr=0.5", f"{key}weight_decay=0.25"])
        training = attrgetter(f"{prefix}training")(config)
        assert (training.grad_clip, training.lr, training.weight_decay) == (1.0, 0.5, 0.25)
        with pytest.raises(ConfigError, match="grad_clip must be non-negative"):
            apply_overrides(config, [f"{key}grad_clip=-1"])


def test_make_optimizer_reads_the_shared_keys():
    class Keys:
        lr, weight_decay, momentum, beta1, beta2 = 0.1, 0.01, 0.9, 0.8, 0.95

    params = [torch.nn.Parameter(torch.ones(3))]
    sgd, adamw = make_optimizer("sgd", params, Keys), make_optimizer("adamw", params, Keys)
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0.9
    assert isinstance(adamw, torch.optim.AdamW) and adamw.defaults["betas"] == (0.8, 0.95)
    assert adamw.defaults["lr"] == 0.1 and adamw.defaults["weight_decay"] == 0.01
    params[0].grad = torch.full((3,), 4.0)
    clip_gradients(params, 0)  # 0: off
    assert params[0].grad.norm() > 6
    clip_gradients(params, 1.0)
    assert params[0].grad.norm() == pytest.approx(1.0)
    Keys.beta2 = 1.0
    with pytest.raises(ConfigError, match="beta2 must be in"):
        require_optimizer_keys(Keys)
