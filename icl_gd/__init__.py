"""icl-gd: attention as gradient descent, run, measured and plotted."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("icl-gd")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
