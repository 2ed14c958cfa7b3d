"""Construction checks: identities of icl-gd's own code, reported in a table of their own, not counted as claims."""

from __future__ import annotations

from icl_gd.claims.departures import IRIE, VON_OSWALD
from icl_gd.claims.claim import Claim, Form, Kind
from icl_gd.claims.statistics import metric, worst_identity
from icl_gd.claims.registry.plans import DUAL_FORM, DUAL_FORM_LM_SGD, VERIFY
from icl_gd.claims.registry.rules import RULES as _RULES
from icl_gd.claims.registry.rules import below, claims_of
from icl_gd.dual import metric_names as names

claim = claims_of(paper=IRIE, kind=Kind.CONSTRUCTION)


def identity_check(*, id: str, paper: str, location: str, statement: str, prefix: str, tolerance: str = "",
                   quote: str = "") -> Claim:
    """The construction check that every `icl-gd verify` identity named ``prefix``... holds within its tolerance
    (float64; ``tolerance`` shown in the description when given)."""
    return claim(id=id, paper=paper, location=location, quote=quote, statement=statement, runs=(VERIFY,),
                 statistic=worst_identity(prefix, tolerance), rule=below(1.0, _RULES["identity"], form=Form.IDENTITY))


# Identities of icl-gd's own code (the constructions and the dual forms): checked, reported in a table of their own,
# not counted among the claims.
CONSTRUCTION_CHECKS: tuple[Claim, ...] = (
    identity_check(id="vo-prop1-exact", paper=VON_OSWALD, location="§2, Proposition 1; App. A.1 (K layers: §3)",
                   statement="One LSA layer with the constructed weights is exactly one GD step (and K layers K "
                             "steps).", prefix="prop1:", tolerance="1e-12",
                   quote="a Transformer step on every token ej is identical to the gradient-induced dynamics"),
    identity_check(id="vo-gdpp-exact", paper=VON_OSWALD, location="§3 (GD++ defined); App. A.10, eq. 23",
                   statement="GD++ is exactly a stack of LSA layers with the constructed weights.", prefix="gd++:",
                   tolerance="1e-12",
                   quote="We give here a precise construction showing how to implement in a single head, a step of GD "
                         "and the discussed data transformation, resulting in GD++ ."),
    identity_check(id="vo-prop2-exact", paper=VON_OSWALD, location="§3, Proposition 2; App. A.8",
                   statement="An MLP followed by the Prop. 1 layer is exactly one GD step on a linear read-out of the "
                             "MLP's features (kernel regression).", prefix="prop2:",
                   quote="Iteratively applying Transformer blocks therefore can solve kernelized least-squares "
                         "regression problems with kernel function k(x, y) = m(x)⊤ m(y) induced by the MLP m(·)."),
    identity_check(id="vo-prop3-exact", paper=VON_OSWALD, location="§4, Proposition 3; App. A.5",
                   statement="A softmax copy layer followed by the Prop. 1 layer is exactly one GD step on separate x "
                             "and y tokens.", prefix="prop3:",
                   quote="all tokens ej are transformed into tokens equivalent to the ones required in Proposition 1."),
    identity_check(id="irie-dual-exact", paper=IRIE, location="§2, Eq. 3",
                   statement="A linear layer trained by SGD (momentum, weight decay, schedules, clipping) equals its "
                             "initial weights plus attention over every training input.", prefix="dual form",
                   tolerance="1e-10"),
    claim(id="irie-dual-trained",
          location="§3",
          statement="The dual form rebuilds the trained image classifier's layers (stored keys and values against the "
                    "trained weights).",
          runs=(DUAL_FORM,),
          statistic=metric(names.VERIFY_MAX_REL_ERROR),
          rule=below(1e-4, "ours: float32 round-off over a training run's sum"),
          figures=("figures/verification_errors.png", "figures/top_training_images_single.png")),
    claim(id="irie-lm-exact",
          location="§4",
          statement="The LSTM language model's output layer and gate maps equal their dual form.",
          runs=(DUAL_FORM_LM_SGD,),
          statistic=metric(names.VERIFY_MAX_REL_ERROR),
          rule=below(1e-4, "ours: float32 round-off over a training run's sum")),
)
