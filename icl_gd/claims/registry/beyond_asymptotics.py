"""Beyond the papers: linear attention pretrained on finitely many tasks against the asymptotic theory of Lu, Letey,
Zavatone-Veth, Maiti & Pehlevan (PNAS 2025, arXiv 2405.11751) and against the simulations their repository stores
(mletey/incontext-cleanup, quick_and_easy_figure/). The runs are the `finite-tasks` study's full preset: on the
axes of their stored figure (α = τ = 10, ρ = 0.01, twelve κ from 0.2 to 32) at d = 10, 32 and 64, the sizes they
stored; each seed one independent draw of the K tasks, the τd² pretraining contexts and the test contexts. The
quoted sentences are the abstract's and their repository's (no full text of the paper is stored here); the closed
forms are derived in docs/theory-asymptotics.md and held to independent limits by `icl-gd verify`. Every rule, its
statistic and the preset were fixed before any full-budget run of the study: the default preset (d = 10, 32) had
been run, the full one (d = 64) had not."""

from __future__ import annotations

from icl_gd.claims.claim import Claim, Kind, RunPlan
from icl_gd.claims.registry.rules import MATCH, above, below, claims_of
from icl_gd.claims.statistics import difference, metric
from icl_gd.regression import metric_names as names

LU = "Lu, Letey, Zavatone-Veth, Maiti & Pehlevan 2025"
_FOLLOWS = ("ours: the reduced layer ŷ = x_qᵀ Γ h with Γ (d, d), fitted by least squares on the d² features "
            "x_q ⊗ h of n = round(τd²) contexts (what gradient descent from Γ = 0 converges to), scored exactly on "
            "fresh contexts; tasks w_k ~ N(0, I_d) as the theory draws them and each context's task drawn uniformly "
            "from the K. The authors' stored simulations differ: Γ (d, d + 1) with a column on x_q (1/ℓ) Σ y_i², "
            "tasks normalised to the sphere of radius √d, each used round(τd²/K) times, ridge λ = 10⁻⁶")
claim = claims_of(kind=Kind.BEYOND, paper=LU, follows=_FOLLOWS, margin=None)

# The study's full preset (d = 10, 32, 64; 3 seeds, about 6 minutes of one core a seed); --smoke runs its default
# (d = 10, 32). A seed's cost is kept in icl_gd/claims/estimates.json.
FINITE_TASKS = RunPlan("finite-tasks", preset="full", seeds=3, max_seeds=10, quick_seeds=1, quick_preset="default")
_FIGURES = ("figures/finite_tasks.png",)
_ABSTRACT_TRANSITION = ("uncover a phase transition in the model’s behavior between low and high task diversity "
                        "regimes: In the low diversity regime, the model tends toward memorization of training "
                        "tasks, whereas in the high diversity regime, it achieves genuine in-context learning and "
                        "generalization beyond the scope of pretrained tasks")

BEYOND_ASYMPTOTIC_CLAIMS: tuple[Claim, ...] = (
    claim(id="lu-icl-error-matches-asymptotics",
          location="abstract (arXiv 2405.11751v3); the ridgeless ICL error along κ is their Fig. 4's theory curve",
          quote="We derive sharp asymptotics for the learning curve in a phenomenologically-rich scaling regime "
                "where the token dimension is taken to infinity",
          statement="At d = 64 (the largest d the authors stored), the trained layer's ICL error on fresh tasks "
                    "matches the asymptotic curve e_ICL(α, κ, τ, ρ) over the twelve κ of their figure: the mean "
                    "over κ of |e_ICL - e∞_ICL| / e∞_ICL is below 2%.",
          runs=(FINITE_TASKS,),
          statistic=metric(names.asymptotic_gap("icl", "mean", "largest")),
          rule=below(0.02, "ours: the 'matches' form's 2%, read on the mean over the κ grid, not the worst κ: the "
                           "sentence is about the curve, and the worst point lies at κ between 1 and 2, where one "
                           "draw of K ≈ d tasks moves e_ICL most (single draws at d = 32 differ by up to 15% "
                           "there); fixed before any full-budget run", form=MATCH.form),
          figures=_FIGURES),
    claim(id="lu-asymptotics-approached-as-d-grows",
          location="their repository, quick_and_easy_figure/quickfigure.md (the CPU version of Fig. 4)",
          quote="As always, the larger the d the better the concentration and fit to the theory curve.",
          statement="The finite-d gap shrinks as d grows: the mean over κ of |e_ICL - e∞_ICL| / e∞_ICL is smaller "
                    "at d = 64 than at d = 10, on the same seed.",
          runs=(FINITE_TASKS,),
          statistic=difference(names.asymptotic_gap("icl", "mean", "largest"),
                               names.asymptotic_gap("icl", "mean", "smallest")),
          rule=below(0.0, "ours: 'the better the fit' read as a direction only, so 0: the gap at the largest d "
                          "minus the gap at the smallest d below 0"),
          figures=_FIGURES),
    claim(id="ours-task-generalisation-matches-stored-simulations",
          kind=Kind.OURS,
          location="not in the paper: ours (their stored quick_and_easy_figure/saved_data/d64_gamma.csv)",
          statement="At d = 64, the trained layer's task-generalisation gap g_task = e_ICL - e_IDG matches the "
                    "authors' stored simulation of their reduced model: the mean over κ of |g_task - g_stored| / "
                    "e∞_ICL is below 2%. Expected before the run to fail at small κ: their extra column on "
                    "x_q (1/ℓ) Σ y_i² lets their layer learn the mean of the K tasks, which costs about 1/K on "
                    "fresh tasks (1/K = 0.08 at κ = 0.2, d = 64), a finite-K effect that the d → ∞ theory drops.",
          runs=(FINITE_TASKS,),
          statistic=metric(names.stored_gap("largest")),
          rule=below(0.02, "ours: the 'matches' form's 2%, on the scale of e∞_ICL because g_task tends to 0 at "
                           "large κ, where a gap relative to g_task itself is noise; fixed before any full-budget "
                           "run", form=MATCH.form),
          figures=_FIGURES),
    claim(id="lu-low-diversity-memorises",
          location="abstract (arXiv 2405.11751v3); Fig. 4, 'Memorisation-to-ICL Transition' (g_task against κ)",
          quote=_ABSTRACT_TRANSITION,
          statement="At the lowest task diversity (κ = 0.2, d = 64, K = 12 tasks), the trained layer memorises its "
                    "pretraining tasks: its error on fresh tasks is more than twice its error on the pretraining "
                    "tasks (the d → ∞ curves give 26 times; dMMSE, the Bayes predictor for the K tasks, about 150 "
                    "times at d = 32).",
          runs=(FINITE_TASKS,),
          statistic=metric(names.error_ratio("icl", "idg", "smallest")),
          rule=above(2.0, "ours: 'tends toward memorization' read as e_ICL / e_IDG above 2 at the smallest κ; the "
                          "paper gives no number; fixed before any full-budget run"),
          parts=("lu-high-diversity-generalises",),
          figures=_FIGURES),
    claim(id="lu-high-diversity-generalises",
          location="abstract (arXiv 2405.11751v3); Fig. 4, 'Memorisation-to-ICL Transition' (g_task against κ)",
          quote=_ABSTRACT_TRANSITION,
          statement="At the highest task diversity (κ = 32, d = 64, K = 2048 tasks), the trained layer generalises "
                    "beyond its pretraining tasks: its error on fresh tasks is within 2% of its error on the "
                    "pretraining tasks, g_task / e_IDG below 0.02 (the d → ∞ curves give 0.7%). Its error is the "
                    "best one linear-attention layer's, not the Bayes error: about ten times ridge's at α = 10.",
          runs=(FINITE_TASKS,),
          statistic=metric(names.error_ratio("task_generalisation", "idg", "largest")),
          rule=below(0.02, "ours: 'generalization beyond the scope of pretrained tasks' read as the 'matches' "
                           "form's 2% between the errors on fresh and on pretraining tasks; fixed before any "
                           "full-budget run", form=MATCH.form),
          figures=_FIGURES),
)
