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
    """Reads and writes regions of one array through zarrpipe's Rust engine.

    Make one with `array_engine`. A region is one `(start, stop)` pair per axis, step 1,
    inside the array.

    Args:
        root: The local store's directory.
        path: The array's path in the store.
        metadata: The array's metadata as a dict (the content of zarr.json / .zarray).
        config: `cache_bytes` (a decoded-chunk cache of that size) and `write_empty_chunks`
            (default False).
    """

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
        """The array's metadata, as given."""
        return self._metadata

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self._array.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The array's element type, in native byte order."""
        return self._array.dtype

    def with_metadata(self, metadata: Any) -> ArrayEngine:
        """The same array with new metadata (after a resize, new attributes...).

        Args:
            metadata: A dict, JSON text, or zarr-python array metadata.

        Returns:
            A new engine; this one is unchanged.

        Raises:
            TypeError: `metadata` is none of those.
        """
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
        """Reads a region.

        Args:
            region: One `(start, stop)` pair per axis.
            prototype: Accepted for the engine protocol; the result is always NumPy.

        Returns:
            A writable array of exactly the region's shape, whose memory was never copied
            (`np.from_dlpack(tensor.into_dlpack())`).

        Raises:
            IndexError: The region has the wrong number of axes or leaves the array.
            zarrpipe.DecodeError: A chunk does not decode.
        """
        tensor = self._array.read(self._slices(region))
        return np.from_dlpack(tensor.into_dlpack())

    def write_selection(self, region: Region, value: Any, *, prototype: Any = None) -> None:
        """Writes values into a region (through `zarrpipe.Array.write`).

        Args:
            region: One `(start, stop)` pair per axis.
            value: A scalar or an array, broadcast like NumPy to the region's shape.
            prototype: Accepted for the engine protocol.

        Raises:
            IndexError: The region has the wrong number of axes or leaves the array.
            ValueError: `value` does not broadcast to the region.
        """
        self._array.write(self._slices(region), value)


def array_engine(path: Any, metadata: Any, config: Mapping[str, Any] | None = None) -> ArrayEngine:
    """An engine for one array, in the shape of zarr-python's proposed engine protocol.

    Args:
        path: The store's local directory (with the array at its root), or a zarr-python
            `StorePath` on a `LocalStore` (the store's root and the array's path in it).
        metadata: The array's metadata: a dict, JSON text, or zarr-python metadata.
        config: `cache_bytes` (a decoded-chunk cache of that size) and
            `write_empty_chunks` (default False).

    Returns:
        The engine.

    Raises:
        TypeError: A store that is not local, or metadata of an unknown kind.
        FileNotFoundError: No store at `path`.
    """
    root, inner = _location(path)
    return ArrayEngine(root, inner, _metadata_dict(metadata), config)
