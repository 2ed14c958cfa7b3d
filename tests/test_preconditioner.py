"""A trained layer read in the closed forms' terms (``icl_gd.regression.theory.trained``) and the `preconditioner`
study: the read-off Γ is exact for any LSA weights, the remainder is what is not x_qᵀ Γ h, and the study writes the
metrics its claims read, with shift rows whose closed forms are the ones of docs/theory.md."""

from __future__ import annotations

import json
import math

import pytest
import torch

from icl_gd.core.errors import ConfigError
from icl_gd.regression.lsa import LSAConfig, LSAModel, LSAWeights
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream
from icl_gd.regression.theory.one_layer import AHN_SPECTRUM, lsa_risk, optimal_preconditioner, rotated_covariance
from icl_gd.regression.theory.trained import PreconditionedStepPredictor, lsa_preconditioner, remainder_loss
from icl_gd.regression.tokens import ConcatTokenTask

F64 = torch.float64


def _model(qk: torch.Tensor, pv: torch.Tensor) -> LSAModel:
    d_model = qk.shape[-1]
    return LSAModel(LSAConfig(d_model=d_model, d_y=1, n_heads=qk.shape[0])).double().load_weights(
        LSAWeights.from_products(qk, pv))


def _tokens(d: int, n: int, count: int = 64, seed: int = 0) -> tuple[ConcatTokenTask, torch.Tensor]:
    task = ConcatTokenTask(LinearRegressionTask(d=d, n_context=n, inputs=NormalInputs()))
    return task, task.batch_tokens(count, seed, 0, Stream.TEST, dtype=F64)[1]


@pytest.mark.parametrize("d, n, heads, seed", [(5, 20, 1, 0), (3, 7, 2, 1), (8, 4, 3, 2)])
@pytest.mark.parametrize("terms", ["diagonal", "outer"])
def test_read_off_gamma_is_the_layer_when_it_has_no_remainder(d, n, heads, seed, terms):
    """With only the Γ terms in the weights (PV[y, y] QK[x, x], or QK[x, y] PV[y, x]), the layer's prediction is
    x_qᵀ Γ h to round-off on random shapes: a sign, the factor N or a transposed block would break it."""
    gen = torch.Generator().manual_seed(seed)
    qk, pv = (torch.randn(heads, d + 1, d + 1, generator=gen, dtype=F64) for _ in range(2))
    if terms == "diagonal":
        pv[:, d, :d], qk[:, :d, d] = 0, 0
    else:
        pv[:, d, d], qk[:, :d, :d] = 0, 0
    model = _model(qk, pv)
    task, tokens = _tokens(d, n, seed=seed)
    gamma = lsa_preconditioner(model.weights(), d, n)
    expected = model(tokens)
    torch.testing.assert_close(PreconditionedStepPredictor(gamma, task.layout)(tokens), expected,
                               rtol=1e-12, atol=1e-12 * float(expected.abs().max()))
    assert remainder_loss(model, gamma, task.layout, tokens, n) < 1e-20


def test_read_off_in_float32_matches_float64():
    gen = torch.Generator().manual_seed(3)
    qk, pv = (torch.randn(1, 6, 6, generator=gen, dtype=F64) for _ in range(2))
    weights = LSAWeights.from_products(qk, pv)
    torch.testing.assert_close(lsa_preconditioner(weights.to(dtype=torch.float32), 5, 20),
                               lsa_preconditioner(weights, 5, 20), rtol=1e-5, atol=1e-5)


def test_the_remainder_is_the_rest_of_the_prediction():
    """With every term present, remainder_loss is ½ mean (ŷ - x_qᵀ Γ h)², not 0: a read-off that absorbed the
    label-free terms would make it 0."""
    gen = torch.Generator().manual_seed(4)
    qk, pv = (torch.randn(1, 6, 6, generator=gen, dtype=F64) for _ in range(2))
    model = _model(qk, pv)
    task, tokens = _tokens(5, 20)
    gamma = lsa_preconditioner(model.weights(), 5, 20)
    rest = model(tokens) - PreconditionedStepPredictor(gamma, task.layout, context_sum=20)(tokens)
    assert remainder_loss(model, gamma, task.layout, tokens, 20) == pytest.approx(0.5 * float((rest ** 2).mean()))
    assert float((rest ** 2).mean()) > 1.0


def test_the_constructed_gamma_star_layer_has_the_closed_form_risk():
    """Γ* loaded into an LSA layer (PV[y, y] = -1, QK[x, x] = Γ*/N) predicts as the Γ* predictor, and the read-off
    returns Γ*: the study's reference and a trained layer at the optimum are the same function."""
    d, n = 4, 10
    cov = torch.diag(torch.tensor([1.0, 0.5, 0.25, 2.0], dtype=F64))
    gamma_star = optimal_preconditioner(cov, n)
    qk, pv = torch.zeros(1, d + 1, d + 1, dtype=F64), torch.zeros(1, d + 1, d + 1, dtype=F64)
    qk[0, :d, :d], pv[0, d, d] = gamma_star / n, -1.0
    model = _model(qk, pv)
    torch.testing.assert_close(lsa_preconditioner(model.weights(), d, n), gamma_star, rtol=1e-14, atol=0)
    task, tokens = _tokens(d, n)
    torch.testing.assert_close(model(tokens), PreconditionedStepPredictor(gamma_star, task.layout)(tokens))


def test_bad_read_off_input_is_refused():
    weights = LSAWeights.from_products(torch.zeros(1, 6, 6), torch.zeros(1, 6, 6))
    with pytest.raises(ConfigError, match="d \\+ 1"):
        lsa_preconditioner(weights, 4, 20)
    with pytest.raises(ConfigError, match="one layer"):
        lsa_preconditioner([weights, weights], 5, 20)
    with pytest.raises(ConfigError, match="Γ must be"):
        PreconditionedStepPredictor(torch.eye(3), ConcatTokenTask(LinearRegressionTask(d=5)).layout)


def test_the_study_writes_its_claims_metrics_and_closed_forms(tmp_path):
    """A tiny run: every metric the claims read, in range; each shift row of Γ* carries the closed form of
    lsa_risk at its point, and the normalised trained layer's closed form is its own read-off's."""
    from icl_gd.studies import run as run_study
    from icl_gd.studies.preconditioner import STUDY, PreconditionerConfig

    run_study("preconditioner", tmp_path, overrides=list(STUDY.tiny), progress=False, figures=False)
    metrics = json.loads((tmp_path / "metrics.json").read_text())["mean"]
    for key in ("gamma_cosine_trained", "worst_gap_covariate_trained_vs_gamma_star",
                "worst_gap_length_trained_normalised_vs_gamma_star", "loss_ratio_covariate_4_trained_vs_zero",
                "loss_trained", "loss_gamma_star", "loss_best_gd"):
        assert math.isfinite(metrics[key]), key
    assert metrics["gamma_cosine_best_gd"] == pytest.approx(0.9086, abs=1e-4)  # tr Γ* / (√d ‖Γ*‖), closed form
    assert metrics["risk_gamma_star"] == pytest.approx(0.41800, abs=1e-5)
    import csv
    rows = list(csv.DictReader((tmp_path / "shifts.csv").open()))
    config = PreconditionerConfig()
    cov = config.task.covariance()
    gamma_star = optimal_preconditioner(cov, 20)
    star = [r for r in rows if r["predictor"] == "Γ* (closed form)"]
    assert {(r["shift"], float(r["value"])) for r in star} == (
        {("covariate", c) for c in config.covariate_scales} | {("length", float(m)) for m in config.context_lengths})
    for r in star:
        c, m = (float(r["value"]), 20) if r["shift"] == "covariate" else (1.0, int(float(r["value"])))
        assert float(r["closed_form"]) == pytest.approx(float(lsa_risk(gamma_star, c * cov, m)), rel=1e-12)


def test_bad_study_config_is_refused():
    from icl_gd.studies.preconditioner import AnisotropicTaskConfig, PreconditionerConfig

    with pytest.raises(ConfigError, match="spectrum has 2"):
        AnisotropicTaskConfig(d=5, spectrum=(1.0, 2.0))
    with pytest.raises(ConfigError, match="context_lengths"):
        PreconditionerConfig(context_lengths=(5, 0))
    with pytest.raises(ConfigError, match="covariate_scales"):
        PreconditionerConfig(covariate_scales=(-1.0,))


def test_compare_scores_any_model_against_gamma_star_and_its_shift(tmp_path):
    """`icl-gd compare --task anisotropic --covariate-scale c`: Γ* loaded into an LSA layer is the gamma_star
    reference to round-off, and each closed-form reference carries lsa_risk on the shifted law."""
    from icl_gd.regression.compare.command import CompareRunConfig, run_comparison
    from icl_gd.regression.compare.comparison import CompareConfig

    model_file = tmp_path / "model.py"
    model_file.write_text(
        "import torch\n"
        "from icl_gd.regression.lsa import LSAConfig, LSAModel, LSAWeights\n"
        "from icl_gd.regression.theory.one_layer import AHN_SPECTRUM, optimal_preconditioner, rotated_covariance\n"
        "def build(d, n):\n"
        "    qk, pv = torch.zeros(1, d + 1, d + 1, dtype=torch.float64), torch.zeros(1, d + 1, d + 1, dtype=torch.float64)\n"
        "    qk[0, :d, :d] = optimal_preconditioner(rotated_covariance(AHN_SPECTRUM, 2024), n) / n\n"
        "    pv[0, d, d] = -1.0\n"
        "    model = LSAModel(LSAConfig(d_model=d + 1, d_y=1)).double().load_weights(LSAWeights.from_products(qk, pv))\n"
        "    model.layout = 'concat'\n"
        "    return model\n")
    config = CompareRunConfig(model=f"{model_file}:build", task="anisotropic", d=5, n=20, covariate_scale=0.5,
                              n_test=256, n_tune=256, compare=CompareConfig(steps=1, newton_steps=1))
    frame = run_comparison(config, tmp_path / "out", figures=False, progress=False)
    rows = frame.set_index("reference")
    assert rows.loc["gamma_star", "pred_diff"] < 1e-12
    cov = rotated_covariance(AHN_SPECTRUM, 2024)
    expected = float(lsa_risk(optimal_preconditioner(cov, 20), 0.5 * cov, 20))
    assert json.loads(rows.loc["gamma_star", "parameters"])["risk"] == pytest.approx(expected, abs=1e-8)
    assert rows.loc["gd_population", "pred_diff"] > 0.05  # the scalar step is another function


@pytest.mark.parametrize("settings, message", [
    ({"task": "anisotropic", "d": 4}, "--spectrum has 5 eigenvalues but --d is 4"),
    ({"task": "linear", "covariate_scale": 2.0}, "needs Gaussian inputs"),
    ({"task": "linear-normal", "covariate_scale": -1.0}, "--covariate-scale must be positive"),
    ({"task": "garg"}, "--task 'garg' is not one of")])
def test_compare_refuses_a_bad_law(settings, message):
    from icl_gd.regression.compare.command import CompareRunConfig

    with pytest.raises(ConfigError, match=message):
        CompareRunConfig(model="m.py:f", **settings)
