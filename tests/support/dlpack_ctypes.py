"""Reads DLPack capsules with ctypes, so tests can see the names, flags and pointers NumPy hides."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
import pytest

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1
CPU = (1, 0)

# kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_DTYPE_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}

_NUMPY = np.lib.NumpyVersion(np.__version__)
needs_numpy_negotiation = pytest.mark.skipif(
    _NUMPY < "2.1.0",
    reason="NumPy < 2.1 asks __dlpack__() for a legacy copy and cannot forward copy/device",
)
needs_numpy_read_only_flag = pytest.mark.skipif(
    _NUMPY < "2.2.5",
    reason="NumPy < 2.2.5 ignores DLPack READ_ONLY (2.1-2.2.4 import every capsule read-only)",
)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(capsule: Any) -> str | None:
    """The capsule's name ("dltensor", "dltensor_versioned", "used_dltensor", ...)."""
    name = _capsule_get_name(capsule)
    return None if name is None else name.decode()


def read_capsule(capsule: Any) -> dict[str, Any]:
    """Decode an unconsumed DLPack capsule without consuming it (its destructor still frees it)."""
    name = capsule_name(capsule)
    pointer = _capsule_get_pointer(capsule, name.encode())
    if name == "dltensor_versioned":
        managed = DLManagedTensorVersioned.from_address(pointer)
        version, flags = (managed.version.major, managed.version.minor), managed.flags
    elif name == "dltensor":
        managed = DLManagedTensor.from_address(pointer)
        version, flags = None, None
    else:
        raise ValueError(f"not an unconsumed DLPack capsule: {name!r}")
    tensor = managed.dl_tensor
    ndim = tensor.ndim
    data = tensor.data or 0
    return {
        "name": name,
        "version": version,
        "flags": flags,
        "data": data,
        "byte_offset": tensor.byte_offset,
        "address": data + tensor.byte_offset,
        "shape": tuple(tensor.shape[i] for i in range(ndim)),
        "strides": tuple(tensor.strides[i] for i in range(ndim)) if tensor.strides else None,
        "dtype": (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes),
        "device": (tensor.device.device_type, tensor.device.device_id),
    }


def dlpack_dtype(dtype: np.dtype) -> tuple[int, int, int]:
    """The (code, bits, lanes) a DLPack producer must write for a NumPy dtype."""
    dtype = np.dtype(dtype)
    return (_DTYPE_CODES[dtype.kind], dtype.itemsize * 8, 1)


def capsule_bytes(capsule: Any) -> bytes:
    """The raw bytes a compact row-major capsule points at."""
    info = read_capsule(capsule)
    _, bits, lanes = info["dtype"]
    nbytes = math.prod(info["shape"]) * bits * lanes // 8
    if nbytes == 0:
        return b""
    assert info["strides"] in (None, c_strides(info["shape"])), "capsule is not compact row-major"
    return ctypes.string_at(info["address"], nbytes)


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of a shape, in elements (DLPack's unit)."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))
