"""The study registry: each study is one module exposing ``STUDY``; ``icl-gd studies`` lists them.

Adding a study is one line here. The CLI hands ``REGISTRY`` to the runner, sweeps and claims, so the library never
imports the studies. Modules are imported only when a study is asked for, so the CLI starts fast.
"""

from __future__ import annotations

from icl_gd.core.study import RunContext, Study, StudyRegistry

REGISTRY = StudyRegistry({
    "single-layer": "icl_gd.studies.single_layer",
    "multi-layer": "icl_gd.studies.multi_layer",
    "dual-form": "icl_gd.studies.dual_form",
    "dual-form-lm": "icl_gd.studies.dual_form_lm",
    "sine": "icl_gd.studies.sine",
    "separate-tokens": "icl_gd.studies.separate_tokens",
    "softmax-heads": "icl_gd.studies.softmax_heads",
    "which-algorithm": "icl_gd.studies.which_algorithm",
    "spotlights": "icl_gd.studies.spotlights",
    "foreign-transformer": "icl_gd.studies.foreign_transformer",
    "online-layers": "icl_gd.studies.online_layers",
    "preconditioner": "icl_gd.studies.preconditioner",
    "plateaus": "icl_gd.studies.plateaus",
    "finite-tasks": "icl_gd.studies.finite_tasks",
    "sequence": "icl_gd.studies.sequence",
})


def study_names() -> list[str]:
    return REGISTRY.names()


def get_study(name: str) -> Study:
    return REGISTRY.get(name)


def run(name: str, out, **options):
    """Run study ``name`` into ``out`` and return the finished run (``icl_gd.api.run_study`` with ``REGISTRY``;
    ``options``: preset, steps, seeds, overrides, device, threads, progress, force, figures)."""
    from icl_gd.api import run_study

    return run_study(name, out, registry=REGISTRY, **options)


__all__ = ["REGISTRY", "RunContext", "Study", "get_study", "study_names"]
