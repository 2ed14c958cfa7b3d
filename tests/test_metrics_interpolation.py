import pytest
import torch

from icl_gd.constructions.prop1 import gd_model, gd_step_weights
from icl_gd.regression.baselines import GDPredictor
from icl_gd.core.errors import ConfigError
from icl_gd.regression.evaluation import EvalSet, score, scored_rows
from icl_gd.regression.gd import gdpp_params_from_weights
from icl_gd.regression.interpolation import gauge_fixed_products, interpolate_models, interpolate_weights
from icl_gd.regression.lsa import LSAConfig, LSAModel, LSAWeights
from icl_gd.regression.metrics import alignment, predictions_and_sensitivities, regression_loss
from icl_gd.regression.tasks import LinearRegressionTask
from icl_gd.regression.tokens import ConcatLayout, ConcatTokenTask


def _test_set(n=512):
    batch, tokens = ConcatTokenTask(LinearRegressionTask()).batch_tokens(n, 0, dtype=torch.float64)
    return EvalSet(tokens, batch.y_query, 10)


def test_loss_and_alignment_formulas():
    pred, ref = torch.tensor([[1.0], [3.0]]), torch.tensor([[0.0], [1.0]])
    assert regression_loss(pred, ref) == pytest.approx(0.5 * (1 + 4) / 2)
    s, s_ref = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    a = alignment(pred, ref, s, s_ref)
    assert a.pred_diff == pytest.approx(1.5) and a.cos_sensitivity == pytest.approx(0.5)
    assert a.sensitivity_diff == pytest.approx((0 + 8 ** 0.5) / 2)


def test_sensitivity_of_gd_is_its_weight_vector():
    test = _test_set(64)
    layout = ConcatLayout(10)
    _, sens = predictions_and_sensitivities(GDPredictor(layout, [2.0]), test.tokens, 10)
    x, y, _ = layout.split(test.tokens)
    W1 = 2.0 / 10 * (y.transpose(1, 2) @ x)  # one step from zero
    torch.testing.assert_close(sens, W1[:, 0])


def test_constructed_model_is_perfectly_aligned_with_gd():
    test = _test_set()
    gd = score(GDPredictor(ConcatLayout(10), [6.0]), test)
    lsa = score(gd_model(10, 1, 10, [6.0]), test)
    a = lsa.alignment_with(gd)
    assert a.pred_diff < 1e-12 and a.cos_sensitivity == pytest.approx(1.0, abs=1e-12) and a.sensitivity_diff < 1e-12
    rows = scored_rows(0, 0, "lsa", lsa, {"gd": gd})
    assert {r["metric"] for r in rows} == {"loss", "pred_diff_vs_gd", "cos_sensitivity_vs_gd",
                                          "sensitivity_diff_vs_gd"}


@pytest.mark.parametrize("heads", [1, 3])
def test_eta_read_off_gives_the_construction_eta(heads):
    eta, gamma = gdpp_params_from_weights(gd_step_weights(10, 1, 10, 6.06, n_heads=heads), 10, 1, 10)
    assert eta == pytest.approx(6.06) and gamma == 0.0


def _rescaled_gauge(weights: LSAWeights, c: float) -> LSAWeights:
    """Same products up to a gauge: W_Q·c, P/c."""
    return LSAWeights(weights.W_Q * c, weights.W_K, weights.W_V, weights.P / c)


def test_gauge_fix_undoes_a_rescaling_and_interpolation_endpoints():
    constructed = gd_step_weights(10, 1, 10, 6.0)
    trained = _rescaled_gauge(constructed, -3.7)
    QK, PV = gauge_fixed_products(trained, constructed, 10)
    QK_c, PV_c = constructed.products()
    torch.testing.assert_close(QK, QK_c)
    torch.testing.assert_close(PV, PV_c)
    for alpha in (0.0, 0.3, 1.0):
        mixed = interpolate_weights(trained, constructed, alpha, 10).products()
        torch.testing.assert_close(mixed[0], QK_c)
        torch.testing.assert_close(mixed[1], PV_c)


def test_interpolating_models_keeps_the_function_at_the_ends():
    test = _test_set(128)
    constructed = gd_model(10, 1, 10, [6.0])
    trained = LSAModel(LSAConfig(d_model=11, init_scale=1.0), seed=3).double()
    at0 = interpolate_models(trained, constructed, 0.0)
    at1 = interpolate_models(trained, constructed, 1.0)
    # α = 0 reproduces the trained model's query prediction (the gauge does not change the function).
    torch.testing.assert_close(at0(test.tokens), trained(test.tokens))
    torch.testing.assert_close(at1(test.tokens), constructed(test.tokens))
    with pytest.raises(ConfigError, match="mixing"):
        interpolate_models(trained, constructed, 1.5)


def test_dead_head_cannot_be_gauge_fixed():
    constructed = gd_step_weights(3, 1, 4, 1.0)
    dead = LSAWeights(constructed.W_Q * 0, constructed.W_K, constructed.W_V, constructed.P)
    with pytest.raises(ConfigError, match="zero QK"):
        gauge_fixed_products(dead, constructed, 3)
