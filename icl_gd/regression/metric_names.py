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
