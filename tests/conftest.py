"""Fixtures shared by the Tensor contract tests: every dtype and edge shape each face must carry."""

import os
import sys

import numpy as np
import pytest

# `import support.…` however pytest is started (pyproject.toml's `pythonpath` says the same).
sys.path.insert(0, os.path.dirname(__file__))

ROUND_TRIP_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]  # fmt: skip


@pytest.fixture(params=ROUND_TRIP_DTYPES)
def sample(request) -> np.ndarray:
    """A (3, 5) C-contiguous array of the dtype, with distinct values and the dtype's extremes."""
    dtype = np.dtype(request.param)
    values = np.arange(15).reshape(3, 5)
    if dtype.kind == "b":
        return (values % 3 == 0).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = (values - (7 if dtype.kind == "i" else 0)).astype(dtype)
        out[0, 0], out[2, 4] = info.min, info.max
        return out
    if dtype.kind == "f":
        return (values * 0.25 - 1.5).astype(dtype)
    return (values * 0.5 - 2 + 1j * (values[::-1] - 3.25)).astype(dtype)


@pytest.fixture(params=[(), (0,), (3, 0)], ids=["0d", "empty", "3x0"])
def edge_array(request) -> np.ndarray:
    """A 0-d or zero-size float32 array."""
    return np.full(request.param, 4.5, dtype=np.float32)
