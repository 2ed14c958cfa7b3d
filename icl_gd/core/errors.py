"""Typed exceptions. Every user mistake raises one of these; the CLI turns them into one-line messages."""

from __future__ import annotations


class ICLGDError(Exception):
    """Base class of every error icl-gd raises on purpose."""


class ConfigError(ICLGDError, ValueError):
    """A bad setting: a non-positive size, an unknown key, a value of the wrong type. CLI exit status 2."""


class RunDirectoryError(ICLGDError):
    """The output directory cannot be used (unwritable, or holds a finished run without --force). Exit 2."""


class ResultWriteError(ICLGDError, OSError):
    """A result file (table, figure, checkpoint, metrics.json) could not be written: a full disk, a lost mount.
    The message names the path and the reason; the run stays resumable. Exit 1."""


class DatasetNotFoundError(ICLGDError, FileNotFoundError):
    """An optional dataset is not on this machine; the message names how to get it. Exit 1."""


class DivergenceError(ICLGDError, RuntimeError):
    """Training or an algorithm produced a non-finite value. Exit 1."""


class VerificationError(ICLGDError, AssertionError):
    """An identity that should hold exactly did not hold within its tolerance. Exit 1."""


class ICLGDNotice(UserWarning):
    """Something a user should know that does not stop the run (a damaged checkpoint set aside, say). The CLI
    prints it as one line."""
