"""Type stubs for zarrpipe's Rust extension (zarrpipe._zarrpipe)."""

import os
import sys
from collections.abc import Iterable, Sequence
from types import EllipsisType
from typing import Any, Literal, SupportsIndex, TypeAlias, final

import numpy as np
import numpy.typing as npt

if sys.version_info >= (3, 13):
    from types import CapsuleType as _Capsule
else:
    _Capsule: TypeAlias = Any

__all__ = [
    "Array",
    "ChecksumError",
    "DecodeError",
    "MetadataError",
    "OwnedTensor",
    "Store",
    "Tensor",
    "UnsupportedError",
    "ZarrpipeError",
    "_BytesView",
    "_PipelineArray",
    "__version__",
    "_first_touch_stats",
    "get_num_threads",
    "set_num_threads",
]

__version__: str

_Selector: TypeAlias = (
    SupportsIndex | slice | EllipsisType | bool | Sequence[Any] | npt.NDArray[Any] | None
)
_Selection: TypeAlias = _Selector | tuple[_Selector, ...]

class _SelectionReader:
    def __getitem__(self, selection: _Selection, /) -> Tensor: ...

_ChunkIndex: TypeAlias = SupportsIndex | Sequence[SupportsIndex]

class ZarrpipeError(Exception):
    """Base class of zarrpipe's own errors."""

class DecodeError(ZarrpipeError):
    """A chunk's bytes do not decode to what the array's metadata promises."""

class ChecksumError(DecodeError):
    """A crc32c checksum does not match the data it guards."""

class MetadataError(ZarrpipeError):
    """Array or group metadata that does not parse or breaks the Zarr spec."""

class UnsupportedError(ZarrpipeError):
    """Valid Zarr that zarrpipe cannot read: a codec or data type it does not support."""

@final
class Tensor:
    """Decoded data: shape, dtype and one buffer.

    Also implements the buffer protocol (`memoryview(t)`: typed, N-d, read-only).

    Read-only faces (`buffer()`, `to_numpy()`, `__array__`, the buffer protocol and
    `__dlpack__`) share the buffer without copying. `into_dlpack()` moves a buffer that
    nobody else holds out for a writable zero-copy export; the tensor is then consumed.
    """

    @staticmethod
    def from_numpy(array: npt.ArrayLike) -> Tensor:
        """Copies an array (made C-contiguous and native-endian) into a fresh Tensor."""
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type, native byte order."""
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def buffer(self) -> memoryview:
        """A read-only, 1-D memoryview of the raw bytes (format 'B'), zero-copy."""
    def to_numpy(self) -> npt.NDArray[Any]:
        """A read-only NumPy array over the tensor's memory, zero-copy."""
    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        """NumPy 2 `__array__`: read-only and zero-copy unless a copy or a new dtype is asked."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> _Capsule:
        """DLPack export.

        With `max_version >= (1, 0)`: zero-copy and flagged READ_ONLY, or a fresh writable
        copy flagged IS_COPIED when `copy=True`. Without `max_version` (legacy capsule, which
        cannot say read-only): always a copy; `copy=False` raises BufferError.
        """
    def __dlpack_device__(self) -> tuple[int, int]:
        """Always `(1, 0)`: CPU memory."""
    def into_dlpack(self) -> OwnedTensor:
        """Moves the buffer out for a writable, zero-copy export.

        Raises BufferError (and leaves the tensor intact) if anything else still shares the
        buffer: a view, an array from `to_numpy()`, or a chunk cache entry. On success this
        tensor is consumed: its data faces raise BufferError, its metadata still works.
        """

@final
class OwnedTensor:
    """A buffer moved out of a Tensor, handed to exactly one DLPack consumer, writable."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> _Capsule:
        """One-shot, writable, zero-copy export; a second call raises BufferError."""
    def __dlpack_device__(self) -> tuple[int, int]: ...

@final
class _BytesView:
    """Holds the bytes behind `Tensor.buffer()` and `Tensor.to_numpy()` (internal)."""

    def __len__(self) -> int: ...

@final
class Array:
    """An open Zarr array. Reads return fresh Tensors that the caller owns."""

    @property
    def path(self) -> str:
        """The array's path in its store (`""` for an array at the root)."""
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def chunks(self) -> tuple[int, ...]:
        """The read granularity: inner chunks of a sharded array (zarr-python's `chunks`)."""
    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shard shape of a sharded array, else None."""
    @property
    def chunk_grid_shape(self) -> tuple[int, ...]:
        """Number of chunks (of `chunks`) along each axis."""
    @property
    def fill_value(self) -> Any:
        """The fill value as a NumPy scalar."""
    @property
    def zarr_format(self) -> Literal[2, 3]: ...
    @property
    def attrs(self) -> dict[str, Any]: ...
    @property
    def dimension_names(self) -> tuple[str | None, ...] | None: ...
    @property
    def fallback_reason(self) -> str | None:
        """Why zarrs' codecs decode this array's chunks instead of zarrpipe's own (None if
        zarrpipe's)."""
    def __len__(self) -> int: ...
    def __getitem__(self, selection: _Selection, /) -> Tensor:
        """NumPy indexing: integers (dropping their axis), slices of any step, `...`,
        `None`, integer arrays and boolean masks (advanced indexing, broadcast as NumPy
        does). Out of range → IndexError. Reads only the chunks the selection touches."""
    @property
    def oindex(self) -> _SelectionReader:
        """Orthogonal selections: per axis an integer, a slice, a 1-d integer array (any
        order, repeats) or a 1-d boolean mask; `arr.oindex[[3, 1], :, ::2]`."""
    @property
    def vindex(self) -> _SelectionReader:
        """Coordinate selections: integer arrays broadcast together, or one boolean mask of
        the array's shape; `arr.vindex[rows, cols]`, `arr.vindex[mask]`."""
    @property
    def blocks(self) -> _SelectionReader:
        """Block selections over the stored chunk grid (the shards of a sharded array):
        integers and step-1 slices of blocks; `arr.blocks[0, 1:3]`."""
    def _read_pick(self, factors: Any, shape: Any) -> Tensor: ...
    def _read_pick_into(self, factors: Any, shape: Any, out: Any) -> None: ...
    def read(self, selection: _Selection | None = None) -> Tensor:
        """Reads a selection (default: everything) into a fresh Tensor."""
    async def read_async(self, selection: _Selection | None = None) -> Tensor:
        """`read` on a worker thread: awaiting it never blocks the event loop."""
    @property
    def write_empty_chunks(self) -> bool:
        """Whether writes store chunks that are all fill value (else they are deleted)."""
    def __setitem__(self, selection: _Selection, value: npt.ArrayLike, /) -> None:
        """Writes `value`, broadcast like NumPy, into the selection."""
    def read_into(self, selection: _Selection | None, out: Any) -> None:
        """Decodes a selection straight into `out`: a writable NumPy array of the selection's
        shape and the array's dtype (any strides), a CPU `__dlpack__` tensor (torch), or a
        raw writable buffer of the right size. Repeated reads into one buffer allocate
        nothing. ValueError/TypeError if `out` does not fit."""
    def write(self, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """Writes `value`, broadcast like NumPy, into a selection (None: everything).

        Chunks the write covers inside the array are encoded from the new values alone;
        others are read, updated and re-encoded. Local chunk files are replaced atomically,
        object-store values with one PUT each; chunks left all fill value are deleted unless
        `write_empty_chunks`. PermissionError on a read-only store."""
    async def write_async(self, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """`write` on a worker thread: awaiting it never blocks the event loop."""
    def read_chunk(self, index: _ChunkIndex) -> Tensor:
        """Reads one chunk of the `chunks` grid, trimmed at the array's edge."""
    def read_chunks(self, indices: Iterable[_ChunkIndex]) -> list[Tensor]:
        """Reads several chunks, decoded in parallel, one Tensor each."""
    def chunk_key(self, index: _ChunkIndex) -> str:
        """The store key of the object holding chunk `index` of the `chunks` grid (its
        shard, for a sharded array); IndexError outside the grid."""

@final
class Store:
    """A Zarr store (v2 or v3): a local directory or an object store."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        mode: Literal["r", "a", "r+"] | None = None,
        cache_bytes: int = 0,
        options: dict[str, str] | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        concurrency: int = 32,
    ) -> Store:
        """Opens a local directory (a path or a `file://` URL) or an object store URL
        (`s3://bucket/prefix`, `gs://`, `az://`, `http(s)://`).

        `options` are object_store's settings (`aws_endpoint`, `aws_region`,
        `aws_skip_signature`, `allow_http`, ...); credentials otherwise come from the
        environment. `timeout` (seconds per request), `retries` (of transient failures) and
        `concurrency` (requests in flight per read) apply to object stores.
        `cache_bytes > 0` enables an LRU decoded-chunk cache of that size. `mode` is "a"
        (read and write; the default except for http(s):// stores) or "r" (read-only:
        writes raise PermissionError).
        """
    @property
    def read_only(self) -> bool:
        """Whether writes are refused."""
    @staticmethod
    def from_obstore(store: Any, **kwargs: Any) -> Store:
        """A store over the location an `obstore` store object points at, with its config."""
    def request_counts(self) -> dict[str, int]:
        """For object stores: requests made so far (gets, puts, deletes, heads, lists) and
        bytes received."""
    async def read_async(self, path: str, selection: _Selection | None = None) -> Tensor:
        """`read` on a worker thread: awaiting it never blocks the event loop."""
    def open_array(
        self,
        path: str = "",
        *,
        metadata: str | dict[str, Any] | None = None,
        write_empty_chunks: bool = False,
    ) -> Array:
        """Opens the array at `path` (`""` is an array at the store root).

        Its metadata is read from the store, or taken from `metadata` (the JSON content of
        zarr.json / .zarray) when given. `write_empty_chunks`: writes store chunks that are
        all fill value (by default they are deleted, as zarr-python does).
        """
    def create_array(
        self,
        path: str,
        *,
        shape: int | Sequence[int],
        dtype: npt.DTypeLike,
        chunks: int | Sequence[int] | None = None,
        shards: int | Sequence[int] | None = None,
        compressors: Any = "auto",
        filters: Any = "auto",
        fill_value: Any = None,
        attributes: dict[str, Any] | None = None,
        dimension_names: Sequence[str | None] | None = None,
        zarr_format: Literal[2, 3] = 3,
        write_empty_chunks: bool = False,
        overwrite: bool = False,
    ) -> Array:
        """Creates an array at `path` with the metadata zarr-python writes for the same
        arguments, and returns it.

        `chunks` is the read chunk shape (inner chunks when `shards` is given). Codecs are
        v3 dicts (`{"name": "zstd", "configuration": {"level": 3}}`), numcodecs configs
        (`{"id": "zstd", "level": 3}`) or zarr-python / numcodecs codec objects; "auto" is
        zarr-python's default (zstd, level 0) and None means none. FileExistsError if
        something is at `path`, unless `overwrite` (which deletes it first).
        """
    def create_group(
        self,
        path: str,
        attributes: dict[str, Any] | None = None,
        *,
        zarr_format: Literal[2, 3] = 3,
    ) -> None:
        """Creates a group at `path` (and missing parent groups); an existing group keeps
        its attributes unless `attributes` is given."""
    def write(self, path: str, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """Writes `value` (broadcast like NumPy) into a selection of the array at `path`."""
    def read_into(self, path: str, selection: _Selection | None, out: Any) -> None:
        """Decodes a selection of the array at `path` straight into `out` (see
        `Array.read_into`)."""
    def read(self, path: str, selection: _Selection | None = None) -> Tensor:
        """Reads a selection of the array at `path` into a fresh Tensor."""
    def read_chunks(self, path: str, indices: Iterable[_ChunkIndex]) -> list[Tensor]:
        """Reads whole chunks of the array at `path`, one Tensor each."""
    def list(self) -> list[tuple[str, Literal["array", "group"]]]:
        """Every array and group in the store, sorted by path (`""` is the root)."""
    def cache_info(self) -> dict[str, int]:
        """Chunk cache counters: hits, misses, entries, bytes, capacity."""
    def clear_cache(self) -> None:
        """Empties the chunk cache."""

_Request: TypeAlias = tuple[str, list[int | tuple[int, int]], list[tuple[int, int]]]

@final
class _PipelineArray:
    """The Rust half of `zarrpipe.CodecPipeline` (internal): one engine array."""

    def __new__(
        cls,
        metadata_json: str,
        subchunk_order: list[int] | None = None,
        store: Store | None = None,
    ) -> _PipelineArray:
        """Raises UnsupportedError when zarrpipe cannot read the array at all."""
    @property
    def reads_store(self) -> bool:
        """Whether the engine fetches and stores chunks itself (else pass bytes)."""
    def read(
        self,
        out: npt.NDArray[Any],
        requests: list[_Request],
        encoded: list[bytes | None] | None = None,
    ) -> list[bool]:
        """Decodes the requested chunks into `out`; returns per chunk whether it was present."""
    def write(
        self,
        value: npt.NDArray[Any],
        requests: list[_Request],
        write_empty: bool,
        fresh: list[bool],
        existing: list[bytes | None] | None = None,
    ) -> list[bytes | None]:
        """Encodes the chunks a write touches; None marks a chunk to delete (or one the
        engine stored itself)."""

def set_num_threads(n: int) -> None:
    """Sets how many threads decode (default: the CPU count or ZARRPIPE_NUM_THREADS)."""

def get_num_threads() -> int:
    """How many threads decode."""

def _first_touch_stats() -> dict[str, dict[str, float]]:
    """What faulting in fresh output buffers has cost this process, per page size ("base",
    "huge"): 2 MiB steps, slow steps (memory the host had to fault in) and seconds."""
