"""A regression study's ``Study``, built from what is particular to it.

Every regression study declares the same platform fields the same way: one intra-op thread (its matrices are tiny),
the memory estimate of ``regression_memory`` and the training settings its config resolves to
(``RegressionConfig.train_config``). ``regression_study`` fills those in, so a study's ``STUDY`` names only its
own parts: name, summary, config, run, presets, what it trains per seed, its tiny budget and, where its config does
not say it in the usual keys, the shape its memory is sized by (``MemoryShape``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from icl_gd.core.study import RunContext, RunMemory, Study, TrainingWork
from icl_gd.regression.config import RegressionConfig
from icl_gd.regression.memory import regression_memory

C = TypeVar("C", bound=RegressionConfig)

# Regression matrices are tiny: intra-op threads gain nothing, and a second thread on a busy machine makes every
# step wait on the slowest core (``Study.default_threads``).
REGRESSION_THREADS = 1


@dataclass(frozen=True)
class MemoryShape:
    """What sizes a regression run's largest tensors beyond its config's budget keys (``regression_memory``): tasks
    of input dimension ``d`` (tokens of width d + 1), models of at most ``heads`` heads per layer, and whether all
    seeds train as one batched model (``batched_seeds``: the training batch is held once per seed)."""

    d: int
    heads: int
    batched_seeds: bool = False


def config_memory_shape(config: RegressionConfig) -> MemoryShape:
    """The shape a config states in the usual keys: ``task.d``; ``model.heads``, one count or a tuple of counts (one
    model each: the largest sizes the run); ``batched_seeds`` where the config has that key (else False)."""
    heads = config.model.heads
    return MemoryShape(d=config.task.d, heads=max(heads) if isinstance(heads, tuple) else heads,
                       batched_seeds=getattr(config, "batched_seeds", False))


def shaped_memory(memory_shape: Callable[[C], MemoryShape]) -> Callable[[C], RunMemory]:
    """``Study.memory`` of a regression study: ``regression_memory`` at ``memory_shape(config)``."""

    def memory(config: C) -> RunMemory:
        shape = memory_shape(config)
        return regression_memory(config, d=shape.d, heads=shape.heads, batched_seeds=shape.batched_seeds)

    return memory


def regression_study(*, name: str, summary: str, default_config: type[C],
                     run: Callable[[C, RunContext], dict[str, Any]],
                     training_work: Callable[[C], Sequence[TrainingWork]],
                     presets: Mapping[str, Callable[[], C]] | None = None,
                     memory_shape: Callable[[C], MemoryShape] | None = config_memory_shape,
                     memory: Callable[[C], RunMemory] | None = None,
                     headline: tuple[str, ...] = (), tiny: tuple[str, ...] = ()) -> Study:
    """The ``Study`` of a regression study: the fields named here as ``Study`` takes them, plus one intra-op thread,
    ``resolved_training`` = ``default_config.train_config`` and ``memory`` = ``regression_memory`` at
    ``memory_shape(config)`` (None: the run's memory is not estimated, e.g. a model the estimate does not
    describe). ``memory``: a study whose largest tensors are not an LSA stack's passes its own estimate (e.g.
    ``fast_weight_memory``), used in place of ``memory_shape``'s."""
    if memory is None and memory_shape is not None:
        memory = shaped_memory(memory_shape)
    return Study(name=name, summary=summary, default_config=default_config, run=run,
                 default_threads=REGRESSION_THREADS, presets=dict(presets or {}), headline=headline,
                 memory=memory,
                 resolved_training=default_config.train_config, training_work=training_work, tiny=tiny)
