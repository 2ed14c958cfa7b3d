"""The memory a regression run will need, from its config alone: a lower bound from its largest tensors, B tasks of
T tokens of width D, K layers, H heads, S seeds trained as one model, 4-byte floats and 8-byte float64 references.

- training (``batch_size``): per task the prefetched batches and the activations autograd keeps per layer,
  S · B · (T·D·(3 + 6K) + 2·H·K·T²) floats;
- evaluation (``n_test``): the test tokens and their float64 copies, 2 · n_test · T·D floats and doubles, plus
  each layer's states in the sensitivities' graph, 2 · T·D floats for each of min(n_test · K, EVAL_TASK_LAYERS)
  task-layers (deep models are scored in chunks of tasks, ``icl_gd.regression.metrics``);
- tuning (``n_tune``): the tuning tasks, 2 · n_tune · T·D doubles, plus the L-BFGS graph of K GD/GD++ steps,
  2 · T·D doubles for each of min(n_tune · K, TUNE_TASK_STEPS) task-steps (``icl_gd.regression.tuning``).

A fast-weight layer (the delta rule, the mesa layer: ``icl_gd.regression.online``; ``fast_weight_memory``) holds
per context token a state of d_k × d_v (the delta rule's) or d_k × d_k (the mesa layer's inverse P_t), keys of
width d_k = d, and its references run float64 learners on every prefix:

- training (``batch_size``): the batch's tokens and the mesa layer's N inverses P_t that autograd keeps,
  B · (T·D + N·d²) floats;
- evaluation (``n_test``): the test tokens and their float64 copies, and the float64 mesa layer's N inverses in
  the sensitivities' graph, n_test · (T·D floats and doubles + N·d² doubles);
- tuning (``n_tune``): the tuning tasks in float64, online GD's per-token weights (T·d) in L-BFGS's graph and
  ridge's Gram (d²), n_tune · (T·D + T·d + d²) doubles.

The seeds (``evaluation.seeds``) and their evaluations are declared too; what they hold in host memory is the
platform's to estimate (``icl_gd.platform.memory``), the same way for every study.
"""

from __future__ import annotations

from icl_gd.core.study import MemoryPart, RunMemory
from icl_gd.regression.metrics import EVAL_TASK_LAYERS
from icl_gd.regression.config import RegressionConfig
from icl_gd.regression.tuning import TUNE_TASK_STEPS

FLOAT, DOUBLE = 4, 8


def regression_memory(config: RegressionConfig, d: int, heads: int, batched_seeds: bool = False) -> RunMemory:
    """The run's memory for tasks of input dimension ``d`` (tokens of width D = d + 1), models of at most ``heads``
    heads per layer and ``config.model.layers`` layers; ``batched_seeds``: all seeds train as one model."""
    ev, batch_size = config.evaluation, config.training.batch_size
    T, D, K, H = config.task.n_context + 1, d + 1, config.model.layers, heads
    S = ev.seeds if batched_seeds else 1
    training = config.train_config()
    return RunMemory(seeds_key="evaluation.seeds", seeds=ev.seeds,
                     evaluations=training.steps // training.eval_every + 1, device=(
        MemoryPart("training.batch_size", batch_size,
                   FLOAT * S * batch_size * (T * D * (3 + 6 * K) + 2 * H * K * T * T)),
        MemoryPart("evaluation.n_test", ev.n_test,
                   2 * T * D * ((FLOAT + DOUBLE) * ev.n_test + FLOAT * min(ev.n_test * K, EVAL_TASK_LAYERS))),
        MemoryPart("evaluation.n_tune", ev.n_tune,
                   2 * T * D * DOUBLE * (ev.n_tune + min(ev.n_tune * K, TUNE_TASK_STEPS))),
    ))


def fast_weight_memory(config: RegressionConfig) -> RunMemory:
    """The run's memory for single fast-weight layers (delta rule, mesa layer; keys of width d) trained one after
    another on tasks of ``config.task.d`` inputs and one output (tokens of width D = d + 1), with their float64
    references: the module docstring's lower bound."""
    ev, batch_size = config.evaluation, config.training.batch_size
    d, N = config.task.d, config.task.n_context
    T, D = N + 1, d + 1
    training = config.train_config()
    return RunMemory(seeds_key="evaluation.seeds", seeds=ev.seeds,
                     evaluations=training.steps // training.eval_every + 1, device=(
        MemoryPart("training.batch_size", batch_size, FLOAT * batch_size * (T * D + N * d * d)),
        MemoryPart("evaluation.n_test", ev.n_test, ev.n_test * ((FLOAT + DOUBLE) * T * D + DOUBLE * N * d * d)),
        MemoryPart("evaluation.n_tune", ev.n_tune, DOUBLE * ev.n_tune * (T * D + T * d + d * d)),
    ))
