"""The study registry. Each study is one module exposing ``STUDY``; ``icl-gd studies`` lists them.

Modules are imported only when a study is asked for, so the CLI starts fast.
"""

from __future__ import annotations

import importlib

from icl_gd.study import RunContext, Study

# name -> module; adding a study is one line here.
_STUDY_MODULES: dict[str, str] = {
    "single-layer": "studies.single_layer",
    "multi-layer": "studies.multi_layer",
    "dual-form": "studies.dual_form",
    "dual-form-lm": "studies.dual_form_lm",
    "sine": "studies.sine",
    "separate-tokens": "studies.separate_tokens",
    "softmax-heads": "studies.softmax_heads",
}


def study_names() -> list[str]:
    return list(_STUDY_MODULES)


def get_study(name: str) -> Study:
    from icl_gd.errors import ConfigError

    if name not in _STUDY_MODULES:
        raise ConfigError(f"unknown study {name!r}; known studies: {', '.join(_STUDY_MODULES)}")
    return importlib.import_module(_STUDY_MODULES[name]).STUDY


__all__ = ["RunContext", "Study", "get_study", "study_names"]
