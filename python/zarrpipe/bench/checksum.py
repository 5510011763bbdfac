"""One digest of decoded array data, shared by the dataset generator and the workers."""

from __future__ import annotations

import hashlib

import numpy as np

ALGORITHM = "blake2b-128 over dtype, shape and C-order little-endian bytes"


def _canonical(array: np.ndarray) -> np.ndarray:
    """The array as C-contiguous little-endian data (a copy only when it is not already)."""
    array = np.asarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return np.ascontiguousarray(array)


def header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """What goes into the digest before the data: the dtype name and the shape."""
    return f"{np.dtype(dtype).name}{tuple(int(s) for s in shape)}".encode()


def new_hasher(dtype: np.dtype, shape: tuple[int, ...]) -> hashlib.blake2b:
    """A hasher to feed C-order slabs of one array, in order (for data too large to hold)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(header(dtype, shape))
    return h


def update(hasher: hashlib.blake2b, slab: np.ndarray) -> None:
    """Feeds the bytes of a C-order slab (no header) to a hasher from `new_hasher`."""
    data = _canonical(slab)
    if data.size:
        hasher.update(data.reshape(-1).view(np.uint8).data)


def digest(array: np.ndarray) -> str:
    """Hex digest of an array's dtype, shape and bytes: equal digests mean equal data."""
    data = _canonical(array)
    h = new_hasher(data.dtype, data.shape)
    update(h, data)
    return h.hexdigest()
