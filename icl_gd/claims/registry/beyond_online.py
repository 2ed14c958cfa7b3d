"""Beyond the papers: fast-weight layers that learn while they read, trained on in-context linear regression, against
the online learners their constructions run (Schlag, Irie & Schmidhuber 2021, arXiv 2102.11174, the delta rule; von
Oswald et al. 2023, arXiv 2309.05858, the mesa layer). The quoted sentences are from the two abstracts (no full
text of either is stored here); the runs are the `online-layers` study's full preset, single layers with learned
projections on Gaussian tasks with label noise (d = 5, N = 20, τ = 0.5). The thresholds are the 'matches' form's
and one rule of ours, each fixed before any full-budget run."""

from __future__ import annotations

from icl_gd.claims.claim import Claim, Kind, RunPlan
from icl_gd.claims.registry.rules import MATCH, below, claims_of
from icl_gd.claims.statistics import metric
from icl_gd.regression import metric_names as names

SCHLAG = "Schlag, Irie & Schmidhuber 2021"
MESA_PAPER = "von Oswald, Schlegel, Meulemans et al. 2023 (mesa-optimization)"
_FOLLOWS = ("ours: one layer with learned projections, trained on the query's loss after the whole context, on "
            "in-context linear regression (x, w ~ N(0, I_5), 20 context pairs, label noise 0.5); one learned "
            "constant step size β (DeltaNet's write), not a β computed from each token as in their layers")
claim = claims_of(kind=Kind.BEYOND, follows=_FOLLOWS, margin=None)

# The study's full preset: 8000 steps of 1024 tasks, 10 000 test and tuning tasks; --smoke runs its default (2000
# steps of 512, 4096 tasks). A seed's cost is kept in icl_gd/claims/estimates.json.
ONLINE_LAYERS = RunPlan("online-layers", preset="full", seeds=3, max_seeds=10, quick_seeds=1, quick_preset="default")

BEYOND_ONLINE_CLAIMS: tuple[Claim, ...] = (
    claim(id="schlag-delta-rule-online-gd",
          paper=SCHLAG,
          location="abstract (arXiv 2102.11174)",
          quote="replace the purely additive outer products by a delta rule-like programming instruction, such that "
                "the FWP can more easily learn to correct the current mapping from keys to values",
          statement="A trained delta-rule layer (learned projections and step size) on in-context linear regression: "
                    "its test loss matches that of online GD with the step size tuned on held-out tasks, the "
                    "algorithm its write runs with explicit weights.",
          runs=(ONLINE_LAYERS,),
          statistic=metric(names.rel_gap("delta_rule", "online_gd"), absolute=True),
          rule=MATCH,
          figures=("figures/comparison.png", "figures/per_position.png")),
    claim(id="mesa-layer-ridge",
          paper=MESA_PAPER,
          location="abstract (ICLR 2024, arXiv 2309.05858)",
          quote="we propose a novel self-attention layer, the mesa-layer, that explicitly and efficiently solves "
                "optimization problems specified in context",
          statement="A trained mesa layer (learned projections and regulariser) on noisy in-context linear "
                    "regression: its test loss matches that of ridge regression with λ tuned on held-out tasks.",
          runs=(ONLINE_LAYERS,),
          statistic=metric(names.rel_gap("mesa", "ridge"), absolute=True),
          rule=MATCH,
          figures=("figures/comparison.png", "figures/per_position.png")),
    claim(id="delta-rule-order-online",
          paper=SCHLAG,
          kind=Kind.OURS,
          location="not in the paper: ours",
          follows="",
          statement="A trained delta-rule layer is as sensitive to the order of its context as online GD: the "
                    "movement of its prediction under permuted contexts is within a factor 2 of tuned online GD's "
                    "(and so above one batch GD step's, which is 0).",
          runs=(ONLINE_LAYERS,),
          statistic=metric(names.order_log2_ratio("delta_rule", "online_gd"), absolute=True),
          rule=below(1.0, "ours: 'within a factor 2' read as |log2(S_trained / S_online GD)| < 1, S the mean "
                          "|ŷ(permuted) - ŷ| / mean |ŷ| over 4 random orders; batch GD's S is 0 exactly, so a "
                          "ratio above 1/2 is also more than batch GD's; fixed before any full-budget run"),
          figures=("figures/order.png",)),
)
