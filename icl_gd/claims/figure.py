"""A sentence read as its figure shows it, and at the measurement's precision (docs/verdicts.md, "Two readings of a
sentence").

*As the figure shows it*: two curves differ when they lie more than ``FIGURE_FRACTION`` of the plotted axis apart,
on the axis's own scale (``Axis.resolution``). A figure statistic is the difference in units of that resolution:
below 1 the figure shows no difference, above 1 it shows one. *At the measurement's precision*: the signed
difference the sentence is about, per seed (``signed``), both predictors scored on the same test tasks of a seed.

The axes are data with their sources: the paper's figure where its axis has been read, otherwise the range the
authors' own plotting code sets for that panel (their notebooks' ``y_lim`` arguments, google-research/
self-organising-systems, ``transformers_learn_icl_by_gd/*.ipynb``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from icl_gd.claims.evidence import SeedEvidence
from icl_gd.claims.statistics import metric, ood_points
from icl_gd.core.metric_name import symbol_of

FIGURE_FRACTION = 1 / 20  # of a panel's height: the smallest gap at which two of its curves separate
LOG_PANEL_DECADES = 2.0  # the narrowest log-scale out-of-distribution panel: 1/20 of it is 0.1 decade


class Scale(str, Enum):
    LINEAR = "linear"  # a loss axis, in loss units
    LOG = "log"  # a loss axis in decades
    COSINE = "cosine"  # a cosine axis; its ideal is 1


@dataclass(frozen=True)
class Axis:
    """The axis a quoted figure plots the sentence's quantity on: ``low``..``high`` (a log axis: its decades as
    ``high - low``), and where that range was read (``source``)."""

    figure: str
    scale: Scale
    low: float
    high: float
    source: str

    @property
    def span(self) -> float:
        return self.high - self.low

    @property
    def resolution(self) -> float:
        """The smallest difference the figure shows: 1/20 of the axis (loss units, decades, or cosine)."""
        return FIGURE_FRACTION * self.span

    def text(self) -> str:
        unit = {Scale.LINEAR: "", Scale.LOG: " decades", Scale.COSINE: ""}[self.scale]
        what = (f"{self.span:g} decades (log scale)" if self.scale is Scale.LOG
                else f"{self.low:g}-{self.high:g} ({self.scale.value})")
        return (f"{self.figure}: axis {what}, so a difference under {self.resolution:.3g}{unit} is not shown "
                f"({self.source})")


@dataclass(frozen=True)
class LossOnAxis:
    """|L_model - L_ref| in units of the axis's resolution (``signed``: L_model - L_ref, positive when the model is
    worse), from plan ``plan``'s metrics."""

    model: str
    reference: str
    axis: Axis
    signed: bool = False
    plan: int = 0

    @property
    def measures(self) -> str:
        a, b = symbol_of(self.model), symbol_of(self.reference)
        gap = f"({a} - {b})" if self.signed else f"|{a} - {b}|"
        return f"{gap} / {self.axis.resolution:.3g} ({self.axis.figure}'s resolution)"

    def __call__(self, evidence: SeedEvidence) -> float:
        gap = evidence.value(self.model, self.plan) - evidence.value(self.reference, self.plan)
        return (gap if self.signed else abs(gap)) / self.axis.resolution


@dataclass(frozen=True)
class CosineOnAxis:
    """1 - cos in units of the cosine axis's resolution (below 1: drawn touching the top, aligned)."""

    key: str
    axis: Axis
    plan: int = 0

    @property
    def measures(self) -> str:
        return f"(1 - {symbol_of(self.key)}) / {self.axis.resolution:.3g} ({self.axis.figure}'s resolution)"

    def __call__(self, evidence: SeedEvidence) -> float:
        return (1 - evidence.value(self.key, self.plan)) / self.axis.resolution


@dataclass(frozen=True)
class OodOnLogAxis:
    """The largest |log10(L_trained / L_ref)| over the points of ``sweeps`` (``ood.csv``), in units of the log
    axis's resolution; ``signed`` gives the signed relative gap (L_trained - L_ref) / L_ref at that worst point."""

    reference: str
    sweeps: tuple[str, ...]
    axis: Axis
    signed: bool = False
    plan: int = 0

    @property
    def measures(self) -> str:
        sweeps = " and ".join(s.replace("_", " ") for s in self.sweeps)
        if self.signed:
            return f"(L_trained - L_ref) / L_ref at the point of the {sweeps} sweep where they lie furthest apart"
        return f"largest |log10(L_trained / L_ref)| over the {sweeps} sweep / {self.axis.resolution:g} decade"

    def __call__(self, evidence: SeedEvidence) -> float:
        points = ood_points(evidence, self.reference, self.sweeps, self.plan)
        trained, reference = max(points, key=lambda tr: abs(math.log10(tr[0] / tr[1])))
        if self.signed:
            return (trained - reference) / reference
        return abs(math.log10(trained / reference)) / self.axis.resolution


@dataclass(frozen=True)
class FigureReading:
    """How a sentence is read on its figure: ``statistic`` in units of the axis's resolution, judged against 1 (below
    it: the figure shows no difference; ``shows_difference``: the sentence says it shows one), and ``signed``, the signed
    difference the sentence is about (the model's loss minus the reference's over the reference's; a cosine for an
    alignment sentence), whose interval is the reading at the measurement's precision and whose sign says the side.
    ``better_below``: a negative signed value means the model does better (a loss); False for a cosine."""

    axis: Axis
    statistic: Callable[[SeedEvidence], float]
    signed: Callable[[SeedEvidence], float]
    shows_difference: bool = False
    better_below: bool = True

    @property
    def threshold(self) -> float:
        return 1.0

    @property
    def equality(self) -> bool:
        """Whether the sentence states an equality of losses, so that a difference at the measurement's precision is
        a finding (an alignment sentence states a similarity: its cosine is never exactly 1)."""
        return self.better_below

    def side(self, signed_mean: float) -> str:
        """Which side of the sentence the model lies on, by the signed mean."""
        if not self.better_below:
            return ("more aligned than the sentence says" if self.shows_difference else
                    "less aligned than the sentence says")
        if signed_mean < 0:
            return "model better: its loss below the reference's"
        return "model worse: its loss above the reference's"


# ---------------------------------------------------------------------------------------------------- the axes
_NOTEBOOK = "the authors' plotting code ({notebook}.ipynb, {cell}: y_lim {low:g}-{high:g})"


def _from_code(figure: str, scale: Scale, low: float, high: float, notebook: str, cell: str) -> Axis:
    return Axis(figure, scale, low, high, _NOTEBOOK.format(notebook=notebook, cell=cell, low=low, high=high))


_LOSS_CELL = "'Visualize loss and alignment measures'"
ONE_LAYER_LOSS = _from_code("Fig. 2 (outer left)", Scale.LINEAR, 0.2, 0.4, "constructed_token_setup",
                            _LOSS_CELL + ", one layer")
ONE_LAYER_COSINE = Axis("Fig. 2 (center left)", Scale.COSINE, 0.8, 1.0, "the paper's Fig. 2 as read: its cosine "
                                                                        "axis spans 0.80-1.00")
FIXED_TASKS_COSINE = _from_code("Fig. 16", Scale.COSINE, 0.0, 1.19, "constructed_token_setup",
                                _LOSS_CELL + ", one layer's cosine axis")
ROLLOUT_LOSS = Axis("Fig. 1 (right); Fig. 10", Scale.LINEAR, 0.0, 0.2, "the paper's Fig. 1 (right) as read: loss on "
                                                                      "0-0.2 (their code draws it on 0-0.27)")
DEEP_LOSS = _from_code("Fig. 3 (far left)", Scale.LINEAR, 0.0, 0.3, "constructed_token_setup",
                       _LOSS_CELL + ", K > 1 layers")
DEEP_COSINE_GDPP = _from_code("Fig. 3 (center right)", Scale.COSINE, 0.5, 1.06, "constructed_token_setup",
                              _LOSS_CELL + ", 'GD++ vs trained TF'")
DEEP_COSINE_GDPP_FIG7 = _from_code("Fig. 7", Scale.COSINE, 0.5, 1.06, "constructed_token_setup",
                                   _LOSS_CELL + ", 'GD++ vs trained TF'")
OOD_LOG = Axis("the out-of-distribution panels (Fig. 2, 3, 6)", Scale.LOG, 0.0, LOG_PANEL_DECADES,
               "the paper's log-scale panels as read: 2 to 5 decades; the narrowest, 2 decades, gives 0.1 decade")
SINE_LOSS = Axis("Fig. 4 (center)", Scale.LINEAR, 0.0, 0.006, "the paper's Fig. 4 (center) as read: loss on 0-0.006 "
                                                              "(their code draws it on 0-0.01)")
SINE_COSINE = Axis("Fig. 4 (right)", Scale.COSINE, 0.5, 1.0, "the paper's Fig. 4 (right) as read: 0.5-1.0")
SEPARATE_LOSS = _from_code("Fig. 5 (left)", Scale.LINEAR, 0.2, 0.55, "normal_token_construct", "'Visualize Loss'")
LAYERNORM_1_LOSS = _from_code("Fig. 14(a)", Scale.LINEAR, 0.2, 0.4, "constructed_token_setup",
                              _LOSS_CELL + ", one layer")
LAYERNORM_2_LOSS = _from_code("Fig. 14(b)", Scale.LINEAR, 0.0, 0.3, "constructed_token_setup",
                              _LOSS_CELL + ", K > 1 layers")
SOFTMAX_LOSS = _from_code("Fig. 12(a)", Scale.LINEAR, 0.2, 0.4, "constructed_token_setup", _LOSS_CELL + ", one layer")


# ---------------------------------------------------------------------------------------------------- declaring
def loss_matches(model: str, reference: str, axis: Axis, signed: Callable[[SeedEvidence], float]) -> FigureReading:
    """'identical' / 'matches' in loss: the figure shows no gap between the two curves."""
    return FigureReading(axis, LossOnAxis(model, reference, axis), signed)


def loss_worse(model: str, reference: str, axis: Axis, signed: Callable[[SeedEvidence], float]) -> FigureReading:
    """'is not able to match' / 'not two steps' (the model worse): the figure shows the model's curve above."""
    return FigureReading(axis, LossOnAxis(model, reference, axis, signed=True), signed, shows_difference=True)


def aligned(key: str, axis: Axis) -> FigureReading:
    """'aligns' / 'almost perfect alignment': the cosine drawn touching the top of its axis."""
    return FigureReading(axis, CosineOnAxis(key, axis), metric(key), better_below=False)


def not_aligned(key: str, axis: Axis) -> FigureReading:
    """'fail to align': the cosine drawn visibly below the top of its axis."""
    return FigureReading(axis, CosineOnAxis(key, axis), metric(key), shows_difference=True, better_below=False)


def ood_matches(reference: str, sweeps: tuple[str, ...]) -> FigureReading:
    """'performs equally' / 'mimics' on the log-scale out-of-distribution panels, at every point of ``sweeps``."""
    return FigureReading(OOD_LOG, OodOnLogAxis(reference, sweeps, OOD_LOG),
                         OodOnLogAxis(reference, sweeps, OOD_LOG, signed=True))


def rollout_matches(damping: float, reference: str, axis: Axis = ROLLOUT_LOSS) -> FigureReading:
    """'an identical loss decrease' of the damped roll-out: at no application do the curves lie apart on the
    figure (each seed's value the median over its independent test draws, as the claim's own statistic)."""
    from icl_gd.claims.statistics import OverDraws, RolloutGap

    return FigureReading(axis, OverDraws(RolloutGap(damping, reference, resolution=axis.resolution)),
                         OverDraws(RolloutGap(damping, reference, signed=True)))
