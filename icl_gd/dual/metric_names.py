"""The names of the dual-form studies' metrics (``metrics.json`` keys), built in one place: the studies write
their metrics under these names and the claims read them by calling the same builders. A setting's or set-up's
metrics carry its name as a part (``icl_gd.core.metric_name.in_part``: ``single.``, ``continual.``, ``book.``)."""

from __future__ import annotations

from icl_gd.core.metric_name import MetricName

VERIFY_MAX_REL_ERROR = MetricName("verify_max_rel_error", "max relative error of W_T q vs W_0 q + Σ v (k·q)")
VOTE_AGREES_WITH_PREDICTION = MetricName("vote_agrees_with_prediction",
                                         "share of queries whose attention vote is the prediction")
VOTE_AGREES_WITH_LABEL = MetricName("vote_agrees_with_label", "share of queries whose attention vote is the label")

_SPLIT_WORDS = {"correct": "share of correctly classified queries whose vote is the output",
                "misclassified_output": "share of misclassified queries whose vote is the output",
                "misclassified_target": "share of misclassified queries whose vote is the target"}


def table1(layer: str, split: str, score: str = "table1") -> MetricName:
    """Their Table 1 for one layer: the share of one split of the queries (``analysis.TABLE1_SPLITS``) whose vote
    matches: ``<score>.<layer>.<split>`` (``score``: ``table1`` ours, ``table1_their_score`` theirs)."""
    return MetricName(f"{score}.{layer}.{split}", f"{_SPLIT_WORDS.get(split, split)} ({layer} layer)")


def task_accuracy(task: int) -> MetricName:
    """Test accuracy on task ``task`` at the end of training: ``task<t>_accuracy``."""
    return MetricName(f"task{task}_accuracy", f"task-{task + 1} accuracy")


def task_accuracy_after_first_phase(task: int) -> MetricName:
    """Test accuracy on task ``task`` after the first phase of continual training: ``task<t>_accuracy_after_task0``."""
    return MetricName(f"task{task}_accuracy_after_task0", f"task-{task + 1} accuracy after phase 1")


def restricted_accuracy(layers: str, task: int, restriction: str = "restrict_phase1") -> MetricName:
    """Task ``task``'s accuracy with ``layers`` (a layer's name or ``all``) attending only to the keys of the first
    phase: ``<restriction>.<layers>.task<t>_accuracy``."""
    chosen = "every layer" if layers == "all" else f"the {layers} layer"
    return MetricName(f"{restriction}.{layers}.task{task}_accuracy",
                      f"task-{task + 1} accuracy with {chosen} restricted to phase-1 keys")


# The language models (``lm_analysis``), per set-up as parts
TOP_KEY_NEXT_WORD_MATCH = MetricName("top_key_next_word_match", "top-key next-token match")
TOP_KEY_NEXT_WORD_MATCH_CHANCE = MetricName("top_key_next_word_match_chance", "chance next-token match")
REMOVAL_PROB_DROP_TOP = MetricName("removal_prob_drop_top", "probability drop (top keys removed)")
REMOVAL_PROB_DROP_RANDOM = MetricName("removal_prob_drop_random", "probability drop (random keys removed)")


def loo_move(method: str, k: int) -> MetricName:
    """Spotlights: mean over queries of |Δ logit| after removing the ``k`` examples ``method`` ranks first and
    retraining: ``loo_move_<method>_k<k>``."""
    return MetricName(f"loo_move_{method}_k{k}", f"|Δ logit| without the top-{k} of {method.replace('_', ' ')}")


def loo_drop(method: str, k: int) -> MetricName:
    return MetricName(f"loo_drop_{method}_k{k}", f"logit drop without the top-{k} of {method.replace('_', ' ')}")

