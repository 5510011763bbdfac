"""Type stubs for zarrpipe's Rust extension (zarrpipe._zarrpipe)."""

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
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
    "Attributes",
    "ChecksumError",
    "DecodeError",
    "Group",
    "MetadataError",
    "OwnedTensor",
    "Store",
    "Tensor",
    "UnconditionalWriteWarning",
    "UnsupportedError",
    "WriteConflictError",
    "ZarrpipeError",
    "_BytesView",
    "_ChunkRequests",
    "_PickRequests",
    "_PipelineArray",
    "_Rows",
    "__version__",
    "_first_touch_stats",
    "_obstore_location",
    "_output_array",
    "_read_path_stats",
    "get_num_threads",
    "open",
    "set_num_threads",
]

__version__: str

_Selector: TypeAlias = (
    SupportsIndex | slice | EllipsisType | bool | Sequence[Any] | npt.NDArray[Any] | None
)
_Selection: TypeAlias = _Selector | tuple[_Selector, ...]

class _SelectionReader:
    def __getitem__(self, selection: _Selection, /) -> npt.NDArray[Any]: ...
    def __setitem__(self, selection: _Selection, value: npt.ArrayLike, /) -> None: ...

_ChunkIndex: TypeAlias = SupportsIndex | Sequence[SupportsIndex]

class ZarrpipeError(Exception):
    """Base class of zarrpipe's own errors.

    zarrpipe raises Python's built-in exceptions where one fits (`FileNotFoundError`,
    `IndexError`, `ValueError`, `TypeError`, `PermissionError`, `FileExistsError`,
    `MemoryError`, `OSError`, `TimeoutError`, `BufferError`) and a subclass of this one
    otherwise.
    """

class DecodeError(ZarrpipeError, ValueError):
    """A chunk's bytes do not decode to what the array's metadata promises (corrupt or
    truncated data). The message names the chunk's key. It is also a `ValueError`, as
    numcodecs' and zarr-python's errors for bad data are."""

class ChecksumError(DecodeError):
    """A checksum does not match the data it guards (crc32c of a chunk or a shard index,
    numcodecs' adler32, fletcher32, crc32, crc32c or jenkins_lookup3)."""

class MetadataError(ZarrpipeError):
    """Array or group metadata that does not parse or breaks the Zarr spec."""

class UnsupportedError(ZarrpipeError):
    """Valid Zarr that zarrpipe cannot read: a codec or data type it does not support."""

class WriteConflictError(ZarrpipeError):
    """A write of part of a chunk or shard that other writers kept changing under it: every
    conditional write to the object store failed, up to the retry limit. Nothing of this
    chunk was written; the others that were are whole."""

class UnconditionalWriteWarning(UserWarning):
    """An object store that cannot write conditionally was written unconditionally (the
    store was opened with conditional_writes="warn"): a concurrent writer of the same chunk
    or shard may have lost an update."""

@final
class Tensor:
    """Decoded data: a shape, a dtype and one buffer.

    Reads return Tensors. The read-only faces — `buffer()`, `to_numpy()`, `__array__`
    (`np.asarray(t)`), the buffer protocol (`memoryview(t)`: typed, N-d, read-only) and
    `__dlpack__` — share the buffer without copying, as often as asked; each view keeps the
    memory alive. `into_dlpack()` moves a buffer that nobody else holds out for a writable,
    zero-copy export; the tensor is then consumed (a tombstone: `shape`, `dtype`, `nbytes`
    and `repr` still work, the data faces raise `BufferError`).

    Fixed-size types DLPack has no type code for — `datetime64`, `timedelta64`, fixed-length
    strings (`<U7`) and bytes (`|S7`, `|V8`), structured records, ml_dtypes' small floats —
    refuse `__dlpack__`, `into_dlpack()` and the buffer protocol with `BufferError`;
    `to_numpy()`, `np.asarray(t)` (through `__array__`) and `buffer()` give their data with
    the right dtype.
    """

    @staticmethod
    def from_numpy(array: npt.ArrayLike) -> Tensor:
        """Copies an array into a fresh Tensor.

        Args:
            array: Anything `numpy.asarray` accepts, of a fixed-size dtype (numbers, bool,
                bfloat16, datetime64/timedelta64, fixed-length strings and bytes, records).
                It is made C-contiguous and native-endian.

        Returns:
            A Tensor that owns its copy (so `into_dlpack()` succeeds on it).

        Raises:
            TypeError: The dtype is not one zarrpipe holds (object arrays).
        """
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, one length per axis (still available after `into_dlpack()`)."""
    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type, in native byte order (a record keeps its fields' orders)."""
    @property
    def ndim(self) -> int:
        """The number of axes."""
    def __len__(self) -> int:
        """The length of the first axis, as NumPy's `len`.

        Returns:
            `shape[0]`.

        Raises:
            TypeError: The tensor is 0-dimensional.
        """
    @property
    def nbytes(self) -> int:
        """The size of the buffer in bytes."""
    def buffer(self) -> memoryview:
        """The raw bytes, zero-copy.

        Returns:
            A read-only, 1-D memoryview of format `'B'` over the tensor's memory; it keeps
            the memory alive.

        Raises:
            BufferError: The tensor was consumed by `into_dlpack()`.
        """
    def to_numpy(self) -> npt.NDArray[Any]:
        """A NumPy array over the tensor's memory, zero-copy.

        Returns:
            A read-only array of the tensor's shape and dtype; it keeps the memory alive
            (and so makes `into_dlpack()` refuse while it lives).

        Raises:
            BufferError: The tensor was consumed by `into_dlpack()`.
        """
    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        """NumPy's `__array__` protocol (`np.asarray(t)`, `np.array(t)`).

        Args:
            dtype: A dtype to convert to; a different one from the tensor's makes a copy.
            copy: `True` for a writable copy; `None` or `False` for the read-only zero-copy
                view (`False` with a different `dtype` is an error, as in NumPy).

        Returns:
            A read-only view of the tensor's memory, or a writable copy.

        Raises:
            BufferError: The tensor was consumed by `into_dlpack()`.
            ValueError: `copy=False` with a `dtype` that needs a conversion.
        """
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> _Capsule:
        """The DLPack export (what `np.from_dlpack(t)` and `torch.from_dlpack(t)` call).

        With `max_version >= (1, 0)` the capsule is versioned: zero-copy and flagged
        `READ_ONLY`, or, with `copy=True`, a fresh writable copy flagged `IS_COPIED`. A
        legacy capsule (no `max_version`) cannot say read-only, so it is always a copy.

        Args:
            stream: Must be `None` (or -1): the memory is on the CPU.
            max_version: The highest DLPack version the consumer understands.
            dl_device: The device the consumer wants; only `(1, 0)`, the CPU.
            copy: `True` for a writable copy; `False` to forbid copying; `None` for
                zero-copy where DLPack can mark it read-only, a copy otherwise.

        Returns:
            A `dltensor_versioned` or `dltensor` PyCapsule, for exactly one consumer.

        Raises:
            BufferError: The tensor was consumed; `copy=False` without `max_version`; a
                device other than the CPU; a dtype DLPack cannot describe.
            ValueError: A `stream` other than `None` or -1.
        """
    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the memory.

        Returns:
            Always `(1, 0)`: CPU memory.
        """
    def into_dlpack(self) -> OwnedTensor:
        """Moves the buffer out for a writable, zero-copy export.

        Use it as `np.from_dlpack(t.into_dlpack())` or `torch.from_dlpack(t.into_dlpack())`.
        Every fresh read's buffer is held by nobody else, so this succeeds on it.

        Returns:
            An OwnedTensor holding the buffer; its one `__dlpack__` export is writable.
            This tensor is consumed.

        Raises:
            BufferError: Something else still shares the buffer — a view, an array from
                `to_numpy()`, a chunk cache entry — (the tensor is left intact; use
                `__dlpack__(copy=True)` for a writable copy), the tensor was already
                consumed, or its dtype has no DLPack type code (datetimes, strings,
                records: use `to_numpy()`).
        """

@final
class OwnedTensor:
    """A buffer moved out of a Tensor by `Tensor.into_dlpack()`, handed to exactly one DLPack
    consumer, writable."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, one length per axis."""
    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type, in native byte order."""
    @property
    def ndim(self) -> int:
        """The number of axes."""
    @property
    def nbytes(self) -> int:
        """The size of the buffer in bytes."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> _Capsule:
        """The one writable, zero-copy DLPack export: the buffer moves into the capsule.

        Args:
            stream: Must be `None` (or -1): the memory is on the CPU.
            max_version: The highest DLPack version the consumer understands
                (`>= (1, 0)` gives a versioned capsule with no flags set).
            dl_device: The device the consumer wants; only `(1, 0)`, the CPU.
            copy: `True` is refused (the point of an OwnedTensor is not to copy).

        Returns:
            A PyCapsule owning the buffer; its deleter frees it.

        Raises:
            BufferError: A second export, a device other than the CPU, or `copy=True`.
            ValueError: A `stream` other than `None` or -1.
        """
    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the memory.

        Returns:
            Always `(1, 0)`: CPU memory.
        """

@final
class _BytesView:
    """Holds the bytes behind `Tensor.buffer()` and `Tensor.to_numpy()` (internal)."""

    def __len__(self) -> int: ...

@final
class Array:
    """An open Zarr array (v2 or v3): its metadata, read once, and its reads and writes.

    Get one from `Store.open_array` or `Store.create_array`. Indexing (`arr[...]`, `oindex`,
    `vindex`, `blocks`) returns what zarr-python's returns: a writable NumPy array that owns
    the read's fresh buffer (handed over without a copy), or a NumPy scalar where
    zarr-python gives one. `read`, `read_chunk(s)` and `Store.read` return fresh Tensors
    that the caller owns (the two DLPack doors). Writes encode in Rust with the GIL
    released. An Array pickles as its store and path (and the metadata it was opened with,
    when given): unpickling opens it again.

    Arrays of variable-length strings and bytes (v3 `string` / `variable_length_bytes`, v2
    `|O` with `vlen-utf8` / `vlen-bytes`) cannot travel as Tensors: their reads return NumPy
    arrays of the dtype zarr-python returns (`StringDType()` for text, object holding
    `bytes` for byte strings), decoded in parallel in Rust.

    A selection (`arr[...]`, `read`, `write`, `read_into`, `Store.read`) is anything NumPy
    indexes with, with NumPy's result: integers (each drops its axis), slices of any step,
    negative too (clamped like NumPy's), `...`, `None` (a new axis), integer arrays (any
    order, repeats) and boolean masks (advanced indexing, broadcast and placed as NumPy
    places it), or a tuple of them; `None` as the whole selection of `read`/`write`
    selects everything. `oindex`, `vindex` and `blocks` give zarr-python's orthogonal,
    coordinate and block selections. Each selection reads only the chunks it touches, and
    each kind also writes. Invalid selections raise NumPy's exceptions: `IndexError` for
    an index out of range, too many indices, a second `...`, an item that is no index (a
    float, a string) or index arrays that do not broadcast; `ValueError` for a slice step
    of 0; `TypeError` for slice bounds that are not integers. Strings and bytes take
    every kind of selection, in reads and writes alike.
    """

    @property
    def path(self) -> str:
        """The array's path in its store (`""` for an array at the root)."""
    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type, in native byte order (whatever order the store keeps; a
        record keeps its fields' orders); `StringDType()` / object for variable-length
        strings / bytes."""
    @property
    def ndim(self) -> int:
        """The number of axes."""
    @property
    def size(self) -> int:
        """The number of elements."""
    @property
    def nbytes(self) -> int:
        """The size of the whole array decoded, in bytes."""
    @property
    def chunks(self) -> tuple[int, ...]:
        """The read granularity: the chunk shape, or the inner chunk shape of a sharded
        array (zarr-python's `chunks`). Raises NotImplementedError for a rectilinear grid
        (chunks of different sizes), as zarr-python does: see `read_chunk_sizes`."""
    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shard shape of a sharded array, else None. Raises NotImplementedError for
        shards of different sizes (a rectilinear grid): see `write_chunk_sizes`."""
    @property
    def read_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the size of each chunk of the `chunks` grid (inner chunks of a sharded
        array), clipped at the array's end: zarr-python's `read_chunk_sizes`, dask's
        `chunks`. Defined for regular and rectilinear grids."""
    @property
    def write_chunk_sizes(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the size of each stored chunk (shard), clipped at the array's end:
        zarr-python's `write_chunk_sizes`."""
    @property
    def chunk_grid_shape(self) -> tuple[int, ...]:
        """Number of chunks (of `chunks`) along each axis."""
    @property
    def fill_value(self) -> Any:
        """The fill value (what unwritten chunks read as), as a NumPy scalar; None for a v2
        array whose metadata says `"fill_value": null` (as zarr-python gives; its missing
        chunks read as zeros)."""
    @property
    def zarr_format(self) -> Literal[2, 3]:
        """The Zarr format version of the stored metadata."""
    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata document (v3 `zarr.json`, or v2 `.zarray`) as a dict."""
    @property
    def nchunks(self) -> int:
        """How many chunks the array has (inner chunks of a sharded array), as
        zarr-python's `nchunks`."""
    @property
    def nchunks_initialized(self) -> int:
        """How many chunks are stored, as zarr-python counts them (every chunk of a stored
        shard counts). Lists the array's keys."""
    @property
    def nshards(self) -> int:
        """How many values the storage grid has: shards of a sharded array, else chunks."""
    @property
    def nshards_initialized(self) -> int:
        """How many of them are stored; the others read as the fill value. Lists the
        array's keys."""
    def nbytes_stored(self) -> int:
        """Bytes stored under the array's path, chunks and metadata. Lists the array's
        keys.

        Returns:
            The number of bytes, as zarr-python's `nbytes_stored()`.
        """
    @property
    def attrs(self) -> Attributes:
        """The array's user attributes: a mutable mapping; every change is written at once
        (see `Attributes`)."""
    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        """The Zarr v3 dimension names, or None when the metadata has none."""
    @property
    def fallback_reason(self) -> str | None:
        """Why the `zarrs` crate's codecs decode this array's chunks instead of zarrpipe's
        own (None when zarrpipe's own decoder does)."""
    def __len__(self) -> int:
        """`len(arr)`.

        Returns:
            The length of the first axis.

        Raises:
            TypeError: The array is 0-dimensional.
        """
    def __getitem__(self, selection: _Selection, /) -> npt.NDArray[Any] | np.generic:
        """`arr[selection]`: the read of `read(selection)`, as a NumPy array.

        Args:
            selection: NumPy indexing: integers (dropping their axis), slices of any step,
                `...`, `None`, integer arrays and boolean masks (advanced indexing,
                broadcast as NumPy does). Reads only the chunks the selection touches.

        Returns:
            A writable NumPy array of the selection's shape that owns the read's fresh
            buffer (no copy; every data type, strings and bytes included). A selection of
            one element gives what zarr-python gives: a 0-d array for a tuple of Python
            ints, one per axis (zarr-python's orthogonal path), else a NumPy scalar.

        Raises:
            IndexError: An index out of range, coordinate arrays that do not broadcast, an
                item that is no index (see the class for every invalid selection).
            DecodeError: A chunk does not decode (ChecksumError for a crc32c mismatch).
            MemoryError: The output cannot be allocated.
            OSError: An object store fails (TimeoutError when it does not answer).
        """
    @property
    def oindex(self) -> _SelectionReader:
        """Orthogonal selections: per axis an integer, a slice, a 1-d integer array (any
        order, repeats) or a 1-d boolean mask; `arr.oindex[[3, 1], :, ::2]`. Reads and
        writes (`arr.oindex[[3, 1], :] = v`)."""
    @property
    def vindex(self) -> _SelectionReader:
        """Coordinate selections: integer arrays broadcast together, or one boolean mask of
        the array's shape; `arr.vindex[rows, cols]`, `arr.vindex[mask]`. Reads and writes;
        a position selected twice keeps the last value, as in NumPy."""
    @property
    def blocks(self) -> _SelectionReader:
        """Block selections over the stored chunk grid (the shards of a sharded array):
        integers and step-1 slices of blocks; `arr.blocks[0, 1:3]`. Reads and writes."""
    def _read_as(self, kind: str, key: Any) -> Tensor | npt.NDArray[Any]: ...
    def _read_into_as(self, kind: str, key: Any, out: Any) -> None: ...
    def _write_as(self, kind: str, key: Any, value: Any) -> None: ...
    def read(self, selection: _Selection | None = None) -> Tensor | npt.NDArray[Any]:
        """Reads a selection into a fresh Tensor (a NumPy array of `str` / `bytes` for a
        variable-length array; see the class).

        The chunks it touches are fetched and decoded in parallel, each straight into one
        output buffer allocated for this call; missing chunks read as the fill value.

        Args:
            selection: As for `arr[...]`; None (the default) reads everything.

        Returns:
            A Tensor that nobody else holds (so `into_dlpack()` succeeds on it), even
            when a chunk cache supplied the chunks.

        Raises:
            IndexError: An index out of range, too many indices, an item that is no index,
                index arrays that do not broadcast (see the class).
            ValueError: A slice step of 0.
            TypeError: Slice bounds that are not integers.
            DecodeError: A chunk does not decode (ChecksumError for a crc32c mismatch).
            MemoryError: The output cannot be allocated.
            OSError: An object store fails (TimeoutError when it does not answer).
        """
    async def read_async(self, selection: _Selection | None = None) -> Tensor | npt.NDArray[Any]:
        """`read` on asyncio's default executor: awaiting it never blocks the event loop.
        Nothing starts until it is awaited; cancelling the awaiting task stops the read at
        its next chunk (the executor's thread is free again within a chunk's time).

        Args:
            selection: As for `read`.

        Returns:
            What `read` returns.

        Raises:
            IndexError: See `read`, which raises the same exceptions.
        """
    @property
    def write_empty_chunks(self) -> bool:
        """Whether writes store chunks that are all fill value (else they are deleted)."""
    def __setitem__(self, selection: _Selection, value: npt.ArrayLike, /) -> None:
        """`arr[selection] = value`: the same as `write(selection, value)`.

        Args:
            selection: As for `arr[...]`.
            value: A scalar or an array, broadcast like NumPy to the selection's shape.

        Raises:
            PermissionError: The store is read-only.
            ValueError: `value` does not broadcast to the selection, or does not convert.
            IndexError: See `write`, which raises the same exceptions.
        """
    def read_into(self, selection: _Selection | None, out: Any) -> None:
        """Decodes a selection straight into a buffer you own.

        Reading into one buffer again and again allocates nothing.

        Args:
            selection: As for `read`; None reads everything.
            out: A writable NumPy array of the selection's shape and the array's dtype
                (any strides), a CPU tensor with `__dlpack__` (torch), or a writable
                buffer (buffer protocol) of exactly the selection's size in bytes.

        Raises:
            ValueError: `out` has the wrong shape or size, or is read-only.
            TypeError: `out` has the wrong dtype, or is neither an array nor a buffer.
            IndexError: See `read`, which raises the same exceptions for the selection and
                the data.
        """
    def write(self, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """Writes values into a selection.

        Chunks the write covers are encoded from the new values alone; others are read,
        updated and re-encoded as one step no other writer of that chunk (or shard)
        interleaves with (see `Store`), in parallel, each stored as soon as it is encoded.
        Local chunk files are replaced atomically (by rename), object-store values with one
        PUT each (conditional for a value updated in part: on a conflict the update starts
        over from the value that won); chunks left all fill value are deleted unless
        `write_empty_chunks` (on object stores a chunk updated in part is stored instead,
        as no conditional delete exists). The store's chunk cache
        forgets the chunks written. A position selected twice (an index array with
        repeats) keeps the last value, as in NumPy.

        Args:
            selection: As for `read`: any kind NumPy's basic and advanced indexing takes;
                None writes everything.
            value: A scalar or an array, broadcast like NumPy to the selection's shape and
                converted to the array's dtype (as NumPy's `astype` does).

        Raises:
            PermissionError: The store is read-only.
            ValueError: `value` does not broadcast to the selection, or does not convert;
                a slice step of 0.
            IndexError: An index out of range, an item that is no index, or index arrays
                that do not broadcast (see the class for every invalid selection).
            TypeError: Slice bounds that are not integers.
            DecodeError: A chunk the write must update does not decode.
            OSError: The store fails.
        """
    async def write_async(self, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """`write` on asyncio's default executor: awaiting it never blocks the event loop.
        Cancelling the awaiting task stops the write before its next chunk: the chunks it
        stored are whole, the others keep their old values.

        Args:
            selection: As for `write`.
            value: As for `write`.

        Raises:
            PermissionError: See `write`, which raises the same exceptions.
        """
    def read_chunk(self, index: _ChunkIndex) -> Tensor | npt.NDArray[Any]:
        """Reads one chunk of the `chunks` grid (an inner chunk, for a sharded array).

        Args:
            index: The chunk's position in the grid, one integer per axis (an integer alone
                for a 1-D array).

        Returns:
            A Tensor of the chunk's shape, trimmed at the array's edge. A chunk the cache
            holds comes back sharing the cache's memory.

        Raises:
            IndexError: The index is outside `chunk_grid_shape`.
            DecodeError: The chunk does not decode.
            OSError: An object store fails.
        """
    def read_chunks(self, indices: Iterable[_ChunkIndex]) -> list[Tensor | npt.NDArray[Any]]:
        """Reads several chunks, decoded in parallel (NumPy arrays for a variable-length
        array).

        Args:
            indices: Chunk positions in the grid, as for `read_chunk`.

        Returns:
            One Tensor per index, in order.

        Raises:
            IndexError: An index is outside `chunk_grid_shape`.
            DecodeError: A chunk does not decode.
            OSError: An object store fails.
        """
    def chunk_key(self, index: _ChunkIndex) -> str:
        """The store key of the object holding a chunk.

        Args:
            index: The chunk's position in the `chunks` grid.

        Returns:
            The key (e.g. `"temperature/c/0/1"`), relative to the store root: the shard's
            key for a sharded array.

        Raises:
            IndexError: The index is outside `chunk_grid_shape`.
        """

@final
class Attributes:
    """The user attributes of an array or a group, as zarr-python's `Attributes`.

    Reads come from the metadata read when the node was opened (and this node's changes
    since). Every change (`attrs[k] = v`, `del attrs[k]`, `update`, `put`, `pop`, `clear`)
    is written at once, as one atomic read-modify-write of the node's metadata document
    (v3 `zarr.json`, v2 `.zattrs`), under the same protection as chunk writes: two writers
    changing different attributes both keep theirs. Values must be JSON: dicts with str
    keys, lists, str, int, float (not NaN or infinite), bool, None; NumPy values are stored
    as their Python values. Registered as a `collections.abc.MutableMapping`.
    """

    def __getitem__(self, key: str, /) -> Any:
        """The value of one attribute.

        Args:
            key: The attribute's name.

        Returns:
            Its value (dicts, lists, str, int, float, bool or None).

        Raises:
            KeyError: No attribute `key`.
        """
    def __setitem__(self, key: str, value: Any, /) -> None:
        """Sets one attribute and writes it.

        Args:
            key: The attribute's name.
            value: A JSON value.

        Raises:
            ValueError: NaN, an infinity, or an int beyond 64 bits.
            TypeError: A value JSON cannot hold.
            PermissionError: The store is read-only.
        """
    def __delitem__(self, key: str, /) -> None:
        """Removes one attribute and writes the change.

        Args:
            key: The attribute's name.

        Raises:
            KeyError: No attribute `key`.
        """
    def __contains__(self, key: object, /) -> bool:
        """Whether there is an attribute `key`.

        Args:
            key: The name.

        Returns:
            True if there is.
        """
    def __iter__(self) -> Iterator[str]:
        """The attribute names.

        Returns:
            An iterator over them, in stored order.
        """
    def __len__(self) -> int:
        """How many attributes there are.

        Returns:
            The count.
        """
    def __eq__(self, other: object, /) -> bool:
        """Whether the attributes equal `other` (a mapping).

        Args:
            other: What to compare with.

        Returns:
            True if equal.
        """
    def keys(self) -> list[str]:
        """The attribute names.

        Returns:
            The names, in stored order.
        """
    def values(self) -> list[Any]:
        """The attribute values.

        Returns:
            The values, in stored order.
        """
    def items(self) -> list[tuple[str, Any]]:
        """The attributes as pairs.

        Returns:
            (name, value) pairs, in stored order.
        """
    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key`, or `default`.

        Args:
            key: The attribute's name.
            default: What a missing attribute gives.

        Returns:
            The value, or `default`.
        """
    def update(self, other: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Sets every attribute given, keeping the others, in one write.

        Args:
            other: A mapping of attributes.
            **kwargs: More attributes.
        """
    def pop(self, key: str, *default: Any) -> Any:
        """Removes `key` (written at once) and returns its value.

        Args:
            key: The attribute's name.
            *default: What to return when `key` is missing (else KeyError).

        Returns:
            The removed value, or the default.
        """
    def setdefault(self, key: str, default: Any = None) -> Any:
        """The value of `key`, set to `default` (and written) first if it is missing.

        Args:
            key: The attribute's name.
            default: The value to set when missing.

        Returns:
            The value.
        """
    def clear(self) -> None:
        """Removes every attribute, in one write."""
    def put(self, d: Mapping[str, Any]) -> None:
        """Replaces all attributes with `d`, in one write.

        Args:
            d: The new attributes.
        """
    def asdict(self) -> dict[str, Any]:
        """The attributes as a plain dict.

        Returns:
            A new dict (changing it changes nothing stored).
        """

@final
class Group:
    """A Zarr group (v2 or v3), with zarr-python's `Group` names.

    Get one from `Store.open_group`, `Store.create_group` or `zarrpipe.open`. Members are
    opened on access: `group["a/b"]` is an `Array` or a `Group`. A group opened with
    consolidated metadata lists the members that metadata lists (as zarr-python does),
    without listing the store; once it creates a member, it lists the store. A Group
    pickles as its store and path.
    """

    @property
    def path(self) -> str:
        """The group's path in its store (`""` for the root)."""
    @property
    def name(self) -> str:
        """`"/"` followed by the path."""
    @property
    def basename(self) -> str:
        """The last component of the path."""
    @property
    def store(self) -> Store:
        """The store the group is in."""
    @property
    def zarr_format(self) -> Literal[2, 3]:
        """The group's Zarr format."""
    @property
    def read_only(self) -> bool:
        """Whether its store refuses writes."""
    @property
    def attrs(self) -> Attributes:
        """The group's user attributes (see `Attributes`)."""
    def __getitem__(self, key: str, /) -> Array | Group:
        """A member.

        Args:
            key: A member's name, or a path below this group (`"a/b"`).

        Returns:
            The member, opened: an `Array` or a `Group`.

        Raises:
            KeyError: No member there.
        """
    def get(self, key: str, default: Any = None) -> Array | Group | Any:
        """A member, or `default`.

        Args:
            key: A member's name or path.
            default: What a missing member gives.

        Returns:
            The member, or `default`.
        """
    def __contains__(self, key: str, /) -> bool:
        """Whether there is a member at `key`.

        Args:
            key: A member's name or path.

        Returns:
            True if there is.
        """
    def __iter__(self) -> Iterator[str]:
        """The names of the direct members.

        Returns:
            An iterator over them, sorted.
        """
    def __len__(self) -> int:
        """How many direct members there are.

        Returns:
            The count.
        """
    def keys(self) -> list[str]:
        """The names of the direct members.

        Returns:
            The names, sorted.
        """
    def members(self, max_depth: int | None = 0) -> list[tuple[str, Array | Group]]:
        """The members, opened.

        Args:
            max_depth: How many levels below the direct members to include (0: the direct
                members only; None: the whole sub-hierarchy).

        Returns:
            (name, member) pairs, deeper members named by their path relative to this
            group.
        """
    def arrays(self) -> list[tuple[str, Array]]:
        """The direct member arrays.

        Returns:
            (name, Array) pairs, sorted by name.
        """
    def groups(self) -> list[tuple[str, Group]]:
        """The direct member groups.

        Returns:
            (name, Group) pairs, sorted by name.
        """
    def array_keys(self) -> list[str]:
        """The names of the direct member arrays.

        Returns:
            The names, sorted.
        """
    def group_keys(self) -> list[str]:
        """The names of the direct member groups.

        Returns:
            The names, sorted.
        """
    def create_array(self, name: str, **kwargs: Any) -> Array:
        """Creates an array in this group.

        Args:
            name: Its name (or a path below this group).
            **kwargs: `Store.create_array`'s arguments; the group's Zarr format unless
                `zarr_format` is given.

        Returns:
            The new array.
        """
    def create_group(
        self,
        name: str,
        attributes: dict[str, Any] | None = None,
        *,
        zarr_format: Literal[2, 3] | None = None,
    ) -> Group:
        """Creates a group in this group (an existing one is kept, its attributes replaced
        when `attributes` is given).

        Args:
            name: Its name (or a path below this group).
            attributes: Its user attributes.
            zarr_format: Its format; this group's by default.

        Returns:
            The group.
        """
    def require_group(self, name: str) -> Group:
        """The member group `name`, created if missing.

        Args:
            name: Its name (or a path below this group).

        Returns:
            The group.

        Raises:
            TypeError: An array is there.
        """
    def tree(self, level: int | None = None) -> str:
        """The hierarchy below this group as text, one member per line.

        Args:
            level: How many levels to show (None: all).

        Returns:
            The tree: groups by name, arrays with their shape and dtype.
        """

@final
class Store:
    """A Zarr store (v2 or v3): a local directory or an object store.

    A Store opens arrays (`open_array`, `create_array`), reads and writes them by path
    (`read`, `write`, ...), and holds the optional decoded-chunk cache its arrays share.

    A Store pickles as the arguments it was opened with (a local path made absolute;
    `options`, and so any credentials given there, included): unpickling opens the same
    location again, with an empty cache. That is how stores reach DataLoader workers,
    forked or spawned.
    """

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        mode: Literal["r", "r+", "a", "w", "w-"] | None = None,
        cache_bytes: int = 0,
        options: dict[str, str] | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        concurrency: int = 32,
        durable: bool = False,
        conditional_writes: Literal["require", "warn"] = "require",
    ) -> Store:
        """Opens a store.

        Writers never lose each other's updates: a write that changes part of a stored
        chunk or shard reads, updates and stores it as one step no other writer of it
        interleaves with, whether the other writer is a thread, a process, zarr-python on
        `zarrpipe.CodecPipeline` or TensorStore (local directories: a `<key>.__lock` file
        beside the key; object stores: conditional writes). See the guide's writing page,
        "Concurrent writers", for what holds on network file systems and other stores.

        Args:
            path: A local directory (a path or a `file://` URL), or an object store URL:
                `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`,
                `http(s)://host/path`. Opening never creates anything: a missing local
                directory is created by the first write.
            mode: zarr-python's modes. `"r"`: read-only (writes raise PermissionError),
                the store must exist; `"r+"`: read and write, the store must exist; `"a"`:
                read and write, created by the first write (the default, except for
                http(s):// stores, `"r"`); `"w"`: deletes everything in the store now,
                then as `"a"`; `"w-"`: as `"a"`, but FileExistsError unless the store is
                empty.
            cache_bytes: Above 0, an LRU cache of decoded chunks of at most this many bytes,
                shared by the store's arrays.
            options: object_store's settings for object stores, as obstore takes them
                (`aws_endpoint`, `aws_region`, `aws_skip_signature`, `allow_http`, ...);
                credentials not given here come from the environment.
            timeout: Seconds allowed per object-store request.
            retries: Retries of transient object-store failures.
            concurrency: Object-store requests in flight per read.
            durable: Force every local write to disk (`fsync` of the file, then of its
                directory) before it counts as done, so that it survives a power loss.
                Without it a write survives the writer being killed (values are replaced
                by rename: old or new, never torn) but may be lost in a power loss.
            conditional_writes: Object stores that cannot write conditionally (plain
                HTTP, servers that answer "not implemented"): `"require"` refuses writes
                of part of a chunk with UnsupportedError; `"warn"` writes unconditionally
                with an UnconditionalWriteWarning (safe only with one writer per chunk).

        Returns:
            The store. Nothing is read until an array is opened.

        Raises:
            FileNotFoundError: With `mode="r"` or `"r+"`, a local directory that does not
                exist.
            FileExistsError: With `mode="w-"`, a store that is not empty.
            ValueError: An unknown `mode`, URL scheme, option or `conditional_writes`; a
                `timeout` that is not positive; `concurrency` 0.
        """
    @property
    def mode(self) -> Literal["r", "r+", "a", "w", "w-"]:
        """The mode the store was opened with."""
    @property
    def read_only(self) -> bool:
        """Whether writes are refused (`mode="r"`, and http(s):// stores by default)."""
    @property
    def durable(self) -> bool:
        """Whether local writes are forced to disk before they count as done."""
    @staticmethod
    def from_obstore(store: Any, **kwargs: Any) -> Store:
        """A Store over the location an `obstore` store object points at.

        obstore and zarrpipe each link their own object_store crate, so the configuration is
        shared, not the connection.

        Args:
            store: An obstore `S3Store`, `GCSStore`, `AzureStore`, `HTTPStore` or
                `LocalStore`; its bucket, prefix, config and client options are used.
            **kwargs: Other `Store` arguments (`mode`, `cache_bytes`, `timeout`, ...).

        Returns:
            A Store over the same location.

        Raises:
            TypeError: Another kind of obstore store.
            ValueError: The store's config has no bucket (container).
        """
    def request_counts(self) -> dict[str, int]:
        """What the store has asked its object store for so far.

        Returns:
            For object stores, counts of `gets`, `puts`, `deletes`, `heads` and `lists`,
            and the `bytes` received; empty for local stores.
        """
    async def read_async(
        self, path: str, selection: _Selection | None = None
    ) -> Tensor | npt.NDArray[Any]:
        """`read` on asyncio's default executor: awaiting it never blocks the event loop.
        Nothing starts until it is awaited; cancelling the awaiting task stops the read at
        its next chunk.

        Args:
            path: The array's path in the store.
            selection: As for `Array.read`.

        Returns:
            What `read` returns.

        Raises:
            FileNotFoundError: See `read`, which raises the same exceptions.
        """
    def open_array(
        self,
        path: str = "",
        *,
        metadata: str | dict[str, Any] | None = None,
        write_empty_chunks: bool = False,
    ) -> Array:
        """Opens an array.

        Args:
            path: The array's path in the store (`""`, the default, is an array stored at
                the root itself).
            metadata: The array's metadata (the JSON content of `zarr.json` or `.zarray`,
                as text or a dict), to use instead of reading it from the store.
            write_empty_chunks: Whether writes store chunks that are all fill value (by
                default they are deleted, as zarr-python does).

        Returns:
            The array, its metadata read once.

        Raises:
            FileNotFoundError: No array at `path`.
            MetadataError: Metadata that does not parse or breaks the Zarr spec.
            UnsupportedError: A data type zarrpipe cannot read.
        """
    def create_array(
        self,
        path: str,
        *,
        shape: int | Sequence[int],
        dtype: npt.DTypeLike,
        chunks: int | Sequence[int | Sequence[int]] | None = None,
        shards: int | Sequence[int | Sequence[int]] | None = None,
        compressors: Any = "auto",
        filters: Any = "auto",
        fill_value: Any = None,
        attributes: dict[str, Any] | None = None,
        dimension_names: Sequence[str | None] | None = None,
        zarr_format: Literal[2, 3] = 3,
        write_empty_chunks: bool = False,
        overwrite: bool = False,
    ) -> Array:
        """Creates an array, with the metadata zarr-python writes for the same arguments.

        Missing parent groups are created too.

        Args:
            path: Where, in the store.
            shape: The array's shape.
            dtype: A NumPy dtype zarrpipe holds (bool, (u)int8-64, float16/32/64,
                complex64/128, bfloat16, datetime64/timedelta64, `<U7`, `|S7`, `|V8`,
                records, ml_dtypes' small floats); a big-endian one is stored big-endian
                (v2). Variable-length strings: `str`, `"string"` or `StringDType()`;
                variable-length bytes: `bytes` or `"variable_length_bytes"` (zarr-python's
                `VariableLengthUTF8()` / `VariableLengthBytes()` too). `object` is refused
                as ambiguous.
            chunks: The chunk shape reads work in (the inner chunks when `shards` is given);
                None guesses one as zarr-python's "auto" does (within the shard shape when
                `shards` is given). A list of edges on some axis (`[[3, 3, 4], 5]`) makes a
                rectilinear grid (Zarr v3; the edges sum to the shape).
            shards: The shard shape (Zarr v3), a multiple of `chunks`; None for no sharding.
                Edges per axis (`[[10, 5, 5], 10]`), each a multiple of `chunks`, make
                shards of different sizes.
            compressors: v3 codec dicts (`{"name": "zstd", "configuration": {"level": 3}}`),
                numcodecs configs (`{"id": "zstd", "level": 3}`) or zarr-python / numcodecs
                codec objects, one or a list. `"auto"` (the default) is zarr-python's
                default, zstd at level 0; None or `[]` means no compressor.
            filters: Array-to-array or bytes-to-bytes codecs before the compressors, in the
                same forms; `"auto"` (the default) is zarr-python's default (none for
                numbers); None or `[]` means none.
            fill_value: What unwritten elements read as; None is the dtype's zero.
            attributes: User attributes to store.
            dimension_names: One name (or None) per axis (Zarr v3).
            zarr_format: 3 (the default) or 2.
            write_empty_chunks: Whether writes store chunks that are all fill value.
            overwrite: Delete whatever is at `path` first.

        Returns:
            The new array, open.

        Raises:
            FileExistsError: Something is at `path` and `overwrite` is False.
            PermissionError: The store is read-only.
            TypeError: A dtype zarrpipe cannot create, no `chunks`, or a codec it does not
                recognise.
            ValueError: Shapes that do not fit together, or codec settings out of range.
        """
    def create_group(
        self,
        path: str = "",
        attributes: dict[str, Any] | None = None,
        *,
        zarr_format: Literal[2, 3] = 3,
    ) -> Group:
        """Creates a group, and any missing parent groups, and returns it.

        Args:
            path: Where, in the store (`""` is the root).
            attributes: Its user attributes. An existing group keeps its attributes unless
                this is given.
            zarr_format: 3 (the default) or 2.

        Returns:
            The group, open.

        Raises:
            FileExistsError: An array is at `path`.
            PermissionError: The store is read-only.
            TypeError: `attributes` is not a mapping of str keys to JSON values.
            ValueError: An attribute that JSON cannot hold (NaN, an infinity).
        """
    def open_group(self, path: str = "", *, use_consolidated: bool | None = None) -> Group:
        """Opens the group at `path`.

        Args:
            path: The group's path in the store (`""` is the root group).
            use_consolidated: None (the default) reads the group's consolidated metadata
                when it has some, as zarr-python does: its members are then the ones that
                metadata lists, found without listing the store. True requires it; False
                ignores it and lists the store.

        Returns:
            The group.

        Raises:
            FileNotFoundError: No group at `path` (nothing, or an array).
            ValueError: `use_consolidated=True` and the group has no consolidated metadata.
            MetadataError: Metadata that does not parse.
        """
    def consolidate(self, path: str = "") -> Group:
        """Writes the consolidated metadata of the group at `path`, as
        `zarr.consolidate_metadata` does (v3: into the group's `zarr.json`; v2: a
        `.zmetadata` document), so that opening and walking the hierarchy reads one
        document and lists nothing.

        Args:
            path: The group's path (`""` is the root group).

        Returns:
            The group, opened with its new consolidated metadata.

        Raises:
            FileNotFoundError: No group at `path`.
            PermissionError: The store is read-only.
        """
    def write(self, path: str, selection: _Selection | None, value: npt.ArrayLike) -> None:
        """Writes values into a selection of the array at `path` (see `Array.write`).

        Args:
            path: The array's path in the store.
            selection: As for `Array.write`; None writes everything.
            value: A scalar or an array, broadcast like NumPy to the selection's shape.

        Raises:
            FileNotFoundError: No array at `path`.
            PermissionError: See `Array.write`, which raises the same exceptions.
        """
    def read_into(self, path: str, selection: _Selection | None, out: Any) -> None:
        """Decodes a selection of the array at `path` straight into `out` (see
        `Array.read_into`).

        Args:
            path: The array's path in the store.
            selection: As for `Array.read`; None reads everything.
            out: A writable buffer of the selection's shape and the array's dtype.

        Raises:
            FileNotFoundError: No array at `path`.
            ValueError: See `Array.read_into`, which raises the same exceptions.
        """
    def read(self, path: str, selection: _Selection | None = None) -> Tensor | npt.NDArray[Any]:
        """Reads a selection of the array at `path` into a fresh Tensor (see `Array.read`;
        a NumPy array for variable-length strings and bytes).

        Args:
            path: The array's path in the store.
            selection: As for `Array.read`; None (the default) reads everything.

        Returns:
            A Tensor of the selection's shape.

        Raises:
            FileNotFoundError: No array at `path`.
            IndexError: See `Array.read`, which raises the same exceptions.
        """
    def read_chunks(
        self, path: str, indices: Iterable[_ChunkIndex]
    ) -> list[Tensor | npt.NDArray[Any]]:
        """Reads whole chunks of the array at `path`, decoded in parallel (see
        `Array.read_chunks`).

        Args:
            path: The array's path in the store.
            indices: Chunk positions in the array's `chunks` grid.

        Returns:
            One Tensor per index, in order.

        Raises:
            FileNotFoundError: No array at `path`.
            IndexError: See `Array.read_chunks`, which raises the same exceptions.
        """
    def list(self) -> list[tuple[str, Literal["array", "group"]]]:
        """Every array and group in the store: the ones the root group's consolidated
        metadata lists when it has some (one read, no listing, as zarr-python's
        `members(max_depth=None)`), else the store's, listed.

        Returns:
            `(path, "array" | "group")` pairs sorted by path, `""` being the root.

        Raises:
            OSError: The store cannot be listed.
        """
    def cache_info(self) -> dict[str, int]:
        """The chunk cache's counters.

        Returns:
            `hits`, `misses`, `entries`, `bytes` (held now) and `capacity` (`cache_bytes`);
            all 0 without a cache.
        """
    def clear_cache(self) -> None:
        """Empties the chunk cache (Tensors it served keep their memory)."""

@final
class _Rows:
    """Decoded rows of one array, for `zarrpipe.loader.BatchLoader` (internal)."""

    @staticmethod
    def read(
        array: Array, axis: int, ranges: Sequence[tuple[int, int]], reuse: _Rows | None = None
    ) -> _Rows:
        """Reads the rows `ranges` along `axis`, stacked in order, every other axis whole
        (into the buffer of `reuse`, then spent, when it fits)."""
    @property
    def rows(self) -> int:
        """The number of rows held."""
    @property
    def shape(self) -> list[int]:
        """The shape of the buffer."""
    @staticmethod
    def gather(parts: Sequence[tuple[_Rows, Sequence[int]]]) -> Tensor:
        """A fresh Tensor of the chosen rows of each part, in order."""
    @staticmethod
    def gather_into(parts: Sequence[tuple[_Rows, Sequence[int]]], out: np.ndarray) -> list[int]:
        """The chosen rows of each part, in order, into `out` (writable, C-contiguous, of
        exactly the batch's size); returns the batch's shape."""

@final
class _ChunkRequests:
    @staticmethod
    def from_batch(batch: Iterable[Any], out_shape: Sequence[int]) -> _ChunkRequests | None:
        """zarr-python's batch (`(getter, spec, chunk_selection, out_selection, is_complete)`
        per chunk) over an output of `out_shape`, as box requests; None when some selection
        is not a box (index arrays, masks, steps), which the pick path then reads."""
    def subset(self, indices: Sequence[int]) -> _ChunkRequests:
        """The requests at `indices`, in that order."""
    def covers_chunk(self) -> list[bool]:
        """Per request, whether it selects its whole chunk."""
    def __len__(self) -> int: ...

@final
class _PickRequests:
    @staticmethod
    def from_batch(
        batch: Iterable[Any], other_shape: Sequence[int] | None, reading: bool
    ) -> _PickRequests:
        """zarr-python's batch, each selection read as NumPy reads it: the chunk side over
        the stored chunk, the other over `other_shape` (a read's output, a write's value;
        None for a 0-d value). Raises IndexError or TypeError for what NumPy refuses."""
    def subset(self, indices: Sequence[int]) -> _PickRequests:
        """The requests at `indices`, in that order."""
    def complete(self) -> list[bool]:
        """Per request, whether zarr-python calls its chunk complete."""
    def __len__(self) -> int: ...

@final
class _PipelineArray:
    """The Rust half of `zarrpipe.CodecPipeline` (internal): one engine array."""

    def __new__(
        cls,
        metadata_json: str,
        subchunk_write_order: str | None = None,
        store: Store | None = None,
    ) -> _PipelineArray:
        """Raises UnsupportedError when zarrpipe cannot read the array at all."""
    @property
    def reads_store(self) -> bool:
        """Whether the engine fetches and stores chunks itself (else pass bytes)."""
    @property
    def variable(self) -> bool:
        """Whether the elements are variable-length strings or bytes."""
    def read_variable(
        self, out: npt.NDArray[Any], requests: _PickRequests, encoded: list[bytes | None]
    ) -> None:
        """Reads each request's pick of a variable-length array into `out` at its output
        selection, from whole stored chunks (None: missing), decoded in parallel."""
    def write_picks(
        self,
        value: npt.NDArray[Any],
        requests: _PickRequests,
        drop_axes: Sequence[int],
        fresh: list[bool],
        write_empty: bool,
        existing: list[bytes | None] | None = None,
    ) -> list[bytes | None]:
        """Writes `value` at each request's chunk pick, the values at its output selection
        broadcast as NumPy broadcasts; returns the encoded chunks when `existing` is given
        (None: delete), else stores them, each read, updated and stored as one step."""
    def read(
        self,
        out: npt.NDArray[Any],
        requests: _ChunkRequests,
        encoded: list[bytes | None] | None = None,
    ) -> list[bool]:
        """Decodes the requested chunks into `out`; returns per chunk whether it was present."""
    def partial_shard_indexes(
        self, out: npt.NDArray[Any], requests: _ChunkRequests
    ) -> tuple[list[int | None], bool] | None:
        """Per request, its shard's index length when it needs only some inner chunks (None:
        fetch the value whole), and whether indexes sit at the end; None when shards cannot
        be read in part."""
    def inner_ranges(
        self,
        out: npt.NDArray[Any],
        requests: _ChunkRequests,
        indexes: list[bytes | None],
    ) -> list[list[tuple[int, int]]]:
        """Per request, the `(start, end)` byte ranges of its shard to fetch, from the index."""
    def read_fetched(
        self,
        out: npt.NDArray[Any],
        requests: _ChunkRequests,
        fetched: list[bytes | tuple[bytes, list[tuple[int, bytes]]] | None],
    ) -> list[bool]:
        """`read` from what was fetched: None, the whole value, or a shard's (index, pieces)."""
    def partial_pick_indexes(self, requests: _PickRequests) -> tuple[list[int | None], bool] | None:
        """`partial_shard_indexes` for `read_picks`' requests."""
    def pick_inner_ranges(
        self, requests: _PickRequests, indexes: list[bytes | None]
    ) -> list[list[tuple[int, int]]]:
        """`inner_ranges` for `read_picks`' requests."""
    def read_picks(
        self,
        out: npt.NDArray[Any],
        requests: _PickRequests,
        encoded: list[bytes | None] | None = None,
        fetched: list[bytes | tuple[bytes, list[tuple[int, bytes]]] | None] | None = None,
    ) -> list[bool]:
        """Reads each request's pick into `out` at its output selection; per chunk whether
        it was present."""
    def write(
        self,
        value: npt.NDArray[Any],
        requests: _ChunkRequests,
        write_empty: bool,
        fresh: list[bool],
        existing: list[bytes | None] | None = None,
    ) -> list[bytes | None]:
        """Encodes the chunks a write touches; None marks a chunk to delete (or one the
        engine stored itself)."""

def set_num_threads(n: int) -> None:
    """Sets how many threads decode and encode (one pool per process).

    The default is the CPU count, or `ZARRPIPE_NUM_THREADS` when set. A process forked after
    reading builds a fresh pool.

    Args:
        n: The number of threads, at least 1.

    Raises:
        ValueError: `n` is 0.
    """

def get_num_threads() -> int:
    """How many threads decode and encode.

    Returns:
        The size of the pool.
    """

def _obstore_location(store: Any) -> tuple[str, dict[str, str]]:
    """The URL and object_store options zarrpipe opens for an obstore store object."""

def _output_array(nbytes: int) -> npt.NDArray[np.uint8] | None:
    """A writable, zeroed 1-d uint8 NumPy array of `nbytes` in memory zarrpipe keeps for the
    next read of its size once NumPy frees it (the pages of an earlier read's output, else
    fresh memory faulted in on the pool threads); None where NumPy's own allocation costs no
    more (under 32 MiB, or with kept outputs turned off by `ZARRPIPE_RECYCLE_BYTES=0`)."""

def _read_path_stats() -> dict[str, int]:
    """Which read paths this process has taken, as `{"direct_pick_boxes": n, "overlapped_reads":
    n}`: chunk boxes of picks decoded and gathered straight into place, and large zstd chunks
    whose file read overlapped their decoding."""

def _first_touch_stats() -> dict[str, Any]:
    """What faulting in fresh output buffers has cost this process, per page size ("base",
    "huge": dicts of 2 MiB steps, slow steps (memory the host had to fault in) and seconds),
    and "switches", how often the page size changed."""

def open(
    store: Store | str | os.PathLike[str],
    *,
    mode: Literal["r", "r+", "a", "w", "w-"] = "a",
    path: str = "",
    zarr_format: Literal[2, 3] | None = None,
    use_consolidated: bool | None = None,
    **kwargs: Any,
) -> Array | Group:
    """Opens the array or group at `path`, as `zarr.open` does.

    Opening never creates anything on disk or in a bucket in modes "r", "r+" and "a".

    Args:
        store: A `Store`, a local path or an object store URL.
        mode: `"r"` and `"r+"`: what is at `path` must exist (read-only / read-write);
            `"a"`: a missing path gives an empty `Group` that its first write (an attribute,
            a member) creates; `"w"`: deletes what is at `path`, then creates; `"w-"`:
            FileExistsError if anything is at `path`, then creates.
        path: The node's path in the store (`""`: the root).
        zarr_format: The format of what is created (default 3).
        use_consolidated: As in `Store.open_group`.
        **kwargs: `Store`'s keyword arguments (`options`, `cache_bytes`, `timeout`, ...)
            when `store` is a location; `shape`, `dtype` and `Store.create_array`'s other
            arguments to create an array where `"w"`, `"w-"` or `"a"` create.

    Returns:
        An `Array` or a `Group`.

    Raises:
        FileNotFoundError: Nothing at `path` with `mode="r"` or `"r+"`.
        FileExistsError: Something at `path` with `mode="w-"`.
        TypeError: Array arguments without `shape`.
    """
