"""von Oswald et al. (arXiv 2212.07677v2, 31 May 2023): the claims icl-gd checks, each quoted and located, and
what their declarations share."""

from __future__ import annotations

from icl_gd.claims.departures import VON_OSWALD
from icl_gd.claims.claim import Kind
from icl_gd.claims.registry.rules import TRAINED, claims_of
from icl_gd.regression import metric_names as names

# What von Oswald et al.'s claims share: most are the paper's own sentences about a trained model, on the authors'
# set-up.
FOLLOWS_CODE = "the authors' code: x ~ U(-0.5, 0.5) (§3's text says U(-1, 1)), GD's η tuned on held-out tasks"
claim = claims_of(paper=VON_OSWALD, kind=Kind.PAPER, training=TRAINED, follows=FOLLOWS_CODE)
LOSS_FIGURES = ("figures/loss_curves.png",)
COS_GD = names.alignment(names.COS_SENSITIVITY, compares="trained vs GD")
