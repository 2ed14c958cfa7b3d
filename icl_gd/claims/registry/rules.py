"""Stated threshold rules of ours, used where a paper gives no number (the same words get the same rule), the
equivalence margins of the comparison with the authors' code, the tests of a failed seed and of a degenerate
reference, and ``claims_of``: a registry file's declaration of its claims with the keywords they share."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icl_gd.claims.claim import Claim, Direction, Margin, TrainingCheck
from icl_gd.claims.statistics import GdppReference
from icl_gd.regression import metric_names as names

# ---------------------------------------------------------------------------------------------------- rules
# Where the paper gives no number, a threshold is one of these stated rules of ours (the same words get the same rule).
RULES = {
    "match": "ours: 'identical' / 'matches' in loss read as a relative gap under 2% (the paper gives no tolerance)",
    "not-match": "ours: 'not able to match' read as a relative gap above 2% (the converse of the 'matches' rule)",
    "align": "ours: 'almost perfect' / 'strong' / 'very well' alignment read as a mean sensitivity cosine above "
             "0.99 (the paper gives no number; Fig. 2 center left's axis spans 0.80-1.00)",
    "ood": "ours: 'performs equally' on the paper's log-scale OOD panels read as a relative gap under 5% "
           "(0.02 decade) at every sweep point (the paper gives no tolerance)",
    "identity": "ours: an exact identity, checked in float64; each identity's tolerance is round-off",
}

RULES["table1-majority"] = (
    "ours: a majority of the correctly classified queries in every layer (chance is 1 in the head's classes); their "
    "script prints this share, but their repository holds no value of it")
RULES["table1-direction"] = (
    "ours: a direction only, so 0; their script prints both shares (Output and Target rows), their repository holds "
    "no value, and no text of the paper is stored here to say how they read it")


def direction_only(words: str) -> str:
    """The threshold 0 of a sentence that states a direction only: a reading of ours, naming the words it reads."""
    return f"ours: {words} read as a direction only, so 0 (the paper gives no size)"


# ---------------------------------------------------------------------------------------------------- margins
# Two codes agree when the 95% interval of the difference of their means contains 0, or lies within ± the claim's
# margin: a quarter of the claim's own tolerance, fixed before comparing, so a difference inside it moves a value by
# at most a quarter of the distance the claim allows.
def quarter_of(tolerance: float, what: str) -> Margin:
    return Margin(tolerance / 4, f"ours: a quarter of {what}")


LOSS_MARGIN = quarter_of(0.02, "the 'matches' rule's 2% (a relative loss gap)")
COSINE_MARGIN = quarter_of(0.01, "the alignment rule's tolerance, 1 - 0.99 (a cosine)")
OOD_MARGIN = quarter_of(0.05, "the OOD rule's 5% (a relative loss gap)")
# Irie et al.'s vote shares have no tolerance (a majority, a direction): two codes agree within 10 of the 500 test
# queries of a task that both score; the forgetting rule's 5 accuracy points give its quarter.
SHARE_MARGIN = Margin(0.02, "ours: 10 of the 500 test queries per task a vote share is measured on")
FORGETTING_MARGIN = quarter_of(0.05, "the forgetting rule's 5 accuracy points")

# ---------------------------------------------------------------------------------------------------- the tests
TRAINED = TrainingCheck((names.loss("trained"),), untrained=names.loss("zero"))
TRAINED_HEADS = TrainingCheck(tuple(names.with_heads(names.loss("trained"), h) for h in (1, 2)),
                              untrained=names.loss("zero"))
# GD++ as a reference: not GD itself, and (where the run also tunes GD++ the authors' way) not more than the
# 'matches' rule's 2% above that tuning's loss on the same test tasks.
GDPP_LBFGS = GdppReference(names.loss("gdpp"), gd=names.loss("gd"), best=names.loss("gdpp_adam"))
GDPP_ADAM = GdppReference(names.loss("gdpp_adam"), gd=names.loss("gd"), name="GD++ (the authors' tuning)")


# ---------------------------------------------------------------------------------------------------- declaring
@dataclass(frozen=True)
class Rule:
    """How a claim is judged: its statistic against ``threshold`` in ``direction``, the threshold's ``source``, and
    the margin of the comparison with the authors' code (None: none declared)."""

    threshold: float
    direction: Direction
    source: str
    margin: Margin | None = None


def below(threshold: float, source: str, margin: Margin | None = None) -> Rule:
    """The claim holds when its statistic is below ``threshold``."""
    return Rule(threshold, Direction.BELOW, source, margin)


def above(threshold: float, source: str, margin: Margin | None = None) -> Rule:
    """The claim holds when its statistic is above ``threshold``."""
    return Rule(threshold, Direction.ABOVE, source, margin)


# The stated rules with their thresholds and margins: "matches", "not able to match", "aligns", "performs equally
# out of distribution".
MATCH = below(0.02, RULES["match"], LOSS_MARGIN)
NOT_MATCH = above(0.02, RULES["not-match"], LOSS_MARGIN)
ALIGNED = above(0.99, RULES["align"], COSINE_MARGIN)
OOD = below(0.05, RULES["ood"], OOD_MARGIN)


def claims_of(**shared: Any) -> Callable[..., Claim]:
    """A registry file's declaration of a claim: ``shared`` holds the keywords its claims share (paper, kind,
    training test, ...), a claim gives what is particular to it and its ``rule``, and may override a shared keyword
    (``margin=None``: no margin although its rule has one)."""

    def claim(*, rule: Rule, **particular: Any) -> Claim:
        judged = dict(threshold=rule.threshold, direction=rule.direction, threshold_source=rule.source,
                      margin=rule.margin)
        return Claim(**{**shared, **judged, **particular})

    return claim
