"""Beyond the papers: are the dual form's spotlights faithful? Attention against retraining (LDS,
leave-k-out) and against attribution methods. Each claim is marked as ours, beyond the paper."""

from __future__ import annotations

from icl_gd.claims.claim import Claim, Form, Kind, RunPlan
from icl_gd.claims.departures import IRIE
from icl_gd.claims.registry.rules import above, claims_of
from icl_gd.claims.statistics import ratio
from icl_gd.dual import metric_names as names

claim = claims_of(paper=IRIE, kind=Kind.BEYOND)

# One seed of the default study (digits MLP, 50 queries, 50 half-size subsets x 3 retraining seeds, leave-k-out for
# 6 queries x 6 methods x k in 10, 40, 160 x 3 seeds) took about 120 s of CPU (355 s for 3 seeds, 2559 s wall at
# load 15-21 under nice 19). The estimates: CPU seconds of one seed, measured (a full-budget seed timed with
# freed memory kept, one --smoke reproduction; plans.py).
SPOTLIGHTS = RunPlan("spotlights", seeds=10, max_seeds=30, quick_seeds=2,
                     shared_draw="MNIST's fixed test split (the queries whose predictions are attributed)",
                     quick_overrides=("subsets=20", "retrain_seeds=2", "loo_queries=3", "n_queries=20"))

BEYOND_SPOTLIGHT_CLAIMS: tuple[Claim, ...] = (
    claim(id="beyond-spotlights-move",
          location="not in the paper: ours, a test of their reading of the training patterns with most "
                   "attention (\"spotlights\", their plot_attention.py figures) as the patterns the network uses",
          statement="Removing the 40 training images a test prediction attends to most (attention summed over the "
                    "three layers) and retraining moves the predicted class's logit further than removing 40 random "
                    "training images and retraining.",
          runs=(SPOTLIGHTS,),
          statistic=ratio(names.loo_move("attention_sum", 40), names.loo_move("random", 40)),
          rule=above(1.0, "ours: 'move more than random' states a direction only, so a ratio of 1",
                     form=Form.DIRECTION),
          figures=("figures/spotlights.png",)),
)
