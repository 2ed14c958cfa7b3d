import pytest
import torch

from icl_gd.constructions.prop1 import gd_model
from icl_gd.regression.baselines import GDPredictor, ZeroPredictor
from icl_gd.core.errors import ConfigError
from icl_gd.regression.ood import MixedNormalisedInputs, default_sweeps, evaluate_sweeps
from icl_gd.regression.tasks import make_generator
from icl_gd.regression.tasks import LinearRegressionTask, NormalisedInputs, UniformInputs
from icl_gd.regression.tokens import ConcatLayout


def test_sweeps_shift_the_task_as_named():
    task = LinearRegressionTask(inputs=UniformInputs(1.0))
    sweeps = {s.name: s for s in default_sweeps(10)}
    assert set(sweeps) == {"input_scale", "weight_scale", "input_law_exponential", "input_law_normal",
                           "input_law_laplace", "input_law_mixture", "distractors"}
    assert sweeps["input_law_mixture"].shift(task, 2.0).inputs == MixedNormalisedInputs(scale=2.0)
    assert sweeps["input_scale"].shift(task, 2.0).inputs == UniformInputs(2.0)
    assert sweeps["weight_scale"].shift(task, 3.0).weight_scale == 3.0
    assert sweeps["input_law_laplace"].shift(task, 0.5).inputs == NormalisedInputs("laplace", 0.5)
    assert sweeps["distractors"].values == (0.0, 2.0, 4.0, 6.0, 8.0)
    assert sweeps["distractors"].shift(task, 4.0).n_distractors == 4
    assert max(default_sweeps(3)[-1].values) <= 3


def test_constructed_lsa_tracks_gd_on_every_sweep_point():
    task = LinearRegressionTask()
    layout = ConcatLayout(10)
    predictors = {"gd": GDPredictor(layout, [6.0]), "lsa": gd_model(10, 1, 10, [6.0]),
                  "zero": ZeroPredictor(layout)}
    rows = evaluate_sweeps(task, predictors, default_sweeps(10), n_tasks=200, seed=0, dtype=torch.float64)
    by_point = {}
    for r in rows:
        by_point.setdefault((r["sweep"], r["value"]), {})[r["model"]] = r["loss"]
    assert len(by_point) == 7 + 6 * 5 + 5
    for losses in by_point.values():
        assert losses["lsa"] == pytest.approx(losses["gd"], rel=1e-10)
    # Larger inputs make one fixed-η GD step overshoot: the loss grows along the input-scale sweep.
    scale = [by_point[("input_scale", v)]["gd"] for v in (0.5, 1.0, 2.0)]
    assert scale[0] < scale[1] < scale[2]


def test_mixture_draws_one_law_per_task_normalised_per_task():
    """Each task's inputs are entirely from the law its index names (exponential: all positive; the others have
    both signs), every law occurs, and each context has Frobenius norm = scale. Catches a mixture drawn per
    input instead of per task, or one law for the whole batch."""
    law = MixedNormalisedInputs(scale=2.0)
    shape = (600, 11, 10)
    x = law.sample(shape, make_generator(0, 0, 1), "cpu", torch.float64)
    # Same generator state as sample: the candidate draws first, then the per-task indices.
    gen = make_generator(0, 0, 1)
    for name in law.laws:
        NormalisedInputs(name, 2.0).sample(shape, gen, "cpu", torch.float64)
    index = law.law_indices(shape[0], gen, "cpu")
    assert set(index.tolist()) == {0, 1, 2}
    positive = (x >= 0).flatten(1).all(dim=1)
    assert torch.equal(positive, index == 0)
    norms = x[:, :-1].flatten(1).norm(dim=1)
    torch.testing.assert_close(norms, torch.full_like(norms, 2.0), rtol=1e-12, atol=0)
    with pytest.raises(ConfigError):
        MixedNormalisedInputs(laws=("cauchy",))
    with pytest.raises(ConfigError):
        MixedNormalisedInputs(laws=())
