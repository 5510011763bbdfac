"""Write Zarr test stores with zarr-python and compare zarrpipe's reads with zarr-python's.

zarr-python is the reference: every expected value in the read tests comes from reading the store
back with zarr-python (`reference()`), never from the data we meant to write.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import zarr
import zarrpipe

# Python warns when a process with threads forks (DataLoader and multiprocessing workers in
# the tests do, on purpose).
FORK_WARNING = "ignore:This process .* is multi-threaded, use of fork():DeprecationWarning"

ALL_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]  # fmt: skip

# Warnings zarr-python emits for valid stores we write on purpose (a sharding codec followed by
# other codecs, v2 / numcodecs codecs outside the v3 spec). Ignored around our writes only.
_WRITE_WARNINGS = [
    r"Combining a `sharding_indexed` codec",
    r".*not in the Zarr version 3 specification",
    r".*Zarr format 2",
    r".*zarr_format=2",
    r".*consolidated",
    r"The data type .* does not have a Zarr V3 specification",
]


@contextlib.contextmanager
def quiet_zarr_writes() -> Iterator[None]:
    """Ignores the specific zarr-python warnings that writing unusual (but valid) stores emits."""
    with warnings.catch_warnings():
        for pattern in _WRITE_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        yield


# ---------------------------------------------------------------------------------------------
# values


def special_values(dtype: np.dtype) -> list[Any]:
    """The extremes of a dtype: min/max, zero, and for floats NaN, ±inf, -0.0, the tiniest."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return [True, False]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        extra = [-1] if dtype.kind == "i" else []
        return [info.min, info.max, 0, 1, *extra]
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return [
            np.nan, np.inf, -np.inf, -0.0, 0.0, info.max, info.min,
            info.smallest_subnormal, -info.smallest_normal, 1.0,
        ]  # fmt: skip
    real = special_values(np.dtype(f"f{dtype.itemsize // 2}"))
    return [complex(r, i) for r, i in zip(real, real[3:] + real[:3], strict=True)] + [
        complex(np.nan, 1.0),
        complex(-0.0, np.inf),
    ]


def sample_values(dtype: Any, shape: Sequence[int], seed: int = 0) -> np.ndarray:
    """Distinct pseudo-random values of `dtype`, with the dtype's extremes spread over the array.

    The array is in native byte order; callers cast it to the stored order if they want.
    """
    dtype = np.dtype(dtype).newbyteorder("=")
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "b":
        flat = rng.integers(0, 2, size).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    elif dtype.kind == "f":
        flat = (rng.standard_normal(size) * 1000).astype(dtype)
    else:
        flat = (rng.standard_normal(size) * 1000 + 1j * rng.standard_normal(size) * 1000).astype(
            dtype
        )
    flat = flat.astype(dtype)
    specials = special_values(dtype)
    # every other element is an extreme, cycling through them, so that every chunk holds some
    with np.errstate(over="ignore", invalid="ignore"):
        for k, pos in enumerate(range(0, size, 2)):
            flat[pos] = specials[k % len(specials)]
    return flat.reshape(shape)


# ---------------------------------------------------------------------------------------------
# writing


def chunk_slices(shape: Sequence[int], chunks: Sequence[int], index: Sequence[int]) -> tuple:
    """The region of chunk `index` of a regular grid, trimmed to the array's bounds."""
    return tuple(
        slice(i * c, min((i + 1) * c, s)) for s, c, i in zip(shape, chunks, index, strict=True)
    )


def grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))


def all_chunk_indices(shape: Sequence[int], chunks: Sequence[int]) -> list[tuple[int, ...]]:
    return list(np.ndindex(*grid_shape(shape, chunks)))


def keep_chunk(index: Sequence[int]) -> bool:
    """The default "which chunks exist" pattern for partly written arrays: about 2 in 3."""
    return sum(index) % 3 != 1


def write_array(
    root: os.PathLike | str,
    data: np.ndarray,
    *,
    path: str = "",
    chunks: Sequence[int],
    shards: Sequence[int] | None = None,
    missing: str = "none",
    keep: Callable[[tuple[int, ...]], bool] = keep_chunk,
    write_grid: Sequence[int] | None = None,
    skip_first: Sequence[int] | None = None,
    **kwargs: Any,
) -> zarr.Array:
    """Creates an array with zarr-python and writes `data` into it.

    missing:
      - "none": everything is written;
      - "never": only the metadata is written (every chunk is missing);
      - "partial": only the chunks of the `chunks` grid (inner chunks for sharded arrays) for which
        `keep(index)` holds are written, chunk by chunk; for sharded arrays the first shard is
        left out entirely as well, so there are missing shards and shards missing inner chunks;
      - "deleted": everything is written, then the stored chunk (shard) files for which
        `keep(index)` fails are deleted from disk.
    write_grid / skip_first: for a sharding codec given explicitly as `serializer` (where
    `chunks` is the shard shape), the inner chunk shape to write by and the shard shape whose
    first shard "partial" leaves out.
    Other keyword arguments go to `zarr.create_array` (zarr_format, compressors, serializer,
    filters, fill_value, order, attributes, dimension_names, chunk_key_encoding...).
    """
    with quiet_zarr_writes():
        z = zarr.create_array(
            store=os.fspath(root),
            name=path or None,
            shape=data.shape,
            dtype=kwargs.pop("dtype", data.dtype),
            chunks=tuple(chunks),
            shards=tuple(shards) if shards is not None else None,
            **kwargs,
        )
        if missing == "none":
            z[...] = data
        elif missing == "never":
            pass
        elif missing == "partial":
            grid = tuple(write_grid) if write_grid is not None else tuple(chunks)
            first = shards if shards is not None else skip_first
            for index in all_chunk_indices(data.shape, grid):
                region = chunk_slices(data.shape, grid, index)
                in_first_shard = first is not None and all(
                    r.start < s for r, s in zip(region, first, strict=True)
                )
                if keep(index) and not in_first_shard:
                    z[region] = data[region]
        elif missing == "deleted":
            z[...] = data
            storage_chunks = tuple(shards) if shards is not None else tuple(chunks)
            for index in all_chunk_indices(data.shape, storage_chunks):
                if not keep(index):
                    delete_chunk(root, path, z, index)
        else:
            raise ValueError(missing)
    return z


def chunk_file(root: os.PathLike | str, path: str, z: zarr.Array, index: Sequence[int]) -> str:
    """The file of the stored chunk (shard) at `index`, by zarr-python's own key encoding."""
    key = z.metadata.encode_chunk_key(tuple(index))
    return os.path.join(os.fspath(root), *(path.split("/") if path else []), *key.split("/"))


def delete_chunk(root: os.PathLike | str, path: str, z: zarr.Array, index: Sequence[int]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(chunk_file(root, path, z, index))


def reference(root: os.PathLike | str, path: str = "") -> tuple[zarr.Array, np.ndarray]:
    """The array as zarr-python reads it from disk (a fresh open, so nothing is cached)."""
    with quiet_zarr_writes():
        z = zarr.open_array(store=os.fspath(root), path=path, mode="r")
        return z, np.asarray(z[...])


# ---------------------------------------------------------------------------------------------
# comparing


def native(dtype: Any) -> np.dtype:
    return np.dtype(dtype).newbyteorder("=")


def assert_values(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Same shape, same (native) dtype, same values: NaN equals NaN, -0.0 differs from 0.0."""
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == native(expected.dtype), (
        f"{what}: dtype {actual.dtype} != {native(expected.dtype)}"
    )
    if expected.dtype.kind == "c":  # NaN-aware per part: nan+1j must not equal nan+2j
        np.testing.assert_array_equal(actual.real, expected.real, err_msg=f"{what} (real)")
        np.testing.assert_array_equal(actual.imag, expected.imag, err_msg=f"{what} (imag)")
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    if expected.dtype.kind in "fc":
        for part in (np.real, np.imag) if expected.dtype.kind == "c" else (np.asarray,):
            np.testing.assert_array_equal(
                np.signbit(part(actual)) | np.isnan(part(actual)),
                np.signbit(part(expected)) | np.isnan(part(expected)),
                err_msg=f"{what}: signs of zeros/values differ",
            )


def assert_tensor(tensor: Any, expected: np.ndarray, what: str = "") -> None:
    """Checks a read's result: a Tensor (`read`, `read_chunk`, `Store.read`) through its
    read-only NumPy face, or what indexing gives (`arr[...]`, `oindex`, `vindex`, `blocks`):
    a writable NumPy array that owns the read's memory, or a NumPy scalar. Shape, dtype and
    values as expected."""
    expected = np.asarray(expected)
    if isinstance(tensor, np.ndarray | np.generic):
        assert_indexed(tensor, expected, what)
        return
    assert isinstance(tensor, zarrpipe.Tensor), f"{what}: got {type(tensor)}"
    assert tuple(tensor.shape) == expected.shape, f"{what}: {tensor.shape} != {expected.shape}"
    assert tensor.dtype == native(expected.dtype), f"{what}: {tensor.dtype} != {expected.dtype}"
    assert_values(tensor.to_numpy(), expected, what)


def assert_indexed(got: Any, expected: np.ndarray, what: str = "") -> None:
    """What indexing gives: a writable NumPy array over the read's own buffer (no copy was
    made: its base is the memory the read allocated), or a NumPy scalar of one element."""
    expected = np.asarray(expected)
    if isinstance(got, np.generic):
        assert expected.shape == (), f"{what}: a scalar for a selection of shape {expected.shape}"
        got = np.asarray(got)
    else:
        assert isinstance(got, np.ndarray), f"{what}: got {type(got)}"
        assert got.flags.writeable, f"{what}: indexing gave a read-only array"
        if got.dtype.kind not in "OT":  # variable-length results are NumPy's own arrays
            assert type(got.base).__name__ == "_ArrayMemory", f"{what}: base {type(got.base)}"
    assert got.shape == expected.shape, f"{what}: {got.shape} != {expected.shape}"
    assert got.dtype == native(expected.dtype), f"{what}: {got.dtype} != {expected.dtype}"
    assert_values(got, expected, what)


def assert_moves_out(tensor: zarrpipe.Tensor, expected: np.ndarray, what: str = "") -> None:
    """A fresh read is unique: `into_dlpack()` succeeds and gives a writable, equal array
    (indexing, `arr[...]`, already made that move and gave the array)."""
    expected = np.asarray(expected)
    if isinstance(tensor, np.ndarray | np.generic):
        assert_indexed(tensor, expected, what)
        out = np.asarray(tensor)
    else:
        out = np.from_dlpack(tensor.into_dlpack())
    assert out.flags.writeable, f"{what}: into_dlpack() result is not writable"
    assert_values(out, expected, what)
    if out.size:
        out.reshape(-1)[0] = out.reshape(-1)[-1]  # really writable


def assert_fill_value(arr: zarrpipe.Array, z: zarr.Array) -> None:
    """`arr.fill_value` is a numpy scalar of the array's (native) dtype equal to zarr-python's
    (NaN equals NaN, -0.0 differs from 0.0), or None where zarr-python's is (v2 null)."""
    fv = arr.fill_value
    if z.fill_value is None:
        assert fv is None, f"fill_value {fv!r} where zarr-python has None"
        return
    assert isinstance(fv, np.generic), f"fill_value is a {type(fv)}, not a numpy scalar"
    dtype = native(arr.dtype)
    assert fv.dtype == dtype, f"fill_value dtype {fv.dtype} != {dtype}"
    want = np.asarray(z.fill_value if z.fill_value is not None else 0).astype(dtype)
    assert_values(np.asarray(fv), want, "fill_value")


# ---------------------------------------------------------------------------------------------
# selections


def random_selection(rng: np.random.Generator, shape: Sequence[int]) -> tuple:
    """A random zarrpipe selection (NumPy semantics): ints, negative ints, slices with None,
    negative and out-of-range bounds, empty slices, and sometimes an Ellipsis standing for a run
    of axes (anywhere), or trailing axes left out."""
    items: list[Any] = []
    for n in shape:
        kind = rng.integers(0, 10)  # 7..9: a non-empty slice
        if kind == 0 and n:
            items.append(int(rng.integers(0, n)))
        elif kind == 1 and n:
            items.append(-int(rng.integers(1, n + 1)))
        elif kind == 2:
            items.append(slice(None))
        elif kind == 3:
            items.append(slice(int(rng.integers(-n - 3, n + 3)), None))
        elif kind == 4:
            items.append(slice(None, int(rng.integers(-n - 3, n + 3))))
        elif kind == 5:
            lo = int(rng.integers(-n - 2, n + 2))
            items.append(slice(lo, lo + int(rng.integers(0, n + 3))))
        elif kind == 6:
            lo = int(rng.integers(0, n + 1))
            items.append(slice(lo, lo))  # empty
        else:
            a, b = sorted(int(v) for v in rng.integers(0, n + 1, 2))
            items.append(slice(a, b + 1))
    how = rng.integers(0, 3)
    if how == 1:  # an Ellipsis replaces axes i..j (possibly none)
        i = int(rng.integers(0, len(items) + 1))
        j = int(rng.integers(i, len(items) + 1))
        items[i:j] = [Ellipsis]
    elif how == 2:  # trailing axes left out
        items = items[: int(rng.integers(0, len(items) + 1))]
    return tuple(items)


def random_selections(seed: int, shape: Sequence[int], n: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [random_selection(rng, shape) for _ in range(n)]


def interesting_selections(shape: Sequence[int]) -> list[Any]:
    """Hand-picked selections for an N-d array (N >= 1) of positive extent in every axis."""
    ndim = len(shape)
    first = shape[0]
    sels: list[Any] = [
        Ellipsis,
        (),
        (Ellipsis,),
        slice(None),
        0,
        -1,
        first - 1,
        -first,
        slice(-1, None),
        slice(None, -1),
        slice(-first - 5, first + 5),
        slice(first + 2, first + 9),  # empty, past the end
        slice(2, 1),  # empty, stop < start
        slice(1, 1),
        slice(1, None, 1),
        slice(None, None, None),
        (Ellipsis, 0),
        (Ellipsis, -1),
        (0, Ellipsis),
        (Ellipsis, slice(1, -1)),
        tuple(-1 for _ in shape),
        tuple(0 for _ in shape),
        tuple(slice(1, None) for _ in shape),
        tuple(slice(0, 0) for _ in shape),
        tuple(slice(None, -1) for _ in shape),
    ]
    if ndim >= 2:
        sels += [
            (slice(None), 1),
            (slice(None), -2),
            (1, Ellipsis, 2),
            (-1, Ellipsis, slice(-3, None)),
            (slice(1, 3), Ellipsis),
            (Ellipsis, slice(-100, 2), slice(None)),
            (0, slice(0, 0)),
        ]
    if ndim >= 3:
        sels += [(1, Ellipsis, slice(2, 4), 0), (slice(None), Ellipsis, -1, slice(None))]
    return sels


# ---------------------------------------------------------------------------------------------
# the full battery of reads


def check_reads(
    root: os.PathLike | str,
    path: str,
    expected: np.ndarray,
    *,
    seed: int = 0,
    n_random: int = 4,
    every_chunk: bool = True,
    moves: bool = True,
) -> zarrpipe.Array:
    """Reads the array with zarrpipe every way: whole, random sub-selections, per chunk, and
    checks each against `expected` (zarr-python's read); `into_dlpack()` on the fresh reads."""
    store = zarrpipe.Store(os.fspath(root))
    arr = store.open_array(path)
    assert tuple(arr.shape) == expected.shape
    assert arr.dtype == native(expected.dtype)
    assert arr.ndim == expected.ndim
    assert arr.size == expected.size
    assert arr.nbytes == expected.nbytes
    with quiet_zarr_writes():
        z = zarr.open_array(store=os.fspath(root), path=path, mode="r")
    assert_fill_value(arr, z)

    # whole array, every door
    assert_tensor(arr[...], expected, "arr[...]")
    assert_values(np.asarray(arr[...]), expected, "np.asarray(arr[...])")
    assert_tensor(arr.read(), expected, "arr.read()")
    assert_tensor(store.read(path), expected, "store.read(path)")
    assert_tensor(store.read(path, ()), expected, "store.read(path, ())")
    if moves:
        assert_moves_out(arr[...], expected, "arr[...].into_dlpack()")
        assert_moves_out(store.read(path), expected, "store.read(path).into_dlpack()")

    # random sub-selections
    for k, sel in enumerate(random_selections(seed, expected.shape, n_random)):
        want = np.asarray(expected[sel])
        assert_tensor(arr[sel], want, f"arr[{sel!r}]")
        if moves and k % 2 == 0:
            assert_moves_out(store.read(path, sel), want, f"store.read(path, {sel!r})")

    # per chunk of the `chunks` grid
    chunks = tuple(arr.chunks)
    assert tuple(arr.chunk_grid_shape) == grid_shape(expected.shape, chunks)
    if every_chunk:
        indices = all_chunk_indices(expected.shape, chunks)
        tensors = arr.read_chunks(indices)
        assert len(tensors) == len(indices)
        for index, t in zip(indices, tensors, strict=True):
            want = expected[chunk_slices(expected.shape, chunks, index)]
            assert_tensor(t, want, f"read_chunks {index}")
            if moves:
                assert_moves_out(t, want, f"read_chunks {index} into_dlpack")
        if indices:
            for index in {indices[0], indices[-1], indices[len(indices) // 2]}:
                want = expected[chunk_slices(expected.shape, chunks, index)]
                t = arr.read_chunk(index)
                assert_tensor(t, want, f"read_chunk {index}")
                if moves:
                    assert_moves_out(t, want, f"read_chunk {index} into_dlpack")
            (t,) = store.read_chunks(path, [indices[-1]])
            assert_tensor(t, expected[chunk_slices(expected.shape, chunks, indices[-1])])
    return arr


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Runs a block with `n` decoding threads, restoring the previous count afterwards."""
    before = zarrpipe.get_num_threads()
    zarrpipe.set_num_threads(n)
    try:
        yield
    finally:
        zarrpipe.set_num_threads(before)
