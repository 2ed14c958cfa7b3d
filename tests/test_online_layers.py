"""The online-layers study and what it is built from: its table of layer kinds (each construction runs its
reference's algorithm), the trained layers are the library's layers, the online references and their loss per
position, the order sensitivity, the interpolation to a construction, the population loss of online GD against
Monte Carlo, and the docs page's example."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from icl_gd.constructions.delta_rule import online_gd_weights
from icl_gd.constructions.mesa import ridge_weights
from icl_gd.regression.baselines import GDPredictor, LeastSquaresPredictor, RidgePredictor
from icl_gd.regression.online.delta_rule import DeltaRuleLayer
from icl_gd.regression.online.learned import LearnedDeltaRule, LearnedGatedDeltaRule, LearnedMesa
from icl_gd.regression.online.mesa import MesaLayer
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.online.algorithms import (normalised_lms_weights_per_token, online_gd_weights_per_token,
                                      predictions_per_token)
from icl_gd.regression.online.interpolation import interpolate_delta_rule, interpolate_mesa
from icl_gd.regression.population.online import population_nlms_of_task, population_online_gd_of_task
from icl_gd.regression.online.references import (REFERENCE, REFERENCES, NormalisedLMSPredictor, OnlineGDPredictor,
                                                 loss_per_position, tune_online_gd)
from icl_gd.regression.online.order import order_sensitivity, permuted_contexts
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs, Stream, UniformInputs
from icl_gd.regression.tokens import ConcatLayout

PAGE = Path(__file__).resolve().parents[1] / "docs" / "online-layers.md"
TASK = LinearRegressionTask(d=4, n_context=12, inputs=NormalInputs(), label_noise=0.3)
LAYOUT = ConcatLayout(4, 1)


def _tokens(n: int = 256, task: LinearRegressionTask = TASK, seed: int = 0):
    batch = task.sample(n, seed, 0, Stream.TEST, dtype=torch.float64)
    return batch, LAYOUT.tokens(batch) if task.d == LAYOUT.d_x else ConcatLayout(task.d, task.d_y).tokens(batch)


# ---------------------------------------------------------------------------------------------------- the study
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from icl_gd.studies import REGISTRY, run

    study = REGISTRY.get("online-layers")
    out = tmp_path_factory.mktemp("online_layers")
    return run("online-layers", out / "run", overrides=list(study.tiny), seeds=1, threads=1, figures=True).path


def _names():
    """(the trained kinds' names, the references' names), read from the tables."""
    from icl_gd.studies.online_layers import KINDS

    return tuple(k.name for k in KINDS), tuple(r.name for r in REFERENCES)


@pytest.mark.slow
def test_tiny_run_writes_every_table_metric_and_figure(tiny_run):
    MODELS, REFERENCES = _names()
    mean = json.loads((tiny_run / "metrics.json").read_text())["mean"]
    for name in (*MODELS, *REFERENCES):
        assert f"loss_{name}" in mean and f"order_sensitivity_{name}" in mean, name
    for name in MODELS:
        for ref in REFERENCES:
            for key in (f"loss_rel_gap_{name}_vs_{ref}", f"{name}_vs_{ref}_pred_diff",
                        f"{name}_vs_{ref}_cos_sensitivity"):
                assert math.isfinite(mean[key]), key
        assert math.isfinite(mean[f"interpolation_excess_{name}"])
    for key in ("order_log2_ratio_delta_rule_vs_online_gd", "order_log2_ratio_delta_rule_nlms_vs_nlms",
                "loss_online_gd_population", "eta_online_gd_population", "loss_nlms_population",
                "eta_nlms_population", "loss_gd_population"):
        assert math.isfinite(mean[key]), key
    import pandas as pd

    n_context = json.loads((tiny_run / "config.json").read_text())["config"]["task"]["n_context"]
    positions = pd.read_csv(tiny_run / "per_position.csv")
    for name in (*MODELS, *REFERENCES, "online_gd_population", "nlms_population", "gd_population"):
        assert sorted(positions[positions["model"] == name]["position"]) == list(range(1, n_context + 1)), name
    order = pd.read_csv(tiny_run / "order.csv")
    assert set(order["model"]) == {*MODELS, *REFERENCES}
    comparison = pd.read_csv(tiny_run / "comparison.csv")
    assert len(comparison) == len(MODELS) * len(REFERENCES)
    for name in ("per_position", "comparison", "order", "interpolation"):
        assert (tiny_run / "figures" / f"{name}.png").is_file(), name


@pytest.mark.slow
def test_interpolation_starts_at_the_trained_layer_and_ends_at_its_construction(tiny_run):
    """α = 0 is the gauge-fixed trained layer: its loss is the trained layer's (a wrong gauge, e.g. β not divided by
    c², changes it); α = 1 is the construction, whose loss is its algorithm's."""
    import pandas as pd

    from icl_gd.studies.online_layers import KINDS

    mean = json.loads((tiny_run / "metrics.json").read_text())["mean"]
    line = pd.read_csv(tiny_run / "interpolation.csv")
    assert set(line["model"]) == {kind.name for kind in KINDS}
    for kind in KINDS:
        part = line[line["model"] == kind.name].set_index("alpha")["loss"]
        assert part[0.0] == pytest.approx(mean[f"loss_{kind.name}"], rel=1e-5), kind.name
        assert part[1.0] == pytest.approx(mean[f"loss_{kind.algorithm}"], rel=1e-5), kind.name


def test_every_kind_s_construction_runs_its_reference_and_its_trained_module_interpolates():
    """Each entry of the table is consistent without a run: its construction, run by its layer, predicts as its
    reference's predictor at the same parameter (a kind paired with the wrong algorithm or construction fails), and
    its trained module's weights are the ones its interpolation takes (α = 0 is the module itself)."""
    from icl_gd.studies.online_layers import KINDS, OnlineLayersModelConfig

    _, tokens = _tokens(64)
    assert len({kind.name for kind in KINDS}) == len(KINDS)
    for kind in KINDS:
        reference = REFERENCE[kind.algorithm]
        assert reference.tune is not None, kind.name  # a construction needs a tuned parameter
        constructed = kind.construction(LAYOUT, 0.4)
        assert torch.allclose(kind.layer(constructed)(tokens), reference.predictor(LAYOUT, 0.4)(tokens),
                              rtol=1e-10, atol=1e-12), kind.name
        model = kind.trained(OnlineLayersModelConfig(), LAYOUT, 3).double()
        with torch.no_grad():
            assert torch.allclose(kind.between(model, constructed, 0.0)(tokens), model(tokens), rtol=1e-9,
                                  atol=1e-12), kind.name


@pytest.mark.slow
def test_every_online_claim_reads_the_tiny_run(tiny_run):
    from icl_gd.claims import SeedEvidence
    from icl_gd.claims.registry.beyond_online import BEYOND_ONLINE_CLAIMS

    mean = json.loads((tiny_run / "metrics.json").read_text())["mean"]
    for claim in BEYOND_ONLINE_CLAIMS:
        assert isinstance(claim.statistic(SeedEvidence((mean,), (tiny_run,))), float), claim.id


# ---------------------------------------------------------------------------------------------------- order
def test_batch_learners_do_not_move_when_the_context_is_permuted_and_online_ones_do():
    _, tokens = _tokens()
    batch_learners = {"one batch GD step": GDPredictor(LAYOUT, [0.7]), "least squares": LeastSquaresPredictor(LAYOUT),
                      "ridge": RidgePredictor(LAYOUT, 0.3), "mesa (ridge)": MesaLayer(ridge_weights(4, 1, 0.3))}
    for name, predictor in batch_learners.items():
        assert order_sensitivity(predictor, tokens, 4, seed=1) < 1e-12, name
    for name, predictor in {"online GD": OnlineGDPredictor(LAYOUT, 0.15),
                            "normalised LMS": NormalisedLMSPredictor(LAYOUT, 0.6),
                            "delta rule": DeltaRuleLayer(online_gd_weights(4, 1, 0.15))}.items():
        assert order_sensitivity(predictor, tokens, 4, seed=1) > 0.05, name


def test_a_permuted_context_holds_the_same_tokens_and_the_query_last():
    _, tokens = _tokens(16)
    permuted = permuted_contexts(tokens, torch.Generator().manual_seed(3))
    assert torch.equal(permuted[:, -1], tokens[:, -1])
    assert torch.equal(permuted[:, :-1].sort(dim=1).values, tokens[:, :-1].sort(dim=1).values)
    assert not torch.equal(permuted, tokens)
    again = permuted_contexts(tokens, torch.Generator().manual_seed(3))
    assert torch.equal(permuted, again)  # drawn from the seed alone


# ---------------------------------------------------------------------------------------------------- references
def test_online_gd_loss_per_position_equals_online_gd_after_every_token():
    """The prefix of t tokens given to the predictor as a context of its own equals online GD's weights after t
    tokens, at every t (an off-by-one in the prefix shifts every position)."""
    batch, tokens = _tokens()
    eta = 0.2
    weights = online_gd_weights_per_token(batch.x_context, batch.y_context, eta)  # (N+1, B, 1, d)
    expected = query_loss(predictions_per_token(weights, batch.x_query), batch.y_query)[1:]
    measured = loss_per_position(OnlineGDPredictor(LAYOUT, eta), tokens, batch.y_query)
    assert len(measured) == TASK.n_context
    assert torch.allclose(torch.tensor(measured, dtype=torch.float64), expected, rtol=1e-12, atol=0)


def test_the_step_size_tuner_finds_a_minimum_over_log_eta_and_refuses_when_no_loss_is_finite():
    from icl_gd.core.errors import DivergenceError
    from icl_gd.regression.tuning import tune_step_size

    assert tune_step_size(lambda eta: (eta.log() - math.log(0.3)).pow(2).sum(), 1.0) == pytest.approx(0.3)
    with pytest.raises(DivergenceError, match="no finite loss"):
        tune_step_size(lambda eta: (eta * float("nan")).sum(), 1.0)


def test_tuned_online_gd_step_is_near_the_population_optimum():
    task = replace(TASK, n_context=20, label_noise=0.0)
    batch = task.sample(8192, 0, 0, Stream.TUNE, dtype=torch.float64)
    eta = tune_online_gd(batch.x_context, batch.y_context, batch.x_query, batch.y_query)
    assert eta == pytest.approx(population_online_gd_of_task(task).eta, rel=0.1)


# ---------------------------------------------------------------------------------------------------- population
@pytest.mark.parametrize("noise", [0.0, 0.5])
@pytest.mark.slow
def test_population_online_gd_loss_matches_monte_carlo(noise):
    """The derived L_N(η*) against online GD (online.py) on 400 000 sampled tasks: within 0.5%, with a standard
    error under 0.15%, so a formula 1% off fails. Each task's loss is its expectation over the query,
    ½ (‖W_N - W*‖² + τ²) (x_q ~ N(0, I) and ε_q independent of W_N), whose spread is far smaller than that of one
    query's loss, averaged over 5 outputs that share the inputs (5 single-output tasks, each one row of W*); the
    query losses themselves agree with it within four standard errors."""
    task = LinearRegressionTask(d=5, n_context=10, d_y=5, inputs=NormalInputs(), label_noise=noise)
    population = population_online_gd_of_task(replace(task, d_y=1))
    eta = population.eta
    expected, sampled = [], []
    for step in range(4):
        batch = task.sample(100_000, 11, step, Stream.TEST, dtype=torch.float64)
        W = online_gd_weights_per_token(batch.x_context, batch.y_context, eta)[-1]  # (B, d_y, d)
        expected.append(0.5 * ((W - batch.w).pow(2).sum((-1, -2)) / task.d_y + noise ** 2))
        sampled.append(0.5 * ((W @ batch.x_query[..., None])[..., 0] - batch.y_query).pow(2).mean(-1))
    expected, sampled = torch.cat(expected), torch.cat(sampled)
    mean, stderr = float(expected.mean()), float(expected.std() / math.sqrt(len(expected)))
    assert stderr < 0.0015 * population.loss
    assert abs(mean / population.loss - 1) < 0.005, (mean, population.loss)
    assert abs(float(sampled.mean()) - mean) < 4 * float(sampled.std() / math.sqrt(len(sampled)))


def test_population_online_gd_optimum():
    task = LinearRegressionTask(d=5, n_context=10, inputs=NormalInputs())
    population = population_online_gd_of_task(task)
    assert population.eta == pytest.approx(1 / 7)  # 1 / (σ² (d + 2)) for Gaussian inputs
    assert population.loss == pytest.approx(0.5 * 5 * (6 / 7) ** 10)
    noisy = population_online_gd_of_task(replace(task, label_noise=0.5))
    for eta in (noisy.eta * 0.98, noisy.eta * 1.02):
        assert noisy.loss_at(eta) > noisy.loss
    assert noisy.loss_per_position(noisy.eta)[0] == pytest.approx(0.5 * (5 + 0.25))  # ½ (E‖w‖² + τ²)


@pytest.mark.parametrize("inputs, noise", [(UniformInputs(), 0.0), (NormalInputs(), 0.5)])
@pytest.mark.slow
def test_population_nlms_loss_matches_monte_carlo(inputs, noise):
    """The derived normalised-LMS L_N(μ*) against the recurrence (online.py) on 400 000 sampled tasks, as the
    online-GD test above: within 0.5% at a standard error under 0.15%, so a formula 1% off fails. The uniform law
    checks E P = I/d beyond Gaussian inputs; the noisy Gaussian case checks the E[1/‖x‖²] term."""
    task = LinearRegressionTask(d=5, n_context=10, d_y=5, inputs=inputs, label_noise=noise)
    population = population_nlms_of_task(replace(task, d_y=1))
    mu, second = population.eta, population.moments.second
    expected = []
    for step in range(4):
        batch = task.sample(100_000, 12, step, Stream.TEST, dtype=torch.float64)
        W = normalised_lms_weights_per_token(batch.x_context, batch.y_context, mu)[-1]  # (B, d_y, d)
        expected.append(0.5 * (second * (W - batch.w).pow(2).sum((-1, -2)) / task.d_y + noise ** 2))
    expected = torch.cat(expected)
    mean, stderr = float(expected.mean()), float(expected.std() / math.sqrt(len(expected)))
    assert stderr < 0.0015 * population.loss
    assert abs(mean / population.loss - 1) < 0.005, (mean, population.loss)


def test_population_nlms_optimum_and_its_limits():
    from icl_gd.core.errors import ConfigError

    task = LinearRegressionTask(d=5, n_context=10, inputs=UniformInputs())
    population = population_nlms_of_task(task)
    assert population.eta == 1.0  # noiseless: μ* = 1 at every t
    assert population.loss == pytest.approx(0.5 * 5 * (1 / 12) * (4 / 5) ** 10)  # ½ d s² σ² (1 - 1/d)^N
    noisy = population_nlms_of_task(replace(task, inputs=NormalInputs(), label_noise=0.5))
    assert 0 < noisy.eta < 1
    for mu in (noisy.eta * 0.98, noisy.eta * 1.02):
        assert noisy.loss_at(mu) > noisy.loss
    with pytest.raises(ConfigError, match="needs Gaussian inputs"):
        population_nlms_of_task(replace(task, label_noise=0.5))
    with pytest.raises(ConfigError, match="d > 2"):
        population_nlms_of_task(replace(task, d=2, inputs=NormalInputs(), label_noise=0.5))


# ---------------------------------------------------------------------------------------------------- the layers
def _set_construction(model, eta_or_lam: float) -> None:
    with torch.no_grad():
        eye = torch.eye(5, dtype=torch.float64)
        model.W_Q.copy_(eye[:4])
        model.W_K.copy_(eye[:4])
        model.W_V.copy_(eye[4:])
        (model.log_lam if isinstance(model, LearnedMesa) else model.log_beta).fill_(math.log(eta_or_lam))


def test_learned_layers_at_the_construction_are_their_algorithms():
    batch, tokens = _tokens(64)
    delta = LearnedDeltaRule(5, 4, 1, seed=0).double()
    _set_construction(delta, 0.2)
    assert torch.allclose(delta(tokens), OnlineGDPredictor(LAYOUT, 0.2)(tokens), rtol=1e-12, atol=1e-14)
    nlms = LearnedDeltaRule(5, 4, 1, seed=0, normalise="pair").double()
    _set_construction(nlms, 0.6)
    assert torch.allclose(nlms(tokens), NormalisedLMSPredictor(LAYOUT, 0.6)(tokens), rtol=1e-12, atol=1e-14)
    mesa = LearnedMesa(5, 4, 1, seed=0).double()
    _set_construction(mesa, 0.3)
    assert torch.allclose(mesa(tokens), RidgePredictor(LAYOUT, 0.3)(tokens), rtol=1e-10, atol=1e-12)
    gated = LearnedGatedDeltaRule(5, 4, 1, seed=0, alpha=0.9).double()
    _set_construction(gated, 0.2)
    decay = float(gated.decay())  # sigmoid of the float32 logit of 0.9
    assert decay == pytest.approx(0.9)
    expected = predictions_per_token(online_gd_weights_per_token(batch.x_context, batch.y_context, 0.2, decay=decay),
                                     batch.x_query)[-1]
    assert torch.allclose(gated(tokens), expected, rtol=1e-12, atol=1e-14)


def test_learned_layers_train_every_parameter():
    _, tokens = _tokens(32)
    for model in (LearnedDeltaRule(5, 4, 1, seed=0), LearnedGatedDeltaRule(5, 4, 1, seed=0), LearnedMesa(5, 4, 1, 0)):
        model.double()(tokens).sum().backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters()), type(model).__name__


@pytest.mark.parametrize("kind", ["none", "pair", "gated", "mesa"])
def test_interpolation_keeps_the_trained_layer_at_zero_and_reaches_the_construction_at_one(kind):
    _, tokens = _tokens(64)
    if kind == "mesa":
        model, constructed = LearnedMesa(5, 4, 1, seed=2).double(), ridge_weights(4, 1, 0.4)
        at = lambda a: MesaLayer(interpolate_mesa(model.weights(), constructed, a))
        build = MesaLayer
    else:
        model = (LearnedGatedDeltaRule(5, 4, 1, seed=2) if kind == "gated" else
                 LearnedDeltaRule(5, 4, 1, seed=2, normalise=kind)).double()
        constructed = online_gd_weights(4, 1, 0.2, normalise="pair" if kind == "pair" else "none")
        at = lambda a: DeltaRuleLayer(interpolate_delta_rule(model.weights(), constructed, a))
        build = DeltaRuleLayer
    with torch.no_grad():
        assert torch.allclose(at(0.0)(tokens), model(tokens), rtol=1e-9, atol=1e-12)
        assert torch.allclose(at(1.0)(tokens), build(constructed)(tokens), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------------------------------- the docs
def test_the_docs_example_runs():
    code = re.search(r"<!-- online-layers-example -->\n```python\n(.*?)```", PAGE.read_text(), re.DOTALL).group(1)
    namespace: dict = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    frame = namespace["frame"]
    assert set(frame["model"]) == {"my learner", "online GD"}
    assert namespace["order"]["online GD"] > 0
