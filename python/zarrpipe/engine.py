"""`zarrpipe.engine`: an array engine in the shape of zarr-python's proposed engine protocol.

An engine is bound to one array (a store location plus its metadata) and reads and writes
rectangular regions: ``region`` is one ``(start, stop)`` pair per axis, step 1.

    engine = zarrpipe.engine.array_engine("data.zarr/temperature", metadata)
    block = engine.read_selection([(0, 128), (0, 128)])   # writable, zero-copy
    engine.write_selection([(0, 2), (0, 2)], np.ones((2, 2)))

Reads decode into a fresh buffer that nobody else holds and move it into NumPy
(``np.from_dlpack(tensor.into_dlpack())``): the result is writable and no copy is made.
Writes go through zarrpipe's native write path (``Array.write``): encoded in Rust, chunk
files replaced atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zarrpipe._zarrpipe import Store

Region = Sequence[tuple[int, int]]


def _metadata_dict(metadata: Any) -> dict[str, Any]:
    if isinstance(metadata, Mapping):
        return dict(metadata)
    if isinstance(metadata, str):
        return json.loads(metadata)
    if hasattr(metadata, "to_dict"):  # zarr-python ArrayV2Metadata / ArrayV3Metadata
        return json.loads(json.dumps(metadata.to_dict()))
    raise TypeError(
        f"metadata must be a dict, JSON text or zarr metadata, not {type(metadata).__name__}"
    )


def _location(path: Any) -> tuple[str, str]:
    """(local store root, array path in it) for a path or a zarr StorePath on a LocalStore."""
    store = getattr(path, "store", None)
    if store is not None:
        root = getattr(store, "root", None)
        if root is None:
            raise TypeError(f"zarrpipe.engine needs a local store, got {type(store).__name__}")
        return str(root), str(getattr(path, "path", ""))
    return os.fspath(path), ""


class ArrayEngine:
    """Reads and writes regions of one array through zarrpipe's Rust engine."""

    def __init__(
        self,
        root: str,
        path: str,
        metadata: dict[str, Any],
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self._root = root
        self._path = path.strip("/")
        self._metadata = metadata
        self._config = dict(config or {})
        self._store = Store(root, cache_bytes=int(self._config.get("cache_bytes", 0)))
        self._array = self._store.open_array(
            self._path,
            metadata=metadata,
            write_empty_chunks=bool(self._config.get("write_empty_chunks", False)),
        )

    @property
    def metadata(self) -> dict[str, Any]:
        return self._metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._array.dtype

    def with_metadata(self, metadata: Any) -> ArrayEngine:
        """The same array with new metadata (after a resize, new attributes...)."""
        return ArrayEngine(self._root, self._path, _metadata_dict(metadata), self._config)

    def _slices(self, region: Region) -> tuple[slice, ...]:
        if len(region) != len(self.shape):
            raise IndexError(f"region has {len(region)} axes, the array has {len(self.shape)}")
        out = []
        for axis, ((start, stop), n) in enumerate(zip(region, self.shape, strict=True)):
            if not 0 <= start <= stop <= n:
                raise IndexError(
                    f"region ({start}, {stop}) is out of bounds for axis {axis} with size {n}"
                )
            out.append(slice(start, stop))
        return tuple(out)

    def read_selection(self, region: Region, *, prototype: Any = None) -> np.ndarray[Any, Any]:
        """The values of `region`, as a writable array of exactly its shape (no copy made)."""
        tensor = self._array.read(self._slices(region))
        return np.from_dlpack(tensor.into_dlpack())

    def write_selection(self, region: Region, value: Any, *, prototype: Any = None) -> None:
        """Writes `value` (broadcast to the region's shape) into `region`."""
        self._array.write(self._slices(region), value)


def array_engine(path: Any, metadata: Any, config: Mapping[str, Any] | None = None) -> ArrayEngine:
    """An engine for the array at `path` (a local directory, or a zarr StorePath on a
    LocalStore) described by `metadata` (a dict, JSON text, or zarr-python metadata).
    `config`: ``cache_bytes`` (decoded-chunk cache), ``write_empty_chunks`` (default False)."""
    root, inner = _location(path)
    return ArrayEngine(root, inner, _metadata_dict(metadata), config)
