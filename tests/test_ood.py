import pytest
import torch

from constructions.prop1 import gd_model
from icl_gd.baselines import GDPredictor, ZeroPredictor
from icl_gd.ood import default_sweeps, evaluate_sweeps
from icl_gd.tasks import LinearRegressionTask, NormalisedInputs, UniformInputs
from icl_gd.tokens import ConcatLayout


def test_sweeps_shift_the_task_as_named():
    task = LinearRegressionTask(inputs=UniformInputs(1.0))
    sweeps = {s.name: s for s in default_sweeps(10)}
    assert set(sweeps) == {"input_scale", "weight_scale", "input_law_exponential", "input_law_normal",
                           "input_law_laplace", "distractors"}
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
    assert len(by_point) == 7 + 6 * 4 + 5
    for losses in by_point.values():
        assert losses["lsa"] == pytest.approx(losses["gd"], rel=1e-10)
    # Larger inputs make one fixed-η GD step overshoot: the loss grows along the input-scale sweep.
    scale = [by_point[("input_scale", v)]["gd"] for v in (0.5, 1.0, 2.0)]
    assert scale[0] < scale[1] < scale[2]
