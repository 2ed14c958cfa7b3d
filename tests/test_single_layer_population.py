"""The `single-layer` study's exact one-step GD reference: η* and E L(η*) in closed form
(``icl_gd.regression.population.one_step``) written beside the sampled tuned GD, and drawn in its loss figure."""

from dataclasses import dataclass, replace

import pytest

from icl_gd.core.config import apply_overrides
from icl_gd.core.errors import ICLGDNotice
from icl_gd.regression import metric_names as names
from icl_gd.regression.config import RegressionTaskConfig
from icl_gd.regression.figures import loss_curves_figure
from icl_gd.regression.population.one_step import population_one_step_gd_of_task
from icl_gd.regression.study import relative_gap
from icl_gd.regression.tasks import LinearRegressionTask, NormalInputs
from icl_gd.studies import REGISTRY, run
from icl_gd.studies.single_layer import POPULATION_LABEL, SingleLayerConfig, population_gd, population_gd_metrics

LOSS, ETA, GAP = names.loss("gd_population"), names.eta("gd_population"), names.rel_gap("gd", "gd_population")
TINY = list(REGISTRY.get("single-layer").tiny)


def _uniform_closed_form(d: int, n: int, r: float) -> tuple[float, float]:
    """(η*, E L(η*)) of one GD step for x ~ U(-r/2, r/2)^d, N = n, d_y = 1, W ~ N(0, I), no noise, written out by
    hand (docs/population-gd.md, "The two laws"): a second route to the library's general moment formula."""
    eta = 12 * n / (r ** 2 * (n + d - 1 / 5))
    loss = (r ** 2 / 24) * d * (d - 1 / 5) / (n + d - 1 / 5)
    return eta, loss


@pytest.mark.slow
def test_tiny_run_writes_the_closed_form_beside_tuned_gd(tmp_path):
    """At the study's tiny budget each seed's metrics hold η*, E L(η*) of the run's own task and tuned GD's gap to
    E L(η*); the figure with the dashed line is drawn. Fails if a metric is missing, comes from another task (the
    default instead of the run's) or the gap is taken the wrong way round."""
    done = run("single-layer", tmp_path / "run", overrides=TINY, seeds=2, threads=1)
    task = RegressionTaskConfig(**done.config["config"]["task"])
    reference = population_one_step_gd_of_task(task)
    eta, loss = _uniform_closed_form(task.d, task.n_context, task.input_range)
    assert (task.weight_scale, task.label_noise) == (1.0, 0.0)  # the hand formula's assumptions
    assert reference.eta == pytest.approx(eta, rel=1e-12) and reference.loss == pytest.approx(loss, rel=1e-12)
    assert len(done.metrics["seeds"]) == 2
    for metrics in done.metrics["seeds"].values():
        assert metrics[LOSS] == reference.loss and metrics[ETA] == reference.eta
        assert metrics[GAP] == relative_gap(metrics[names.loss("gd")], reference.loss)
        assert metrics[ETA] != metrics["lr_gd"]  # the sampled η is an estimate of η*, not η* itself
    assert "loss_curves" in done.figures


@pytest.mark.slow
def test_a_run_the_closed_form_does_not_cover_finishes_without_it(tmp_path):
    """Two layers compare two GD steps, which the one-step formula does not cover: no metric, a notice, and the
    run (figures included) still finishes."""
    with pytest.warns(ICLGDNotice, match="population one-step GD reference"):
        done = run("single-layer", tmp_path / "run", overrides=TINY + ["layers=2"], seeds=1, threads=1)
    for metrics in (done.mean, *done.metrics["seeds"].values()):
        assert not {LOSS, ETA, GAP} & set(metrics)
        assert names.loss("gd") in metrics
    assert "loss_curves" in done.figures


@pytest.mark.parametrize("d,n,r", [(10, 10, 1.0), (5, 20, 2.0), (3, 7, 0.5)])
def test_population_metrics_follow_the_config(d, n, r):
    config = apply_overrides(SingleLayerConfig(), [f"d={d}", f"n_context={n}", f"input_range={r}"])
    metrics = population_gd_metrics(population_gd(config.task, config.model.layers), loss_gd=0.3)
    eta, loss = _uniform_closed_form(d, n, r)
    assert metrics[ETA] == pytest.approx(eta, rel=1e-12) and metrics[LOSS] == pytest.approx(loss, rel=1e-12)
    assert metrics[GAP] == pytest.approx(0.3 / loss - 1, rel=1e-12)


@dataclass(frozen=True)
class _CorrelatedInputsTask(RegressionTaskConfig):
    """Gaussian inputs with a covariance: a law the closed form has no form for."""

    def build(self) -> LinearRegressionTask:
        covariance = tuple(tuple(1.0 if i == j else 0.5 for j in range(self.d)) for i in range(self.d))
        return LinearRegressionTask(d=self.d, n_context=self.n_context, inputs=NormalInputs(covariance=covariance))


def test_an_uncovered_task_law_gives_no_reference_and_a_notice():
    config = replace(SingleLayerConfig(), task=_CorrelatedInputsTask())
    with pytest.warns(ICLGDNotice, match="covers uniform and isotropic Gaussian inputs"):
        assert population_gd(config.task, config.model.layers) is None
    assert population_gd_metrics(None, loss_gd=0.3) == {}


def test_loss_figure_draws_the_exact_reference_dashed_on_both_panels():
    rows = [{"step": s, "seed": 0, "model": m, "metric": "loss", "value": v}
            for s in (0, 10) for m, v in (("trained", 0.5 if s == 0 else 0.22), ("gd", 0.21))]
    fig = loss_curves_figure(rows, {"zero predictor": 0.4}, gap_to="gd", exact={POPULATION_LABEL: 0.2})
    loss_panel, gap_panel = fig.axes[:2]
    for ax, value in ((loss_panel, 0.2), (gap_panel, (0.2 - 0.21) / 0.21)):
        (line,) = [line for line in ax.get_lines() if line.get_label() == POPULATION_LABEL]
        assert line.get_linestyle() == "--" and line.get_ydata()[0] == pytest.approx(value, rel=1e-12)
        assert POPULATION_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
