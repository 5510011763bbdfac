"""`zarrpipe.engine`: an array engine in the shape of zarr-python's proposed engine protocol.

The signatures follow the protocol as zarrpipe's selection issue spells it (the "pluggable
array engines" pull request to zarr-python, 2026, module ``zarr.abc.engine``; no released
zarr-python has that module, and the proposal has changed shape several times):

- ``ArrayEngine.read_selection(request, *, prototype, out=None, fields=None)``,
  ``write_selection(request, value, *, prototype, fields=None)``, ``with_metadata(metadata)``;
- ``AsyncArrayEngine``: the same methods as coroutines;
- ``HierarchyEngine.array_engine(path, metadata, config=None)``.

A request (``SelectionRequest``) carries its kind (``basic``, ``orthogonal``,
``coordinate``, ``mask``, ``block``), the selection, the array shape and the chunk grid. A
plain sequence of ``(start, stop)`` pairs is still accepted as a basic step-1 region.

    engine = zarrpipe.engine.array_engine("data.zarr/temperature", metadata)
    rows = engine.read_selection(SelectionRequest("orthogonal", ([3, 17, 101], slice(None)),
                                                  engine.shape))
    block = engine.read_selection([(0, 128), (0, 128)])   # writable, zero-copy

Reads plan and decode in Rust only the chunks (and inner chunks of shards) a selection
touches. Without ``out=`` the result is the decoded buffer itself moved into NumPy
(``np.from_dlpack(tensor.into_dlpack())``): writable, no copy. With ``out=`` the values are
decoded straight into the caller's array. Writes take basic and block requests (zarrpipe's
native write path: encoded in Rust, chunk files replaced atomically); other kinds, and
``fields``, raise ``UnsupportedError`` rather than falling back silently.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from zarrpipe._zarrpipe import Store, UnsupportedError

Region = Sequence[tuple[int, int]]
Kind = Literal["basic", "orthogonal", "coordinate", "mask", "block"]
KINDS = ("basic", "orthogonal", "coordinate", "mask", "block")


@dataclass(frozen=True)
class SelectionRequest:
    """One read or write: its kind, the selection (as NumPy / zarr-python spell it for that
    kind), the shape of the array it was made for and its chunk grid (the regular chunk
    shape; None when the caller does not say)."""

    kind: Kind
    selection: Any
    shape: tuple[int, ...]
    chunk_grid: tuple[int, ...] | None = None


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

    def _request(self, request: SelectionRequest | Region) -> SelectionRequest:
        """The request checked against this array; a region becomes a basic request."""
        if not isinstance(request, SelectionRequest):
            return SelectionRequest("basic", self._slices(request), self.shape)
        if request.kind not in KINDS:
            raise UnsupportedError(
                f"zarrpipe.engine does not support {request.kind!r} requests "
                f"(supported: {', '.join(KINDS)})"
            )
        if tuple(request.shape) != tuple(self.shape):
            raise ValueError(
                f"the request is for an array of shape {tuple(request.shape)}, "
                f"this engine's array has shape {self.shape}"
            )
        return request

    def _selector(self, request: SelectionRequest) -> tuple[str, Any] | None:
        """How the binding selects an orthogonal, coordinate, mask or block request: (kind,
        key); None for a basic request."""
        if request.kind == "orthogonal":
            return "orthogonal", request.selection
        if request.kind == "coordinate":
            return "numpy", request.selection
        if request.kind == "mask":
            mask = np.asarray(request.selection)
            if mask.dtype != bool or mask.shape != tuple(self.shape):
                raise IndexError(
                    f"a mask request takes a boolean array of the array's shape {self.shape}, "
                    f"got {mask.dtype} of shape {mask.shape}"
                )
            return "numpy", mask
        if request.kind == "block":
            return "block", request.selection
        return None

    def read_selection(
        self,
        request: SelectionRequest | Region,
        *,
        prototype: Any = None,
        out: Any = None,
        fields: Any = None,
    ) -> Any:
        """The values of the request.

        Args:
            request: A `SelectionRequest` (kind, selection, shape, chunk grid), or one
                `(start, stop)` pair per axis (a basic request).
            prototype: Accepted for the engine protocol; the result is always NumPy.
            out: A writable array of the result's shape and the array's dtype to decode
                straight into, or None for a fresh one.
            fields: Structured fields; only None is supported.

        Returns:
            Without `out`: a writable array whose memory is the decoded buffer (no copy,
            `into_dlpack()`). With `out`: `out`, filled.

        Raises:
            UnsupportedError: An unknown request kind, or `fields`.
            IndexError: A selection out of range or that does not broadcast.
            ValueError: A request for an array of another shape, or an unusable `out`.
        """
        if fields is not None:
            raise UnsupportedError("zarrpipe.engine reads no structured fields (fields=None)")
        request = self._request(request)
        selector = self._selector(request)
        if out is not None:
            if selector is None:
                self._array.read_into(request.selection, out)
            else:
                self._array._read_into_as(*selector, out)
            return out
        if selector is None:
            tensor = self._array.read(request.selection)
        else:
            tensor = self._array._read_as(*selector)
        if isinstance(tensor, np.ndarray):  # variable-length strings or bytes
            return tensor
        if tensor.dtype.kind not in "biufc" and tensor.dtype.name != "bfloat16":
            # No DLPack type code (datetimes, strings, records): a writable copy.
            return np.array(tensor, copy=True)
        return np.from_dlpack(tensor.into_dlpack())

    def write_selection(
        self,
        request: SelectionRequest | Region,
        value: Any,
        *,
        prototype: Any = None,
        fields: Any = None,
    ) -> None:
        """Writes `value` into the request's elements.

        Args:
            request: A `SelectionRequest` of any kind, or one `(start, stop)` pair per axis.
            value: A scalar or an array, broadcast like NumPy to the selection's shape. A
                position selected twice keeps the last value, as in NumPy.
            prototype: Accepted for the engine protocol.
            fields: Structured fields; only None is supported.

        Raises:
            UnsupportedError: An unknown request kind, or `fields`.
            IndexError: A selection out of range or that does not broadcast.
            ValueError: `value` does not broadcast to the selection.
        """
        if fields is not None:
            raise UnsupportedError("zarrpipe.engine writes no structured fields (fields=None)")
        request = self._request(request)
        selector = self._selector(request)
        if selector is None:
            self._array.write(request.selection, value)
        else:
            self._array._write_as(*selector, value)


class AsyncArrayEngine:
    """`ArrayEngine` with coroutine methods: each call runs on a worker thread, so the event
    loop keeps running while chunks are fetched and decoded."""

    def __init__(self, engine: ArrayEngine) -> None:
        self._engine = engine

    @property
    def metadata(self) -> dict[str, Any]:
        return self._engine.metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return self._engine.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._engine.dtype

    async def read_selection(
        self,
        request: SelectionRequest | Region,
        *,
        prototype: Any = None,
        out: Any = None,
        fields: Any = None,
    ) -> Any:
        return await asyncio.to_thread(
            self._engine.read_selection, request, prototype=prototype, out=out, fields=fields
        )

    async def write_selection(
        self,
        request: SelectionRequest | Region,
        value: Any,
        *,
        prototype: Any = None,
        fields: Any = None,
    ) -> None:
        await asyncio.to_thread(
            self._engine.write_selection, request, value, prototype=prototype, fields=fields
        )

    async def with_metadata(self, metadata: Any) -> AsyncArrayEngine:
        return AsyncArrayEngine(self._engine.with_metadata(metadata))


class HierarchyEngine:
    """Engines for the arrays of one hierarchy (a local directory, or a zarr StorePath on a
    LocalStore); `config` applies to every array engine it makes, overridden per call."""

    def __init__(self, root: Any, config: Mapping[str, Any] | None = None) -> None:
        self._root, self._prefix = _location(root)
        self._config = dict(config or {})

    def array_engine(
        self, path: str, metadata: Any, config: Mapping[str, Any] | None = None
    ) -> ArrayEngine:
        inner = "/".join(p for p in (self._prefix.strip("/"), path.strip("/")) if p)
        merged = {**self._config, **dict(config or {})}
        return ArrayEngine(self._root, inner, _metadata_dict(metadata), merged)

    def async_array_engine(
        self, path: str, metadata: Any, config: Mapping[str, Any] | None = None
    ) -> AsyncArrayEngine:
        return AsyncArrayEngine(self.array_engine(path, metadata, config))


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
