"""Typed ``KEY=VALUE`` overrides for frozen config dataclasses (the CLI's ``--set``).

Values are parsed by the field's annotation: bool, int, float, str, ``X | None``, ``Literal[...]`` and
``tuple[X, ...]`` (comma-separated). Dotted keys reach nested config dataclasses (``task.d=5``); a plain key
that names a field of exactly one nested config reaches it too. Validation is the dataclass's own
``__post_init__``, which ``dataclasses.replace`` re-runs; a check on one field's value is declared with the field
(``setting(..., check=require_positive_int)``) and run by ``check_settings``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Union

from icl_gd.core.errors import ConfigError

C = TypeVar("C")
Check = Callable[[str, Any], None]  # (field name, value) -> None, or ConfigError

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_value(text: str, annotation: Any, key: str) -> Any:
    """Parse ``text`` as a value of type ``annotation``; ``ConfigError`` names ``key`` and the bad value."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        if type(None) in args and text.strip().lower() in {"none", "null", ""}:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return parse_value(text, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}: cannot parse {text!r}")
    if origin is Literal:
        for choice in args:
            if str(choice) == text:
                return choice
        raise ConfigError(f"{key}={text!r} is not one of {', '.join(map(str, args))}")
    if origin is tuple:
        items = [t for t in text.split(",") if t.strip()] if text.strip() else []
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(parse_value(t.strip(), args[0], key) for t in items)
        if len(items) != len(args):
            raise ConfigError(f"{key}={text!r} needs {len(args)} comma-separated values")
        return tuple(parse_value(t.strip(), a, key) for t, a in zip(items, args))
    if annotation is bool:
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(f"{key}={text!r} is not a boolean (true/false)")
    if annotation is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key}={text!r} is not an integer") from None
    if annotation is float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{key}={text!r} is not a number") from None
        require_finite(key, value)
        return value
    if annotation is str:
        return text
    raise ConfigError(f"{key}: values of type {annotation} cannot be set from the command line")


def config_keys(config: Any) -> list[str]:
    """Every settable key of ``config``, nested configs as dotted keys."""
    return [key for key, _, _ in describe(config)]


def keys_named(config: Any, key: str) -> list[str]:
    """The dotted keys ``key`` names: itself if it is one, else every nested key whose last part it is."""
    keys = config_keys(config)
    return [key] if key in keys else [k for k in keys if k.rsplit(".", 1)[-1] == key]


def _resolve_key(config: Any, key: str, option: str = "--set") -> str:
    matches = keys_named(config, key)
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ConfigError(f"{option} key {key!r} is ambiguous: use one of {', '.join(matches)}")
    raise ConfigError(f"unknown {option} key {key!r}; known keys: {', '.join(config_keys(config))}")


def flag_overrides(config: Any, key: str, value: Any) -> list[str]:
    """A flag's value (``--steps 5``) as ``KEY=VALUE`` overrides: ``key=value`` where ``key`` names one key, else one
    override per key it names (``book.training.steps=5``, ``wiki.training.steps=5``), as ``set_values`` sets it."""
    matches = keys_named(config, key)
    if len(matches) <= 1:
        return [f"{key}={value}"]
    return [f"{k}={value}" for k in matches]


def _set_path(config: Any, path: list[str], text: str, full_key: str) -> Any:
    name = path[0]
    hints = typing.get_type_hints(type(config))
    if len(path) == 1:
        value = parse_value(text, hints[name], full_key)
        return dataclasses.replace(config, **{name: value})
    inner = _set_path(getattr(config, name), path[1:], text, full_key)
    return dataclasses.replace(config, **{name: inner})


def apply_overrides(config: C, overrides: Sequence[str], option: str = "--set") -> C:
    """Return ``config`` with each ``KEY=VALUE`` of ``overrides`` applied in order; errors name ``option``, the
    command-line option the overrides came from (``--set``, ``--grid``)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{option} expects KEY=VALUE, got {item!r}")
        key, text = item.split("=", 1)
        full = _resolve_key(config, key.strip(), option)
        config = _set_path(config, full.split("."), text.strip(), full)
    return config


def set_values(config: C, **values: Any) -> C:
    """Set already-typed values of CLI flags (``--steps``, ``--seeds``) by key. A plain key sets every key it
    names: ``--steps 5`` sets both ``book.training.steps`` and ``wiki.training.steps`` of ``dual-form-lm``."""
    for key, value in values.items():
        matches = keys_named(config, key)
        if not matches:
            raise ConfigError(f"--{key} is not a setting of this study (no {key!r} key; see `icl-gd config`)")
        for full in matches:
            config = _replace_path(config, full.split("."), value)
    return config


def _replace_path(config: Any, path: list[str], value: Any) -> Any:
    if len(path) == 1:
        return dataclasses.replace(config, **{path[0]: value})
    return dataclasses.replace(config, **{path[0]: _replace_path(getattr(config, path[0]), path[1:], value)})


def setting(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = None,
            check: Check | None = None) -> Any:
    """A config field with its one-line meaning (``icl-gd config STUDY`` prints it). ``factory`` builds a
    mutable or nested default (a sub-config). ``check(name, value)`` raises ``ConfigError`` on a bad value;
    ``check_settings`` runs it (not on None where the field's type allows None: off, or resolved later)."""
    metadata = {"doc": doc, "check": check}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def positive_int(default: int | None, doc: str) -> Any:
    """A setting that must be a positive integer (the commonest check: sizes, counts, cadences)."""
    return setting(default, doc, check=require_positive_int)


def check_settings(config: object) -> None:
    """Run every field's ``check`` (``setting(check=...)``) in field order, after refusing a float that is not
    finite (inf, nan): a config's ``__post_init__`` calls this once instead of naming its fields again."""
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        check = f.metadata.get("check")
        value = getattr(config, f.name)
        if isinstance(value, float):
            require_finite(f.name, value)
        if check is not None and not (value is None and f.name in _optional_fields(type(config))):
            check(f.name, value)


@functools.cache
def _optional_fields(cls: type) -> frozenset[str]:
    """Names of the fields of ``cls`` whose type admits None."""
    hints = typing.get_type_hints(cls)
    return frozenset(name for name, hint in hints.items()
                     if typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint))


def describe(config: Any, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, value, one-line meaning) for every settable key of ``config``, nested configs flattened."""
    rows = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            rows.extend(describe(value, f"{prefix}{f.name}."))
        else:
            rows.append((f"{prefix}{f.name}", value, f.metadata.get("doc", "")))
    return rows


# The largest scale setting (an input range, a weight scale, a noise level): training's float32 products grow as
# a scale's cube (attention's x xᵀ x), the float64 reference GD's as its square over every context pair; up to
# 1e6 both stay far from overflow, and a task that large is a unit error, not a study.
MAX_SCALE = 1e6


def require_finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")


def require_positive(name: str, value: float) -> None:
    require_finite(name, value)
    if not value > 0:
        raise ConfigError(f"{name} must be positive, got {value!r}")


def require_non_negative(name: str, value: float) -> None:
    require_finite(name, value)
    if not value >= 0:
        raise ConfigError(f"{name} must be non-negative, got {value!r}")


def require_open_unit(name: str, value: float) -> None:
    """A fraction strictly between 0 and 1 (a decay whose logit is learned: 0 and 1 have none)."""
    require_finite(name, value)
    if not 0 < value < 1:
        raise ConfigError(f"{name} must lie in (0, 1), got {value!r}")


def require_scale(name: str, value: float, positive: bool = True) -> None:
    """A scale setting: finite, positive (or, with ``positive=False``, non-negative) and at most ``MAX_SCALE``."""
    (require_positive if positive else require_non_negative)(name, value)
    if value > MAX_SCALE:
        raise ConfigError(f"{name} must be at most {MAX_SCALE:g} (larger values overflow the products of "
                          f"training and of the GD reference), got {value!r}")


def require_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def require_positive_ints(config: object, *names: str) -> None:
    """Raise ``ConfigError`` naming the first of ``names`` whose value on ``config`` is not a positive int."""
    for name in names:
        require_positive_int(name, getattr(config, name))
