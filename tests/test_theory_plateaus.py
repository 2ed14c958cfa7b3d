"""The plateaus of in-context principal-component regression (``icl_gd.regression.theory.plateaus`` and
``heads``): the closed-form levels and the checks of ``icl-gd verify`` (``constructions/theory_plateaus.py``)
failing when a term is dropped, the plateau rule on curves whose plateaus are known, the two layers trained on a law
whose plateaus are well apart, the `plateaus` study at its tiny budget and the docs page's example."""

from __future__ import annotations

import math
import re
import runpy
from pathlib import Path

import pytest
import torch

from icl_gd.constructions import theory_plateaus as checks
from icl_gd.constructions.verify import all_checks
from icl_gd.core.errors import ConfigError
from icl_gd.regression import metric_names as names
from icl_gd.regression.metrics import query_loss
from icl_gd.regression.theory.heads import (EmpiricalLoss, LossCurve, PlateauConfig, PlateauRule, detect_plateaus,
                                            every_level, increasing, make_heads, pcr_heads, single_drop, train_heads)
from icl_gd.regression.theory.plateaus import (gamma_eigenvalues, linear_spectrum_covariance, pcr_preconditioner,
                                               plateau_levels, principal_components)

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64


# ------------------------------------------------------------------------------------------- the closed forms
def _levels_without_one_over_n(covariance, n_context, label_noise=0.0):
    """L_m with γ_k = 1 / (λ_k + (tr Λ + τ²)/N): the fourth moment's (1 + 1/N) read as 1."""
    values, _ = principal_components(covariance)
    gains = values ** 2 / (values + (values.sum() + label_noise ** 2) / n_context)
    return 0.5 * (values.sum() + label_noise ** 2 - torch.cat([gains.new_zeros(1), gains.cumsum(0)]))


def _levels_without_half(covariance, n_context, label_noise=0.0):
    """2 L_m: the paper's loss without the project's ½."""
    return 2 * plateau_levels(covariance, n_context, label_noise)


def _heads_with_square_roots(covariance, n_context, m, n_heads, label_noise=0.0):
    """M_m with v_h = γ_h^{1/2}: a head's product v_h³ is then γ_h^{3/2}, not γ_h."""
    weights = pcr_heads(covariance, n_context, m, n_heads, label_noise)
    values, _ = principal_components(covariance)
    scale = torch.ones(n_heads, dtype=F64)
    scale[:m] = gamma_eigenvalues(values, n_context, label_noise)[:m] ** (1 / 2 - 1 / 3)
    return type(weights)(weights.value * scale, weights.key * scale[:, None], weights.query * scale[:, None])


def test_the_levels_descend_from_half_the_variance_to_the_risk_of_gamma_star():
    covariance = linear_spectrum_covariance(5, seed=3)
    levels = plateau_levels(covariance, 20, label_noise=0.5)
    assert levels[0] == pytest.approx(0.5 * (1 + 0.25), rel=1e-12)
    assert bool((levels[1:] < levels[:-1]).all())
    assert torch.allclose(pcr_preconditioner(covariance, 20, 0, 0.5), torch.zeros(5, 5, dtype=F64))


def test_the_law_has_eigenvalues_one_to_d_over_their_sum_in_a_seeded_basis():
    a, b = linear_spectrum_covariance(4, seed=1), linear_spectrum_covariance(4, seed=2)
    for covariance in (a, b):
        values, _ = principal_components(covariance)
        assert torch.allclose(values, torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=F64) / 10, atol=1e-14)
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("bad", [dict(m=6), dict(m=-1), dict(m=True)])
def test_a_rank_outside_zero_to_d_raises(bad):
    with pytest.raises(ConfigError, match="m must be"):
        pcr_preconditioner(linear_spectrum_covariance(5), 20, **bad)


# ------------------------------------------------------------------------------------------------ icl-gd verify
def test_the_checks_are_registered_and_the_exact_ones_hold_at_rounding():
    names_ = [c.name for c in all_checks()]
    assert all(c.name in names_ for c in checks.IDENTITY_CHECKS)
    for check in checks.IDENTITY_CHECKS:
        if "Monte Carlo" in check.name or "every eigenvector subset" in check.name:
            continue  # the subsets: the same minimum as the first check, 56 times; Monte Carlo below, smaller
        result = check.run()
        assert result.passed, (check.name, result)


@pytest.mark.parametrize("m", [0, 2, 4])
def test_the_monte_carlo_checks_pass_on_fewer_tasks(m):
    """At 20 000 tasks 4 standard errors are about 4 to 7% of L_m: the fixed 3% gives way to 10%."""
    result = checks.check_monte_carlo(m, n_tasks=20_000, tolerance=0.1)
    assert result.passed and result.tolerance < 0.1, result


@pytest.mark.parametrize("slip", [_levels_without_one_over_n, _levels_without_half])
def test_the_level_checks_fail_when_a_term_is_dropped(slip):
    assert not checks.check_levels_are_restricted_minima(levels=slip).passed
    assert not checks.check_authors_values(levels=slip).passed
    assert not checks.check_monte_carlo(2, levels=slip).passed  # 100 000 tasks: 4 standard errors are 2.7%


def test_the_fixed_point_checks_fail_for_heads_off_the_fixed_point():
    assert not checks.check_pcr_heads_predict(n_tasks=200, heads=_heads_with_square_roots).passed
    assert not checks.check_pcr_heads_are_fixed_points(heads=_heads_with_square_roots).passed


def test_the_training_loss_is_its_quadratic_form_and_not_without_its_constant():
    config = PlateauConfig(d=3, n_context=7, separate_heads=3, train_tasks=500)
    tokens, targets = config.task().train_batch(500, 0, 0, torch.device("cpu"), F64)
    for layer in ("merged", "separate"):
        model = make_heads(config, layer, 1).double()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.mul_(100)
        empirical = EmpiricalLoss.of(*model.statistics(tokens), targets)
        with torch.no_grad():
            exact = float(query_loss(model(tokens), targets))
            assert float(empirical.value(model.gamma())) == pytest.approx(exact, rel=1e-12)
            slipped = EmpiricalLoss(empirical.second, empirical.first, torch.zeros((), dtype=F64))
            assert abs(float(slipped.value(model.gamma())) / exact - 1) > 0.1


# ------------------------------------------------------------------------------------------------ the rule
LEVELS = [0.5, 0.3, 0.2, 0.1]


def _staircase(drops: list[int], levels: list[float] = LEVELS, end: int = 4000, every: int = 10) -> LossCurve:
    """A loss resting on ``levels`` and dropping by a smooth step (width 20 steps) at each of ``drops``."""
    steps = list(range(0, end + 1, every))
    loss = []
    for s in steps:
        value = levels[0]
        for drop, (high, low) in zip(drops, zip(levels, levels[1:])):
            value -= (high - low) / (1 + math.exp(-(s - drop) / 5))
        loss.append(value)
    return LossCurve(tuple(steps), tuple(loss))


def test_the_rule_finds_a_staircase_in_order_at_its_levels():
    found = detect_plateaus(_staircase([200, 500, 1200]), LEVELS)
    assert [p.m for p in found] == [0, 1, 2, 3]
    assert every_level(found, 3) and increasing(found) and not single_drop(found, 3)
    assert max(abs(p.relative_error) for p in found) < 1e-3
    assert [p.start for p in found][:2] == [0, 220]


def test_a_short_step_is_not_a_plateau_and_one_drop_is_two_plateaus():
    """The middle level held 30 steps of 1000: under ``min_share`` of the steps up to its end."""
    found = detect_plateaus(_staircase([1000, 1030, 2000]), LEVELS)
    assert [p.m for p in found] == [0, 2, 3]
    assert increasing(found) and not every_level(found, 3)
    one_drop = detect_plateaus(_staircase([1000], [0.5, 0.1]), LEVELS)
    assert single_drop(one_drop, 3)


def test_a_slow_descent_is_no_plateau_and_a_level_between_is_read_as_none():
    steps = tuple(range(0, 4001, 10))
    descent = LossCurve(steps, tuple(0.5 * math.exp(-s / 800) + 0.1 for s in steps))
    assert detect_plateaus(descent, LEVELS) == ()  # never flat within 2% over a fifth of the steps so far
    between = detect_plateaus(_staircase([300, 900], [0.5, 0.25, 0.1]), LEVELS)
    assert [p.m for p in between] == [0, None, 3] and not increasing(between)
    assert between[1].nearest in (1, 2)


def test_noise_within_the_spread_does_not_split_a_plateau():
    curve = _staircase([300])
    gen = torch.Generator().manual_seed(0)
    noisy = LossCurve(curve.steps, tuple(v * (1 + 0.005 * float(torch.randn(1, generator=gen)))
                                         for v in curve.loss))
    assert [p.m for p in detect_plateaus(noisy, LEVELS)] == [0, 1]


@pytest.mark.parametrize("curve, message", [
    (LossCurve((0,), (0.5,)), "at least two"), (LossCurve((0, 10), (0.5, -0.1)), "positive"),
    (LossCurve((0, 10, 10), (0.5, 0.4, 0.3)), "increasing")])
def test_bad_curves_raise(curve, message):
    with pytest.raises(ConfigError, match=message):
        detect_plateaus(curve, LEVELS)


@pytest.mark.parametrize("bad", [dict(spread=0.0), dict(min_share=1.0), dict(min_points=0), dict(drift=-0.1),
                                 dict(match=float("nan"))])
def test_bad_rules_raise(bad):
    with pytest.raises(ConfigError, match=next(iter(bad))):
        PlateauRule(**bad)


@pytest.mark.parametrize("bad, message", [(dict(separate_heads=4), "separate_heads"),
                                          (dict(eval_every=20_000), "eval_every"), (dict(merged_lr=0.0), "merged_lr"),
                                          (dict(d=0), "d")])
def test_bad_configs_raise(bad, message):
    with pytest.raises(ConfigError, match=message):
        PlateauConfig(**bad)


# ------------------------------------------------------------------------------------------------ the training
def test_separate_heads_learn_one_component_at_a_time_and_merged_heads_drop_once():
    """d = 2 (eigenvalues 2/3 and 1/3: escapes about four times apart): the separate layer rests at L_0, L_1 and L_2
    in order, the merged layer at L_0 and L_2 only; both end within 2% of R(Γ*) (4000 training tasks)."""
    config = PlateauConfig(d=2, n_context=10, separate_heads=2, merged_heads=2, steps=2000, train_tasks=4000,
                           n_test=512, separate_lr=1.0, merged_lr=0.1)  # λ_1 = 2/3: the default rates oscillate
    separate, merged = train_heads(config, "separate", 0), train_heads(config, "merged", 0)
    assert [p.m for p in separate.plateaus] == [0, 1, 2], separate.plateaus
    assert single_drop(merged.plateaus, 2), merged.plateaus
    levels = config.levels()
    for run in (separate, merged):
        assert run.curve.loss[-1] == pytest.approx(float(levels[-1]), rel=0.02)
        assert max(abs(p.relative_error) for p in run.plateaus) < 0.02


# ------------------------------------------------------------------------------------------------ the study
def test_the_study_writes_every_metric_its_claims_read(tmp_path):
    from icl_gd.claims.registry.beyond_plateaus import BEYOND_PLATEAU_CLAIMS, PLATEAUS
    from icl_gd.studies import get_study, run

    study = get_study("plateaus")
    run("plateaus", tmp_path / "run", overrides=list(study.tiny), progress=False)
    written = (tmp_path / "run" / "metrics.json").read_text()
    for layer in ("merged", "separate"):
        for name in (names.plateau_count(layer), names.plateau_worst_error(layer), names.plateaus_increasing(layer),
                     names.plateaus_every_level(layer), names.plateaus_single_drop(layer), names.final_risk(layer),
                     names.loss(layer)):
            assert f'"{name}"' in written
    assert '"risk_gamma_star"' in written
    for file in ("curves.csv", "plateaus.csv", "levels.csv", "figures/plateaus.png"):
        assert (tmp_path / "run" / file).is_file()
    assert all(claim.runs == (PLATEAUS,) for claim in BEYOND_PLATEAU_CLAIMS)
    assert study.config("full").d == 4 and study.config("full").n_context == 31


# ---------------------------------------------------------------------------------------------------- the docs
def test_the_docs_page_example_runs(capsys, tmp_path):
    page = (ROOT / "docs" / "theory-plateaus.md").read_text()
    code = re.search(r"<!-- plateaus-example -->\n```python\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "example.py").write_text(code)
    runpy.run_path(str(tmp_path / "example.py"))
    shown = re.search(r"<!-- plateaus-example-output -->\n```\n(.*?)```", page, re.DOTALL).group(1)
    assert capsys.readouterr().out == shown
    assert "2 L_m = 1.00000000, 0.64057971, 0.37737216, 0.20980460, 0.13599507" in shown  # the authors' print


def test_the_docs_page_quotes_the_verify_lines_of_these_checks():
    page = (ROOT / "docs" / "theory-plateaus.md").read_text()
    block = re.search(r"<!-- plateaus-verify -->\n```\n(.*?)```", page, re.DOTALL).group(1)
    quoted = re.findall(r"^(?:ok  |FAIL) \[\s*\d+/\d+\] (.+?)\s+max abs", block, re.MULTILINE)
    assert quoted == [c.name for c in checks.IDENTITY_CHECKS]
    levels = plateau_levels(linear_spectrum_covariance(4, checks.SEED), 31)
    for m, level in enumerate(levels.tolist()):
        assert f"L_{m} {level:.5f}" in block
