"""The names of the regression studies' metrics (``metrics.json`` keys), built in one place: the studies write
their metrics under these names and the claims read them by calling the same builders.

A model or reference is named as the studies name it (``trained``, ``gd``, ``gdpp``, ``gdpp_adam``, ``meta``, ...);
``MODEL_SYMBOLS`` says how a claim's description writes it.
"""

from __future__ import annotations

from icl_gd.core.metric_name import MetricName, symbol_of

MODEL_SYMBOLS = {"gd": "GD", "gdpp": "GD++", "gdpp_adam": "GD++(Adam)", "gd_2steps": "GD2", "gd_1": "GD(1 step)",
                 "gd_population": "GD(η*, population)", "zero": "0",
                 "gamma_star": "Γ*", "best_gd": "GD(η*)", "trained_normalised": "trained(1/M)"}


def model_symbol(model: str) -> str:
    return MODEL_SYMBOLS.get(model, model)


def loss(model: str) -> MetricName:
    """A model's test loss: ``loss_<model>``."""
    return MetricName(f"loss_{model}", f"L_{model_symbol(model)}")


def eta(model: str) -> MetricName:
    """A model's GD step size η (closed-form, or read off trained weights; a list: one per step): ``eta_<model>``."""
    return MetricName(f"eta_{model}", f"η_{model_symbol(model)}")


def rel_gap(model: str, reference: str) -> MetricName:
    """(L_model - L_reference) / L_reference: ``loss_rel_gap_<model>_vs_<reference>``."""
    m, r = model_symbol(model), model_symbol(reference)
    return MetricName(f"loss_rel_gap_{model}_vs_{reference}", f"(L_{m} - L_{r}) / L_{r}")


# The alignment of two predictors on the test tasks (``icl_gd.regression.metrics.Alignment``).
PRED_DIFF, COS_SENSITIVITY, SENSITIVITY_DIFF = "pred_diff", "cos_sensitivity", "sensitivity_diff"
ALIGNMENT = (PRED_DIFF, COS_SENSITIVITY, SENSITIVITY_DIFF)
_ALIGNMENT_WORDS = {PRED_DIFF: "prediction difference", COS_SENSITIVITY: "cosine of ∂ŷ/∂x_q",
                    SENSITIVITY_DIFF: "sensitivity difference"}


def alignment(measure: str, prefix: str = "", suffix: str = "", compares: str = "") -> MetricName:
    """One alignment measure (``ALIGNMENT``) of two predictors: ``<prefix><measure><suffix>``, the prefix and suffix
    naming the pair as the study does (``untrained_``, ``vs_meta_``; ``_gdpp``); ``compares`` names the pair in a
    claim's description ("trained vs GD++")."""
    pair = compares or (prefix + suffix).strip("_").replace("_", " ")
    return MetricName(f"{prefix}{measure}{suffix}", _ALIGNMENT_WORDS[measure] + (f", {pair}" if pair else ""))


# Prefixes of the pairs the single-layer study aligns besides (trained, its reference): the untrained layer, and the
# trained layer against a control.
UNTRAINED = "untrained_"


def trained_vs(reference: str) -> str:
    """``trained_vs_<reference>_``: the prefix of the trained model's alignment with ``reference``."""
    return f"trained_vs_{reference}_"


def vs(reference: str) -> str:
    """``vs_<reference>_``: the prefix of the trained model's alignment with a reference other than its study's
    first (sine's ``vs_meta_``, separate tokens' ``vs_gd_2steps_``)."""
    return f"vs_{reference}_"


def function_rel_rms(prefix: str, compares: str = "") -> MetricName:
    """√mean (ŷ - ŷ_ref)² / √mean ŷ_ref² over the test tasks (``evaluation.relative_prediction_rms``):
    ``<prefix>function_rel_rms``."""
    return MetricName(f"{prefix}function_rel_rms", f"relative L2 distance of the predicted functions, {compares}")


def condition(name: str) -> MetricName:
    """Mean over test tasks of log10 κ(XXᵀ) of ``name``'s inputs (a list: one per transform; or one value):
    ``cond_log10_<name>``."""
    return MetricName(f"cond_log10_{name}", f"log10 κ(XXᵀ) of {name.replace('_', ' ')}")


def condition_median(name: str) -> MetricName:
    return MetricName(f"cond_median_{name}", f"median κ(XXᵀ) of {name.replace('_', ' ')}")


def with_heads(name: str, heads: int) -> MetricName:
    """Metric ``name`` of the model with ``heads`` heads: ``<name>_h<heads>``."""
    return MetricName(f"{name}_h{heads}", f"{symbol_of(name)} [{heads} head{'s' if heads != 1 else ''}]")


def copy(column: str) -> MetricName:
    """The copy analysis (separate tokens): mean gradient norm of a token's output to token ``column`` (``next``,
    ``other_per_token``, ...): ``copy_<column>``."""
    return MetricName(f"copy_{column}", f"gradient norm to {_COPY_WORDS.get(column, column.replace('_', ' '))}")


_COPY_WORDS = {"next": "token k+1", "other_per_token": "another token (mean)", "own": "the token itself"}


def copy_authors(column: str) -> MetricName:
    """The authors' copy analysis (their ``analyse_copy``: the norm of the task-mean gradient of token k's summed
    output) to token ``column``: ``own``, ``next``, ``other`` (the others without k+1) or ``other_with_next_bug``
    (the others with k+1, as their code sums them): ``copy_authors_<column>``."""
    words = {"own": "the token itself", "next": "token k+1", "other": "the other tokens",
             "other_with_next_bug": "the other tokens, k+1 counted (as their code)"}
    return MetricName(f"copy_authors_{column}", f"their analyse_copy: gradient norm to {words.get(column, column)}")


def step_at(name: str, index: int) -> MetricName:
    """Item ``index`` of a per-step list metric: ``<name>[<index>]`` (a claim's reading, not a written key)."""
    return MetricName(f"{name}[{index}]", f"{symbol_of(name)} [step {index}]")


TRAINED_GAMMA = MetricName("trained_gamma", "γ_trained")
# which-algorithm (``growth_summaries``)
NEWTON_LARGEST_INCREMENT = MetricName("newton_largest_increment",
                                      "largest increase of the matched Newton iterations from one layer to the next")
GD_LAST_OVER_HALF = MetricName("gd_last_over_half", "matched GD steps at the last layer / at layer K/2")
SIM_ERRORS_MARGIN_FROM_LAYER4 = MetricName(
    "sim_errors_margin_over_gdpp_from_layer4",
    "smallest over layers 4..K of SimE(best of Newton / GD / preconditioned GD) - SimE(GD++)")
SIM_ERRORS_PGD_MINUS_GD_LAST = MetricName("sim_errors_pgd_minus_gd_last",
                                          "SimE(preconditioned GD) - SimE(GD) at the last layer")
# foreign-transformer
PRED_DIFF_RATIO_LS_OVER_GD1 = MetricName("pred_diff_ratio_least_squares_over_gd_1",
                                         "mean |ŷ - ŷ_least squares| / mean |ŷ - ŷ_GD(1 step)|")
LOSS_RATIO_TRAINED_OVER_GD1 = MetricName("loss_ratio_trained_over_gd_1", "L_trained / L_GD(1 step)")
# online-layers (``icl_gd.regression.online.order``)
def order_sensitivity(model: str) -> MetricName:
    """How far ``model``'s ŷ moves when its context is permuted, relative to ŷ's size: ``order_sensitivity_<model>``."""
    return MetricName(f"order_sensitivity_{model}", f"order sensitivity of {model_symbol(model)}")


def order_log2_ratio(model: str, algorithm: str) -> MetricName:
    """log2 of ``model``'s order sensitivity over ``algorithm``'s: ``order_log2_ratio_<model>_vs_<algorithm>``."""
    m, a = model_symbol(model), model_symbol(algorithm)
    return MetricName(f"order_log2_ratio_{model}_vs_{algorithm}", f"log2(order_{m} / order_{a})")


# preconditioner (``icl_gd.regression.theory``)


def preconditioner_cosine(model: str) -> MetricName:
    """The cosine (Frobenius) of the preconditioner Γ ``model`` applies with Γ*: ``gamma_cosine_<model>``."""
    return MetricName(f"gamma_cosine_{model}", f"cos(Γ_{model_symbol(model)}, Γ*)")


def preconditioner_rel_error(model: str) -> MetricName:
    """‖Γ_model - Γ*‖_F / ‖Γ*‖_F: ``gamma_rel_error_<model>``."""
    return MetricName(f"gamma_rel_error_{model}", f"‖Γ_{model_symbol(model)} - Γ*‖ / ‖Γ*‖")


def shift_worst_gap(shift: str, model: str, reference: str) -> MetricName:
    """Over a shift's test points, the relative loss gap (L_model - L_reference) / L_reference of largest size, its
    sign kept: ``worst_gap_<shift>_<model>_vs_<reference>``."""
    m, r = model_symbol(model), model_symbol(reference)
    return MetricName(f"worst_gap_{shift}_{model}_vs_{reference}",
                      f"the largest (L_{m} - L_{r}) / L_{r} over the {shift} shift's points")


def shift_loss_ratio(shift: str, value: float, model: str, reference: str) -> MetricName:
    """L_model / L_reference at one point of a shift: ``loss_ratio_<shift>_<value>_<model>_vs_<reference>``."""
    m, r = model_symbol(model), model_symbol(reference)
    return MetricName(f"loss_ratio_{shift}_{value:g}_{model}_vs_{reference}",
                      f"L_{m} / L_{r} at {shift} {value:g}")


# sequence (``icl_gd.regression.sequence``): losses per position of a next-token predictor


def sequence_late_loss(model: str) -> MetricName:
    """A model's next-token loss averaged over the second half of the positions: ``late_loss_<model>``."""
    return MetricName(f"late_loss_{model}", f"L_{model_symbol(model)}(t > T/2)")


def sequence_early_loss(model: str) -> MetricName:
    """A model's next-token loss averaged over the first quarter of the positions: ``early_loss_<model>``."""
    return MetricName(f"early_loss_{model}", f"L_{model_symbol(model)}(t ≤ T/4)")


def sequence_W0_norm(model: str) -> MetricName:
    """‖W0‖_F of the GD step a model runs (tuned, or read off a trained layer): ``W0_norm_<model>``."""
    return MetricName(f"W0_norm_{model}", f"‖W0_{model_symbol(model)}‖")


def sequence_readoff_residual(model: str) -> MetricName:
    """How much of a trained model's predictions the GD step read off it leaves unexplained, the root of
    mean ‖ŝ_model - ŝ_GD‖² / mean ‖ŝ_model‖²: ``readoff_residual_<model>``."""
    m = model_symbol(model)
    return MetricName(f"readoff_residual_{model}", f"‖ŝ_{m} - ŝ_GD(read off)‖ / ‖ŝ_{m}‖")


# finite-tasks (``icl_gd.regression.task_diversity.finite_tasks``, Lu et al.'s asymptotics)
def asymptotic_gap(error: str, reduce: str, d: int | str) -> MetricName:
    """Over the κ grid, the ``reduce`` ("mean" or "worst") of |e - e∞| / e∞, the trained layer's ``error`` ("icl"
    or "idg") at dimension ``d`` (or "largest" / "smallest" of the run's) against Lu et al.'s d → ∞ curve:
    ``<error>_asymptotic_<reduce>_gap_d<d>`` (``..._gap_<largest>_d``)."""
    where = f"d{d}" if isinstance(d, int) else f"{d}_d"
    return MetricName(f"{error}_asymptotic_{reduce}_gap_{where}",
                      f"{reduce} over κ of |e_{error.upper()} - e∞_{error.upper()}| / e∞_{error.upper()} at d {d}")


def stored_gap(d: int | str) -> MetricName:
    """Over the κ the authors stored at ``d``, the mean |g_task - g_task stored| / e∞_ICL (g_task = e_ICL - e_IDG,
    on the scale of the ICL error): ``gtask_stored_mean_gap_d<d>`` (``gtask_stored_mean_gap_<largest>_d``)."""
    where = f"d{d}" if isinstance(d, int) else f"{d}_d"
    return MetricName(f"gtask_stored_mean_gap_{where}", f"mean over κ of |g_task - g_task,stored| / e∞_ICL at d {d}")


def error_ratio(numerator: str, denominator: str, kappa: str) -> MetricName:
    """numerator / denominator (two errors of ``finite_tasks``' rows) at the ``kappa`` ("smallest" or "largest") κ
    of the run, at its largest d: ``<numerator>_over_<denominator>_<kappa>_kappa``."""
    return MetricName(f"{numerator}_over_{denominator}_{kappa}_kappa",
                      f"e_{numerator} / e_{denominator} at the {kappa} κ")


def sequence_probe_r2(model: str, target: str, layer: int) -> MetricName:
    """The R² of linear probes of ``target`` from ``model``'s tokens after layer ``layer`` (0: its input tokens),
    averaged over the second half of the positions: ``probe_r2_<model>_<target>_layer<layer>``."""
    return MetricName(f"probe_r2_{model}_{target}_layer{layer}",
                      f"R²({target} | {model_symbol(model)}, layer {layer}, t > T/2)")


# plateaus (``icl_gd.regression.theory.heads``): a layer is ``merged`` or ``separate``


def plateau_count(layer: str) -> MetricName:
    """How many plateaus ``layer``'s exact loss curve shows that are read as a closed-form level L_m:
    ``plateaus_<layer>``."""
    return MetricName(f"plateaus_{layer}", f"plateaus of the {layer} layer read as some L_m")


def plateau_unread(layer: str) -> MetricName:
    """How many plateaus of ``layer``'s curve are read as no level: ``plateaus_unread_<layer>``."""
    return MetricName(f"plateaus_unread_{layer}", f"plateaus of the {layer} layer at no L_m")


def plateau_worst_error(layer: str) -> MetricName:
    """Over ``layer``'s plateaus read as some L_m, the largest |level / L_m - 1|: ``plateau_worst_error_<layer>``."""
    return MetricName(f"plateau_worst_error_{layer}", f"max |plateau / L_m - 1| of the {layer} layer")


def plateaus_increasing(layer: str) -> MetricName:
    """1 when every plateau of ``layer`` is read as some L_m and m increases along the curve, else 0:
    ``plateaus_increasing_<layer>``."""
    return MetricName(f"plateaus_increasing_{layer}", f"the {layer} layer's plateaus at L_m, m increasing")


def plateaus_every_level(layer: str) -> MetricName:
    """1 when ``layer``'s plateaus are read as L_0, L_1, ..., L_d, one each, in this order, and nothing else:
    ``plateaus_every_level_<layer>``."""
    return MetricName(f"plateaus_every_level_{layer}", f"the {layer} layer's plateaus are L_0, ..., L_d in order")


def plateaus_single_drop(layer: str) -> MetricName:
    """1 when ``layer``'s plateaus are read as L_0 and L_d and nothing else (one drop), else 0:
    ``plateaus_single_drop_<layer>``."""
    return MetricName(f"plateaus_single_drop_{layer}", f"the {layer} layer's plateaus are L_0 and L_d only")


def final_risk(layer: str) -> MetricName:
    """The exact expected loss R(Γ) of ``layer``'s weights at the end of training: ``risk_final_<layer>``."""
    return MetricName(f"risk_final_{layer}", f"R(Γ_{layer}) at the end")
