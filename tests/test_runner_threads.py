"""``--threads`` limits numpy's BLAS as well as torch (``icl_gd.platform.runner.set_threads``)."""
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from icl_gd.core.errors import ConfigError
from icl_gd.platform.runner import set_threads


def _blas_threads() -> dict[str, int]:
    return {pool["filepath"]: pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_set_threads_limits_torch_and_numpy_blas():
    """Fails if only torch is limited: numpy's OpenBLAS then keeps its own (core-count) threads."""
    torch_before, blas_before = torch.get_num_threads(), _blas_threads()
    assert blas_before, "numpy has no BLAS that threadpoolctl can see"
    try:
        threadpool_limits(2, user_api="blas")  # start from 2 so that the limit to 1 is observable on any machine
        set_threads(1)
        assert torch.get_num_threads() == 1
        assert set(_blas_threads().values()) == {1}
    finally:
        torch.set_num_threads(torch_before)
        for path, n in blas_before.items():
            threadpool_limits({p["prefix"]: n for p in threadpool_info() if p["filepath"] == path})


def test_set_threads_rejects_zero_and_leaves_none_alone():
    with pytest.raises(ConfigError, match="--threads"):
        set_threads(0)
    before = torch.get_num_threads()
    set_threads(None)
    assert torch.get_num_threads() == before
