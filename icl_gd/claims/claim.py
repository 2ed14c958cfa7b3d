"""What a claim is: the runs it needs (``RunPlan``), its statistic, threshold and where that comes from, and the
declared tests of a failed seed (``TrainingCheck``) and of the authors' margin (``Margin``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from icl_gd.claims.estimates import SeedCost, seed_cost
from icl_gd.claims.evidence import SeedEvidence
from icl_gd.claims.figure import FigureReading
from icl_gd.core.errors import ConfigError

VERIFY_STUDY = "verify"  # the pseudo-study: every `icl-gd verify` identity, run in-process (seconds)


class Direction(str, Enum):
    BELOW = "<"  # the claim holds when the statistic is below the threshold
    ABOVE = ">"


@dataclass(frozen=True)
class RunPlan:
    """The runs one claim needs: ``seeds`` runs (seed 0, 1, ...) of ``study`` with ``preset`` and ``overrides``.

    At the smoke set-up (``--smoke``) the runs use ``quick_preset``, ``overrides + quick_overrides`` and
    ``quick_seeds`` seeds (``--quick`` runs the full budget of the cheap plans: ``icl_gd.claims.quick``). What
    a seed costs is kept as data under the plan's ``name`` (``icl_gd.claims.estimates``), for the printed plan only.
    """

    study: str
    preset: str = "default"
    overrides: tuple[str, ...] = ()
    seeds: int = 1
    quick_overrides: tuple[str, ...] = ()
    quick_seeds: int | None = None
    quick_preset: str | None = None  # None: the same preset under --smoke
    max_seeds: int | None = None  # None: ``seeds``; more seeds are run while a claim of the plan is unsettled
    # Why every seed is scored on the same test tasks ("": each seed draws its own, ``test_seed`` = 2023 + seed)
    shared_draw: str = ""
    # Why a seed needs no ``test_seed`` override: the study's seed draws every test task itself (or none is drawn,
    # the loss being exact). "": the study has a ``test_seed`` key, and seed S > 0 is scored on 2023 + S.
    seed_draws_all: str = ""

    def __post_init__(self) -> None:
        if self.seeds < 1 or self.seed_limit < self.seeds:
            raise ConfigError(f"plan {self.name}: seeds must be at least 1 and max_seeds at least seeds, got "
                              f"{self.seeds} and {self.max_seeds}")

    @property
    def seed_limit(self) -> int:
        """The most seeds a full-budget reproduction runs while a claim of this plan is unsettled."""
        return self.max_seeds if self.max_seeds is not None else self.seeds

    def seed_count(self, quick: bool) -> int:
        return (self.quick_seeds or self.seeds) if quick else self.seeds

    @property
    def draws_per_seed(self) -> bool:
        """Whether each seed is scored on test tasks of its own (an independent replicate of the test draw)."""
        return not self.shared_draw and not self.seed_draws_all and self.study != VERIFY_STUDY

    def run_overrides(self, quick: bool) -> tuple[str, ...]:
        return self.overrides + (self.quick_overrides if quick else ())

    def run_preset(self, quick: bool) -> str:
        return (self.quick_preset or self.preset) if quick else self.preset

    @property
    def quick_is_full(self) -> bool:
        return (self.run_preset(True), self.run_overrides(True), self.seed_count(True)) == \
            (self.run_preset(False), self.run_overrides(False), self.seed_count(False))

    @property
    def quick_data_sets(self) -> tuple[str, ...]:
        """The data sets ``--smoke`` substitutes for the full budget's (its ``dataset=`` overrides)."""
        return tuple(o.split("=", 1)[1] for o in self.quick_overrides if o.split("=", 1)[0].split(".")[-1] == "dataset")

    @property
    def name(self) -> str:
        """The plan as its kept estimates name it: study, preset and full-budget overrides."""
        return " ".join([self.study, self.preset, *self.overrides])

    @property
    def cost(self) -> SeedCost:
        return seed_cost(self.name)

    def estimate(self, quick: bool, seed: int = 0) -> float:
        """Seed ``seed``'s estimate in CPU seconds: the first seed's, a later one's, or --smoke's."""
        return self.cost.seconds(quick, seed)


class Form(str, Enum):
    """The form of a sentence, which decides its tolerance (``icl_gd.claims.registry.rules.TOLERANCES``: one rule
    per form, with its reason)."""

    MATCHES = "matches"  # "identical" / "matches" / "equal" in loss
    LOG_PANEL = "matches on a log panel"  # "performs equally" read on a log-scale panel, in decades
    ALIGNS = "aligns"  # "aligns" / "almost perfect alignment", read as a cosine
    NUMBER = "a number"  # a number the paper gives
    NOT = "is not"  # "is not able to match", "fails to align": the converse of a form above
    DIRECTION = "direction"  # "surpasses", "decreases", "aligns better": a sign, no size
    MAJORITY = "majority"  # "a majority", "far above chance": a share of queries or a multiple of chance
    READING = "a reading of ours"  # a size the paper does not give, read by a stated rule of its own
    IDENTITY = "identity"  # a construction's exact identity: round-off

    @property
    def group(self) -> str:
        """The headline's groups: sentences that claim an equality, a difference, a sign, or a stated reading."""
        return {Form.MATCHES: "matches or aligns", Form.LOG_PANEL: "matches or aligns", Form.ALIGNS:
                "matches or aligns", Form.NUMBER: "matches or aligns", Form.NOT: "is not",
                Form.DIRECTION: "direction", Form.MAJORITY: "a stated size", Form.READING: "a stated size",
                Form.IDENTITY: "identity"}[self]


# How demanding a form is: a sentence of several parts takes its most demanding part's form.
FORM_ORDER = (Form.MATCHES, Form.LOG_PANEL, Form.ALIGNS, Form.NUMBER, Form.READING, Form.NOT, Form.MAJORITY,
              Form.DIRECTION, Form.IDENTITY)


class Kind(str, Enum):
    PAPER = "paper"  # an empirical statement the paper makes (quoted)
    OURS = "ours"  # a check the paper does not make (our control or our extension of its statement)
    CONSTRUCTION = "construction"  # an identity of icl-gd's own code: a construction check, not a claim
    BEYOND = "beyond"  # beyond the two papers: a statement of later work (quoted from it, ``paper`` names it) or ours


@dataclass(frozen=True)
class Margin:
    """How far apart the two codes' means may be and still agree (``authors.agreement``), on the claim statistic's
    own scale (the log scale for a ratio), and where that number comes from."""

    value: float
    source: str


@dataclass(frozen=True)
class TrainingCheck:
    """A seed's training failed when a trained model's final test loss (any of ``losses``, metrics of plan 0) is not
    below ``fraction`` × the untrained model's (``untrained``: the zero predictor's loss, the plateau a model starts
    on): it never left the plateau, or it diverged. Such a seed is flagged, counted and left out of the verdict and
    of the comparison with the authors' code."""

    losses: tuple[str, ...]
    untrained: str = "loss_zero"
    fraction: float = 0.9
    source: str = ("ours: a seed whose final test loss is not at least 10% below the untrained model's (the zero "
                   "predictor's, the plateau training starts on) never left that plateau or diverged")

    def failed(self, losses: Sequence[float], untrained: float) -> str:
        """The reason one seed failed ("" when it trained), from its trained models' losses."""
        bound = self.fraction * untrained
        bad = [v for v in losses if not (math.isfinite(v) and v < bound)]
        if not bad:
            return ""
        return (f"final loss {', '.join(f'{v:.4g}' for v in bad)} not below {self.fraction:g} × the untrained "
                f"model's {untrained:.4g}")

    def __call__(self, evidence: SeedEvidence) -> str:
        return self.failed([evidence.value(k) for k in self.losses], evidence.value(self.untrained))


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One statement, as a check over the runs it needs.

    ``location`` is the place in the paper (arXiv 2212.07677v2 for von Oswald et al.), ``quote`` the paper's own
    words (short, verbatim; empty for ``Kind.OURS``), ``statement`` ours in one sentence. ``threshold_source`` says
    where the threshold comes from: a number the paper gives (with its location), the authors' code's value measured
    here, or a stated rule ("ours: ..."). ``follows`` says, where the paper's text and the authors' code differ,
    which one the claim's runs follow.

    ``variant_of`` names the claim whose sentence this one tests again another way (e.g. against a reference tuned
    otherwise): a variant is a sub-row of that claim, not counted on its own. ``parts`` names the claims that test
    the other conditions of this claim's sentence ("surpasses GD *but* matches GD++"): the sentence is counted once,
    holding when every part holds and failing when one fails; a part is a sub-row, never counted on its own.
    ``form`` is the sentence's form (from its rule), which decides its tolerance. ``share``: a claim about how often
    training finds something (a property of each run) judges the share of seeds that pass, which must exceed
    ``share``, instead of the mean. ``margin`` is the equivalence margin
    of the comparison with the authors' code; ``training`` the test of a failed seed; ``reference`` a callable on one
    seed's evidence returning why the claim's reference degenerated ("" when it is valid).

    What the statistic is (``measures``) is said by the statistic itself; whether a ``--smoke`` verdict stands
    (``settled_by_quick``) follows from the kind and the plans.
    """

    id: str
    paper: str
    location: str
    kind: Kind
    statement: str
    runs: tuple[RunPlan, ...]
    statistic: Callable[[SeedEvidence], float]
    threshold: float
    direction: Direction
    threshold_source: str
    quote: str = ""
    follows: str = ""
    figures: tuple[str, ...] = ()  # paths inside the first plan's first run directory, shown in the report
    variant_of: str = ""
    margin: Margin | None = None
    training: TrainingCheck | None = None
    reference: Callable[[SeedEvidence], str] | None = None
    form: Form = Form.READING
    parts: tuple[str, ...] = ()
    share: float | None = None
    figure: FigureReading | None = None  # how the sentence reads on its figure (docs/verdicts.md), None: no figure

    def __post_init__(self) -> None:
        if self.share is not None and not 0 < self.share < 1:
            raise ConfigError(f"claim {self.id}: share must lie in (0, 1), got {self.share}")
        if not self.runs:
            raise ConfigError(f"claim {self.id} needs at least one run")
        if not math.isfinite(self.threshold):
            raise ConfigError(f"claim {self.id}: threshold must be finite, got {self.threshold}")
        if not self.threshold_source.strip():
            raise ConfigError(f"claim {self.id}: say where the threshold comes from (threshold_source)")

    @property
    def author(self) -> str:
        """The first author's surname, as the tables name the paper ("von Oswald", "Irie", "Fu", "Ahn")."""
        return self.paper.split(",")[0].split(" et al")[0]

    @property
    def is_construction(self) -> bool:
        return self.kind is Kind.CONSTRUCTION

    @property
    def seed_limit(self) -> int:
        """The most seeds its runs reach while it is unsettled (its plans' smallest ``max_seeds``)."""
        return min(plan.seed_limit for plan in self.runs)

    @property
    def shared_draw(self) -> str:
        """Why its seeds share one test draw ("" when each seed draws its own, or no test draw is involved)."""
        return next((plan.shared_draw for plan in self.runs if plan.shared_draw), "")

    @property
    def measures(self) -> str:
        """What the statistic is, in its own words (e.g. "|L_trained - L_GD| / L_GD")."""
        return getattr(self.statistic, "measures", "") or getattr(self.statistic, "__name__", repr(self.statistic))

    @property
    def settled_by_quick(self) -> bool:
        """Whether a --smoke verdict stands: a construction check's (an identity holds at any budget), or a claim's
        whose every run plan's quick budget is its full one. Any other claim is reported inconclusive under --smoke,
        its measured value shown, never guessed: fewer steps or seeds cannot settle it."""
        return self.is_construction or all(plan.quick_is_full for plan in self.runs)

    def passes(self, value: float) -> bool:
        return value < self.threshold if self.direction is Direction.BELOW else value > self.threshold

    @property
    def log_scale(self) -> bool:
        """Whether seeds are summarised on the log scale (the statistic says so; plain functions do not)."""
        return bool(getattr(self.statistic, "log_scale", False))
