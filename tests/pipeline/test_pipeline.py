"""`zarrpipe.CodecPipeline` inside zarr-python: every value written or read through it must equal
what zarr-python's own pipeline (BatchedCodecPipeline) writes or reads for the same data, over
local, memory and fsspec stores; unsupported arrays and selections fall back to zarr-python's
pipeline; bad input raises what zarr-python raises (corrupt chunks raise zarrpipe.DecodeError)."""

from __future__ import annotations

import contextlib
import importlib.util
import lzma
import os
import pickle
import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import (
    ALL_DTYPES,
    assert_values,
    interesting_selections,
    quiet_zarr_writes,
    sample_values,
)
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import FsspecStore, LocalStore, MemoryStore

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}

STORE_KINDS = ["local", "memory"]
if importlib.util.find_spec("fsspec") is not None:
    STORE_KINDS += ["fsspec-local", "fsspec-memory"]


# ---------------------------------------------------------------------------------------------
# helpers


@pytest.fixture
def ours() -> Iterator[None]:
    """zarrpipe's pipeline for every array created or opened in the test (restored after)."""
    before = zarr.config.get("codec_pipeline.path")
    with zarr.config.set(OURS):
        yield
    assert zarr.config.get("codec_pipeline.path") == before


@contextlib.contextmanager
def default_pipeline() -> Iterator[None]:
    with zarr.config.set(DEFAULT):
        yield


def is_ours(a: zarr.Array) -> bool:
    pipeline = a._async_array.codec_pipeline
    return type(pipeline).__name__ == "CodecPipeline" and type(pipeline).__module__ == "zarrpipe"


async def _collect(store: Any) -> list[str]:
    return [key async for key in store.list()]


class Location:
    """One place to keep arrays, reopenable as a fresh store object, so that each pipeline
    (which zarr-python picks when an array is opened) gets its own `zarr.Array`."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        name = uuid.uuid4().hex
        self.root = tmp_path / f"store-{name}"
        self.mapping: dict[str, Any] = {}
        if kind == "fsspec-local":
            self.url = self.root.as_uri()
        elif kind == "fsspec-memory":
            self.url = f"memory://zarrpipe-test-{name}"

    def store(self, read_only: bool = False) -> Any:
        if self.kind == "local":
            return LocalStore(self.root, read_only=read_only)
        if self.kind == "memory":
            return MemoryStore(self.mapping, read_only=read_only)
        return FsspecStore.from_url(
            self.url, read_only=read_only, storage_options={"auto_mkdir": True}
        )

    def keys(self) -> set[str]:
        """Every key in the store (metadata and chunks)."""
        return set(sync(_collect(self.store(read_only=True))))

    def chunk_keys(self) -> set[str]:
        return {k for k in self.keys() if os.path.basename(k) not in METADATA_KEYS}

    def cleanup(self) -> None:
        if self.kind == "fsspec-memory":
            import fsspec

            fs = fsspec.filesystem("memory")
            path = self.url.removeprefix("memory://")
            if fs.exists(path):
                fs.rm(path, recursive=True)


METADATA_KEYS = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}


@pytest.fixture(params=STORE_KINDS)
def new_location(request, tmp_path) -> Iterator[Callable[[], Location]]:
    """A factory of fresh locations of one store kind (every kind, unless a test narrows it
    with `by_store_kind`)."""
    made: list[Location] = []

    def make() -> Location:
        loc = Location(request.param, tmp_path)
        made.append(loc)
        return loc

    yield make
    for loc in made:
        loc.cleanup()


@pytest.fixture
def loc(new_location) -> Location:
    return new_location()


def by_store_kind(params: list[Any], fsspec_too: list[Any]) -> Any:
    """Parametrizes `new_location` and the test's parameters: every parameter for the local
    and memory stores; only `fsspec_too` for the (slower, Python-side) fsspec stores."""
    out = []
    for kind in STORE_KINDS:
        for param in params:
            if kind.startswith("fsspec") and param not in fsspec_too:
                continue
            values = param if isinstance(param, tuple) else (param,)
            ident = "-".join(str(v) for v in values)
            out.append(pytest.param(kind, *values, id=f"{kind}-{ident}"))
    return out


def create(loc: Location, pipeline: dict[str, str], **kwargs: Any) -> zarr.Array:
    """Creates an array at `loc` with the given pipeline (the array keeps it)."""
    with zarr.config.set(pipeline), quiet_zarr_writes():
        a = zarr.create_array(loc.store(), **kwargs)
    assert is_ours(a) == (pipeline is OURS)
    return a


def reopen(loc: Location, pipeline: dict[str, str], mode: str = "r", **kwargs: Any) -> zarr.Array:
    """A fresh `zarr.Array` on the array at `loc` (nothing cached), with the given pipeline."""
    with zarr.config.set(pipeline), quiet_zarr_writes():
        a = zarr.open_array(loc.store(read_only=mode == "r"), mode=mode, **kwargs)
    assert is_ours(a) == (pipeline is OURS)
    return a


def values(a: zarr.Array, selection: Any = Ellipsis) -> np.ndarray:
    return np.asarray(a[selection])


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("raised", exception type): to compare both pipelines on odd input."""
    try:
        return "ok", fn()
    except Exception as e:
        return "raised", type(e)


def fill_for(dtype: Any) -> Any:
    kind = np.dtype(dtype).kind
    return {"b": True, "i": -3, "u": 3, "f": np.nan, "c": complex(1.5, -2.0)}[kind]


# ---------------------------------------------------------------------------------------------
# the round-trip matrix

SHAPE, CHUNKS, SHARDS = (13, 11), (4, 5), (8, 10)

# id -> (dtype, create_array keyword arguments)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "v3-zstd-i2": ("int16", dict(compressors=[ZstdCodec(level=1)])),
    "v3-zstd-checksum-f4": ("float32", dict(compressors=[ZstdCodec(level=3, checksum=True)])),
    "v3-blosc-f4": (
        "float32",
        dict(compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
    ),
    "v3-blosc-bitshuffle-u8": (
        "uint64",
        dict(compressors=[BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")]),
    ),
    "v3-gzip-c16": ("complex128", dict(compressors=[GzipCodec(level=1)])),
    "v3-crc32c-u8": ("uint64", dict(compressors=[Crc32cCodec()])),
    "v3-zstd-crc32c-i4": ("int32", dict(compressors=[ZstdCodec(), Crc32cCodec()])),
    "v3-raw-f8": ("float64", dict(compressors=None)),
    "v3-big-endian-f8": (
        "float64",
        dict(serializer=BytesCodec(endian="big"), compressors=[ZstdCodec()]),
    ),
    "v3-transpose-i8": ("int64", dict(filters=[TransposeCodec(order=(1, 0))])),
    "v3-memory-order-F-f8": ("float64", dict(config={"order": "F"})),
    "v3-nested-path-u1": ("uint8", dict(name="group/sub/arr")),
    "v3-sharded-i4": ("int32", dict(shards=SHARDS, compressors=[ZstdCodec()])),
    "v3-sharded-crc32c-f8": (
        "float64",
        dict(shards=SHARDS, compressors=[GzipCodec(), Crc32cCodec()]),
    ),
    "v3-sharded-index-start-c8": (
        "complex64",
        dict(
            chunks=SHARDS,
            serializer=ShardingCodec(
                chunk_shape=CHUNKS,
                codecs=[BytesCodec(), ZstdCodec()],
                index_location="start",
            ),
            compressors=None,
        ),
    ),
    "v2-raw-i2": ("int16", dict(zarr_format=2, compressors=None)),
    "v2-zstd-f8": ("float64", dict(zarr_format=2, compressors=numcodecs.Zstd(level=1))),
    "v2-blosc-i4": (
        "int32",
        dict(zarr_format=2, compressors=numcodecs.Blosc(cname="lz4", shuffle=1)),
    ),
    "v2-gzip-bool": ("bool", dict(zarr_format=2, compressors=numcodecs.GZip(level=1))),
    "v2-zlib-u2": ("uint16", dict(zarr_format=2, compressors=numcodecs.Zlib(level=1))),
    "v2-order-F-f4": (
        "float32",
        dict(zarr_format=2, order="F", compressors=numcodecs.Zstd()),
    ),
    "v2-order-F-c16": ("complex128", dict(zarr_format=2, order="F", compressors=None)),
    "v2-slash-separator-i8": (
        "int64",
        dict(zarr_format=2, chunk_key_encoding={"name": "v2", "separator": "/"}),
    ),
    "v2-nested-path-f8": ("float64", dict(zarr_format=2, name="g/arr")),
}


def case_kwargs(case: str, dtype: str | None = None) -> dict[str, Any]:
    case_dtype, kwargs = CASES[case]
    dtype = dtype or case_dtype
    out = dict(shape=SHAPE, chunks=CHUNKS, dtype=dtype, fill_value=fill_for(dtype))
    out.update(kwargs)
    return out


def case_data(kwargs: dict[str, Any], seed: int = 0) -> np.ndarray:
    """Distinct values with every stored chunk (shard) of the first block all fill value, and
    one more chunk all fill value: those chunks must not be stored."""
    dtype = np.dtype(kwargs["dtype"])
    data = sample_values(dtype, kwargs["shape"], seed=seed)
    data[:8, :10] = kwargs["fill_value"]  # a whole shard (or four whole chunks)
    data[8:12, 0:5] = kwargs["fill_value"]  # one more inner chunk / chunk
    return data


def write_and_read_back(
    new_location: Callable[[], Location], kwargs: dict[str, Any], writer: dict[str, str]
) -> tuple[Location, np.ndarray]:
    data = case_data(kwargs)
    loc = new_location()
    a = create(loc, writer, **kwargs)
    a[...] = data
    assert_values(values(a), data, "read back through the writing array")
    return loc, data


def check_both_readers(loc: Location, data: np.ndarray, path: str | None) -> None:
    for reader in (OURS, DEFAULT):
        with zarr.config.set(reader), quiet_zarr_writes():
            a = zarr.open_array(loc.store(read_only=True), path=path or "", mode="r")
        assert is_ours(a) == (reader is OURS)
        what = "ours" if reader is OURS else "default"
        assert_values(values(a), data, f"{what}: a[...]")
        assert_values(values(a, (slice(2, 11), 3)), data[2:11, 3], f"{what}: a[2:11, 3]")
        assert_values(values(a, (-1, slice(-7, None))), data[-1, -7:], f"{what}: a[-1, -7:]")


FSSPEC_CASES = [
    "v3-zstd-i2",
    "v3-crc32c-u8",
    "v3-nested-path-u1",
    "v3-sharded-i4",
    "v2-order-F-f4",
    "v2-nested-path-f8",
]


@pytest.mark.parametrize("writer", ["ours", "default"])
@pytest.mark.parametrize(
    "new_location,case", by_store_kind(list(CASES), FSSPEC_CASES), indirect=["new_location"]
)
def test_round_trip(new_location, case, writer):
    """Written by one pipeline, read by both: same values; and both pipelines store the same
    chunk keys for the same data (all-fill chunks are left out by both)."""
    kwargs = case_kwargs(case)
    path = kwargs.get("name")
    first, other = (OURS, DEFAULT) if writer == "ours" else (DEFAULT, OURS)
    loc, data = write_and_read_back(new_location, kwargs, first)
    check_both_readers(loc, data, path)
    loc_other, _ = write_and_read_back(new_location, kwargs, other)
    assert loc.keys() == loc_other.keys()
    assert loc.chunk_keys(), "nothing was stored"


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    "new_location,dtype", by_store_kind(ALL_DTYPES, ["bool", "float16"]), indirect=["new_location"]
)
def test_round_trip_dtypes(new_location, dtype, fmt):
    kwargs = case_kwargs("v3-zstd-i2" if fmt == 3 else "v2-blosc-i4", dtype)
    loc, data = write_and_read_back(new_location, kwargs, OURS)
    check_both_readers(loc, data, None)
    loc_default, _ = write_and_read_back(new_location, kwargs, DEFAULT)
    assert loc.keys() == loc_default.keys()
    # and the other direction
    check_both_readers(loc_default, data, None)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(
    "dtype,fill",
    [
        ("float64", np.nan),
        ("float32", -0.0),
        ("float16", np.inf),
        ("complex128", complex(np.nan, np.nan)),
        ("complex64", complex(0, np.nan)),
        ("int64", np.iinfo(np.int64).min),
        ("uint64", np.iinfo(np.uint64).max),
        ("float64", None),
    ],
    ids=[
        "nan",
        "neg-zero",
        "inf",
        "complex-nan",
        "complex-half-nan",
        "int-min",
        "uint-max",
        "none",
    ],
)
@pytest.mark.parametrize("new_location", ["local", "memory"], indirect=True)
def test_fill_values(new_location, dtype, fill, fmt):
    """Missing chunks read as the fill value; a partly written chunk keeps it elsewhere."""
    locs = {}
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        a = create(
            loc, pipeline, shape=(9, 7), chunks=(4, 3), dtype=dtype, fill_value=fill,
            zarr_format=fmt,
        )  # fmt: skip
        a[1:3, 2:5] = 1
        a[8, 6] = 2
        locs["ours" if pipeline is OURS else "default"] = loc
    want = values(reopen(locs["default"], DEFAULT))
    for name, loc in locs.items():
        for reader in (OURS, DEFAULT):
            assert_values(values(reopen(loc, reader)), want, f"written by {name}")
    assert locs["ours"].keys() == locs["default"].keys()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_v2_null_fill_value(ours, dtype):
    """A v2 array with `"fill_value": null` (what xarray writes for variables without
    _FillValue) is handled by zarrpipe itself (no FallbackWarning) and reads missing chunks as
    zarr-python does (zeros)."""
    store = MemoryStore()
    with quiet_zarr_writes(), warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        a = zarr.create_array(
            store, shape=(7,), chunks=(3,), dtype=dtype, fill_value=None, zarr_format=2
        )
    assert a.metadata.fill_value is None
    assert is_ours(a)
    a[1:2] = 1
    got = values(a)
    with default_pipeline():
        want = values(zarr.open_array(store, mode="r"))
    assert_values(got, want, "null fill value")


# ---------------------------------------------------------------------------------------------
# selections


@pytest.mark.parametrize(
    "shape,chunks", [((13, 11), (4, 5)), ((6, 5, 7), (4, 2, 3)), ((10,), (3,))]
)
def test_basic_indexing(ours, loc, shape, chunks):
    """Ints, negative ints, slices, Ellipsis, empty selections: equal to NumPy and to the
    default pipeline, in strict mode (so none of them fell back)."""
    data = sample_values("float64", shape, seed=1)
    a = create(loc, OURS, shape=shape, chunks=chunks, dtype="float64", fill_value=np.nan)
    a[...] = data
    b = reopen(loc, DEFAULT)
    with zarr.config.set({"codec_pipeline.strict": True}):
        for sel in interesting_selections(shape):
            got = values(a, sel)
            assert_values(got, data[sel], f"a[{sel!r}]")
            assert_values(got, values(b, sel), f"a[{sel!r}] vs default")


def test_zero_d(ours, new_location):
    locs = []
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        a = create(loc, pipeline, shape=(), dtype="float32", fill_value=1.5)
        assert_values(values(a, ()), np.float32(1.5), "unwritten 0-d")
        a[()] = 5
        assert_values(values(a, ()), np.float32(5), "a[()]")
        a[...] = np.array(-2.25, dtype=">f4")
        assert_values(values(a, Ellipsis), np.float32(-2.25), "a[...]")
        locs.append(loc)
        for reader in (OURS, DEFAULT):
            assert_values(values(reopen(loc, reader)), np.float32(-2.25), "0-d reopened")
    assert locs[0].keys() == locs[1].keys()
    assert locs[0].chunk_keys()
    a = reopen(locs[0], OURS, mode="r+")
    a[()] = 1.5  # back to the fill value: the chunk goes away
    assert not locs[0].chunk_keys()
    assert_values(values(reopen(locs[0], DEFAULT)), np.float32(1.5), "0-d after fill")


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0)])
def test_zero_size_arrays(ours, loc, shape):
    a = create(loc, OURS, shape=shape, chunks=(2,) * len(shape), dtype="int32", fill_value=3)
    a[...] = np.zeros(shape, dtype="int32")
    assert_values(values(a), np.zeros(shape, dtype="int32"), "zero-size read")
    assert not loc.chunk_keys()


def test_empty_selections(ours, loc):
    data = sample_values("int32", (13, 11), seed=2)
    a = create(loc, OURS, shape=(13, 11), chunks=(4, 5), dtype="int32", fill_value=0)
    a[...] = data
    before = {k: sync(loc.store().get(k, default_buffer_prototype())) for k in loc.keys()}
    for sel in [np.s_[3:3], np.s_[5:2], np.s_[:, 0:0], np.s_[20:], np.s_[2, 4:4]]:
        assert_values(values(a, sel), data[sel], f"a[{sel!r}]")
        a[sel] = np.zeros(data[sel].shape, dtype="int32")
    after = {k: sync(loc.store().get(k, default_buffer_prototype())) for k in loc.keys()}
    assert before.keys() == after.keys()
    assert all(before[k].to_bytes() == after[k].to_bytes() for k in before)
    assert_values(values(reopen(loc, DEFAULT)), data, "unchanged by empty writes")


@pytest.mark.parametrize("sel", [np.s_[13], np.s_[-14], np.s_[0, 11], np.s_[1, 2, 3]])
def test_out_of_bounds_like_default(ours, loc, sel):
    a = create(loc, OURS, shape=(13, 11), chunks=(4, 5), dtype="int32", fill_value=0)
    b = reopen(loc, DEFAULT, mode="r+")
    got, want = outcome(lambda: a[sel]), outcome(lambda: b[sel])
    assert got[0] == want[0] == "raised"
    assert got[1] is want[1]
    got, want = outcome(lambda: a.__setitem__(sel, 1)), outcome(lambda: b.__setitem__(sel, 1))
    assert got[0] == want[0] == "raised"
    assert got[1] is want[1]


# ---------------------------------------------------------------------------------------------
# writes

WRITE_CASES = [
    "v3-zstd-i2",
    "v3-crc32c-u8",
    "v3-memory-order-F-f8",
    "v3-transpose-i8",
    "v3-sharded-i4",
    "v3-sharded-index-start-c8",
    "v2-order-F-f4",
    "v2-blosc-i4",
    "v3-big-endian-f8",
]


def write_ops(dtype: np.dtype, fill: Any) -> list[tuple[Any, Any]]:
    """A sequence of (selection, value) writes: partial chunks, broadcasting scalars, strided,
    transposed, Fortran-ordered and big-endian values."""
    big = sample_values(dtype, (26, 33), seed=7)
    block = sample_values(dtype, (3, 7), seed=8)
    be = sample_values(dtype, (3, 4), seed=9).astype(dtype.newbyteorder(">"))
    return [
        (Ellipsis, sample_values(dtype, SHAPE, seed=3)),
        (np.s_[1:4, 2:9], block),  # inside 4 chunks, none whole
        (5, sample_values(dtype, (11,), seed=4)),  # a row (int drops the axis)
        (np.s_[:, -2], sample_values(dtype, (13,), seed=5)),  # a column
        (np.s_[2:5], dtype.type(7)),  # scalar broadcast
        (np.s_[0, 0], dtype.type(1)),
        (np.s_[6, 3:4], np.array(dtype.type(1))),  # 0-d value broadcast
        (np.s_[-3:, -4:], np.asfortranarray(sample_values(dtype, (3, 4), seed=6))),
        (np.s_[3:10, 1:8], big[::3, ::4][:7, :7]),  # non-contiguous
        (np.s_[6:9, 2:6], be),  # big-endian
        (np.s_[0:11, 0:10], big[:10, :11].T),  # transposed view
        (np.s_[4:8, 0:5], np.full((4, 5), fill, dtype=dtype)),  # a whole chunk back to fill
        (np.s_[9:13, 5:10], np.full((4, 5), fill, dtype=dtype)),
        (np.s_[0:2, 0:3], np.full((2, 3), fill, dtype=dtype)),
        (np.s_[7:12, :], np.broadcast_to(big[0, :11], (5, 11))),  # zero strides
        (np.s_[1:6, 3:9], read_only(sample_values(dtype, (5, 6), seed=10))),
    ]


def read_only(x: np.ndarray) -> np.ndarray:
    x.flags.writeable = False
    return x


@pytest.mark.parametrize(
    "new_location,case",
    by_store_kind(WRITE_CASES, ["v3-sharded-i4", "v2-order-F-f4"]),
    indirect=["new_location"],
)
def test_partial_writes(new_location, case):
    """Read-modify-write of partial chunks and odd values, against a NumPy mirror, the default
    pipeline doing the same writes, and the default pipeline reading ours back."""
    kwargs = case_kwargs(case)
    dtype = np.dtype(kwargs["dtype"])
    mirror = np.full(SHAPE, kwargs["fill_value"], dtype=dtype)
    loc_ours, loc_default = new_location(), new_location()
    a = create(loc_ours, OURS, **kwargs)
    b = create(loc_default, DEFAULT, **kwargs)
    path = kwargs.get("name") or ""
    for k, (sel, value) in enumerate(write_ops(dtype, kwargs["fill_value"])):
        a[sel] = value
        b[sel] = value
        mirror[sel] = value
        what = f"after write {k} a[{sel!r}]"
        assert_values(values(a), mirror, what)
        with zarr.config.set(DEFAULT), quiet_zarr_writes():
            fresh = zarr.open_array(loc_ours.store(read_only=True), path=path, mode="r")
        assert_values(values(fresh), mirror, f"{what}, read by default")
        assert loc_ours.keys() == loc_default.keys(), what
    assert_values(values(b), mirror, "the default pipeline")


def test_write_value_kinds_like_default(ours, new_location):
    """Values zarr-python converts or rejects: same result (or same exception) either way."""
    attempts = [
        (np.s_[0:3, 0:4], np.arange(12, dtype="int64").reshape(3, 4)),  # int into float
        (np.s_[0:3, 0:4], np.arange(12).reshape(3, 4).tolist()),  # nested lists
        (np.s_[0:2, :], np.arange(11.0)),  # a row broadcast over two rows
        (np.s_[0:3, 0:4], np.ones((4, 3))),  # wrong shape
        (np.s_[0:3, 0:4], np.ones((3, 4), dtype="complex128")),  # complex into float
        (np.s_[1, 1], "1.5"),
        (np.s_[2, 2], np.float32(np.nan)),
        (np.s_[:, 0:1], np.ones((13, 1), dtype=">f4")),
    ]
    for sel, value in attempts:
        results = []
        for pipeline in (OURS, DEFAULT):
            loc = new_location()
            a = create(loc, pipeline, shape=SHAPE, chunks=CHUNKS, dtype="float64", fill_value=0)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=np.exceptions.ComplexWarning)
                result = outcome(lambda a=a, s=sel, v=value: a.__setitem__(s, v))
            results.append((result[0], result[1] if result[0] == "raised" else None))
            results[-1] += (values(reopen(loc, DEFAULT)),)
        (ours_kind, ours_exc, ours_vals), (def_kind, def_exc, def_vals) = results
        assert (ours_kind, ours_exc) == (def_kind, def_exc), f"a[{sel!r}] = {value!r}"
        assert_values(ours_vals, def_vals, f"a[{sel!r}] = {value!r}")


def test_out_buffers(ours, loc):
    """zarr-python's `out=`: strided, Fortran-ordered, reversed and offset buffers."""
    data = sample_values("float64", SHAPE, seed=16)
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="float64", fill_value=0)
    a[...] = data
    prototype = default_buffer_prototype()
    layouts = {
        "strided": lambda: np.zeros((26, 33))[::2, ::3],
        "fortran": lambda: np.asfortranarray(np.zeros(SHAPE)),
        "reversed": lambda: np.zeros(SHAPE)[::-1, ::-1],
        "offset": lambda: np.zeros((20, 20))[3:16, 4:15],
        "transposed": lambda: np.zeros(SHAPE[::-1]).T,
    }
    for name, make in layouts.items():
        buf = make()
        a.get_basic_selection(Ellipsis, out=prototype.nd_buffer.from_numpy_array(buf))
        assert_values(buf, data, f"out={name}")
        part = make()[2:7, 1:9]
        a.get_basic_selection(np.s_[3:8, 2:10], out=prototype.nd_buffer.from_numpy_array(part))
        assert_values(part, data[3:8, 2:10], f"out={name}, part")


def test_no_stale_reads(ours, loc):
    """Changes made through another array object (or process) show up in the next read."""
    data = sample_values("int32", SHAPE, seed=17)
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0)
    a[...] = data
    assert_values(values(a), data, "first read")
    other = reopen(loc, DEFAULT, mode="r+")
    other[2:9, 3:7] = -5
    other[8:12, 0:5] = 0  # a whole chunk deleted
    data[2:9, 3:7] = -5
    data[8:12, 0:5] = 0
    assert_values(values(a), data, "after another writer")
    a[0:3, 0:3] = 1  # read-modify-write sees the other writer's chunk too
    data[0:3, 0:3] = 1
    assert_values(values(other), data, "read by the other writer")


@pytest.mark.parametrize(
    "name", ["plain", "with space", "ünïcode"], ids=["plain", "space", "unicode"]
)
def test_relative_and_odd_paths(ours, tmp_path, monkeypatch, name):
    data = sample_values("uint16", SHAPE, seed=18)
    (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / name)
    with quiet_zarr_writes():
        group = zarr.open_group("rel.zarr", mode="w")
        a = group.create_array("x y", shape=SHAPE, chunks=CHUNKS, dtype="uint16", fill_value=0)
    assert is_ours(a)
    a[...] = data
    a[1:3, 1:3] = 9
    data[1:3, 1:3] = 9
    b = zarr.open_group("rel.zarr", mode="r")["x y"]
    assert is_ours(b)
    assert_values(values(b), data, "relative path, via a group")
    with default_pipeline():
        assert_values(values(zarr.open_array(str(tmp_path / name / "rel.zarr" / "x y"))), data, "")


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("new_location", ["local", "memory"], indirect=True)
def test_grow_after_write(ours, new_location, fmt):
    """Edge chunks are stored with the fill value past the array's edge, as zarr-python stores
    them: growing the array afterwards shows the fill value there."""
    results = []
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        a = create(
            loc, pipeline, shape=SHAPE, chunks=CHUNKS, dtype="float32", fill_value=-9,
            zarr_format=fmt,
        )  # fmt: skip
        a[...] = sample_values("float32", SHAPE, seed=20)
        a[10:13, 8:11] = 1.5  # a partial write into the corner chunk
        with zarr.config.set(pipeline):
            a.resize((16, 15))
        a = reopen(loc, pipeline)
        got = values(a)
        assert_values(got[13:, :], np.full((3, 15), -9, "float32"), "new rows")
        assert_values(got[:, 11:], np.full((16, 4), -9, "float32"), "new columns")
        results.append((got, values(reopen(loc, OURS)), values(reopen(loc, DEFAULT))))
    for got in (*results[0], *results[1]):
        assert_values(got, results[1][2], "after growing")


# ---------------------------------------------------------------------------------------------
# write_empty_chunks


EMPTY_CHUNK_CASES = [
    ("int32", 0, None),
    ("float64", np.nan, -np.nan),
    ("float32", 0.0, -0.0),  # zarr-python compares zeros bit for bit: -0.0 is stored
    ("float16", -0.0, 0.0),
    ("complex64", 1 + 1j, None),
    ("complex128", 0j, complex(-0.0, 0.0)),
    ("bool", False, None),
]


@pytest.mark.parametrize(
    "new_location,dtype,fill,other",
    by_store_kind(EMPTY_CHUNK_CASES, EMPTY_CHUNK_CASES[:2]),
    indirect=["new_location"],
)
def test_write_empty_chunks_false(ours, new_location, dtype, fill, other):
    """All-fill chunks are not stored (and stored ones are deleted when they become all fill),
    exactly as zarr-python's pipeline decides, chunk by chunk."""
    results = {}
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        a = create(loc, pipeline, shape=SHAPE, chunks=CHUNKS, dtype=dtype, fill_value=fill)
        a[...] = np.full(SHAPE, fill, dtype=dtype)
        assert not loc.chunk_keys(), "all-fill chunks were stored"
        a[...] = sample_values(dtype, SHAPE, seed=3)
        if dtype == "bool":
            a[...] = True
        assert len(loc.chunk_keys()) == 4 * 3
        a[0:4, 0:5] = fill  # one whole chunk
        a[4:6, 5:10] = fill  # part of a chunk ...
        a[6:8, 5:10] = fill  # ... and the rest of it
        a[12, 10] = fill  # the last (ragged) chunk: 1x1
        if other is not None:
            a[8:12, 0:5] = other  # a value equal to the fill value but not bit for bit
        gone = {a.metadata.encode_chunk_key(c) for c in [(0, 0), (1, 1), (3, 2)]}
        all_keys = {a.metadata.encode_chunk_key(c) for c in np.ndindex(4, 3)}
        assert loc.chunk_keys() & gone == set(), "chunks now all fill value are still stored"
        assert loc.chunk_keys() >= all_keys - gone - {a.metadata.encode_chunk_key((2, 0))}
        results[pipeline is OURS] = (loc.keys(), values(reopen(loc, DEFAULT)))
    assert results[True][0] == results[False][0]
    assert_values(results[True][1], results[False][1], "values")


@pytest.mark.parametrize("new_location", ["local", "memory"], indirect=True)
def test_write_empty_shards(ours, new_location):
    """A shard whose inner chunks all become fill value is deleted; one with some left stays."""
    results = []
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        a = create(
            loc, pipeline, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="int32", fill_value=0
        )
        a[...] = sample_values("int32", SHAPE, seed=19) | 1
        assert len(loc.chunk_keys()) == 4
        a[0:8, 0:5] = 0  # half of shard (0, 0) ...
        assert len(loc.chunk_keys()) == 4
        a[0:4, 5:10] = 0
        a[4:8, 5:10] = 0  # ... and the rest of it
        a[8:12, 0:5] = 0  # one inner chunk of shard (1, 0)
        assert a.metadata.encode_chunk_key((0, 0)) not in loc.chunk_keys()
        assert len(loc.chunk_keys()) == 3
        results.append((loc.keys(), values(reopen(loc, DEFAULT))))
    assert results[0][0] == results[1][0]
    assert_values(results[0][1], results[1][1], "values")


@pytest.mark.parametrize("how", ["create-config", "global-config", "with-config"])
def test_write_empty_chunks_true(ours, new_location, how):
    locs = []
    for pipeline in (OURS, DEFAULT):
        loc = new_location()
        with zarr.config.set({"array.write_empty_chunks": how == "global-config"}):
            config = {"write_empty_chunks": True} if how == "create-config" else None
            a = create(
                loc, pipeline, shape=SHAPE, chunks=CHUNKS, dtype="int16", fill_value=0,
                config=config,
            )  # fmt: skip
            if how == "with-config":
                with zarr.config.set(pipeline):
                    a = reopen(loc, pipeline, mode="r+").with_config({"write_empty_chunks": True})
                assert is_ours(a) == (pipeline is OURS)
            a[...] = 0
            a[0:2, 0:2] = 0
        assert len(loc.chunk_keys()) == 12, "all-fill chunks must be stored"
        locs.append(loc)
        assert_values(values(reopen(loc, OURS)), np.zeros(SHAPE, "int16"), "zeros")
    assert locs[0].keys() == locs[1].keys()


# ---------------------------------------------------------------------------------------------
# fallbacks


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
def test_fancy_indexing_natively(ours, loc, sharded):
    """Integer arrays, masks, coordinates and steps: decoded by zarrpipe (strict mode, which
    refuses any fallback), values equal to NumPy's and to the default pipeline's; writes too."""
    data = sample_values("float64", SHAPE, seed=11)
    layout = dict(chunks=(2, 5), shards=(4, 10)) if sharded else dict(chunks=CHUNKS)
    a = create(loc, OURS, shape=SHAPE, dtype="float64", fill_value=np.nan, **layout)
    with zarr.config.set({"codec_pipeline.strict": True}):
        _fancy_reads_and_writes(a, data, loc)


def _fancy_reads_and_writes(a: Any, data: np.ndarray, loc: Location) -> None:
    a[...] = data
    mirror = data.copy()
    rows, cols = [0, 5, 12], [1, 2, 10]
    mask = (np.arange(13 * 11).reshape(SHAPE) % 3) == 0
    assert_values(values(a.oindex, (rows, slice(None))), data[rows, :], "oindex rows")
    unsorted = [12, 0, 0, 5, -1]
    assert_values(values(a.oindex, (unsorted, 3)), data[unsorted, 3], "unsorted, repeats")
    none = np.array([], dtype=int)
    assert_values(values(a.oindex, (slice(None), none)), data[:, none], "empty selection")
    assert_values(values(a.oindex, (rows, cols)), data[np.ix_(rows, cols)], "oindex both")
    assert_values(values(a.oindex, (2, cols)), data[2, cols], "oindex int + list")
    assert_values(values(a.vindex, (rows, cols)), data[rows, cols], "vindex")
    assert_values(values(a.vindex, mask), data[mask], "vindex mask")
    assert_values(values(a, mask), data[mask], "a[mask]")
    assert_values(values(a, np.s_[::2]), data[::2], "a[::2]")
    assert_values(values(a, np.s_[1:12:3, ::4]), data[1:12:3, ::4], "steps")
    assert_values(values(a.oindex, (mask[:, 0], slice(None))), data[mask[:, 0]], "bool axis")
    assert_values(
        np.asarray(a.get_coordinate_selection((rows, cols))), data[rows, cols], "coordinates"
    )
    # writes
    a.oindex[[1, 3], :] = 5.0
    mirror[[1, 3], :] = 5.0
    a.vindex[rows, cols] = [1.0, 2.0, 3.0]
    mirror[rows, cols] = [1.0, 2.0, 3.0]
    a[::2] = -mirror[::2]
    mirror[::2] = -mirror[::2]
    a[mask] = -1.0
    mirror[mask] = -1.0
    assert_values(values(a), mirror, "after fancy writes")
    assert_values(values(reopen(loc, DEFAULT)), mirror, "after fancy writes, default")


def test_custom_codec_class_warns(tmp_path):
    """A codec class that is not zarr-python's own runs in zarr-python's pipeline, with a
    FallbackWarning naming it (never silently)."""
    from zarr.codecs import ZstdCodec

    class MyZstd(ZstdCodec):
        pass

    MyZstd.__module__ = "my_codecs"
    with pytest.warns(zarrpipe.FallbackWarning, match="my_codecs.*MyZstd"):
        a = create(Location("local", tmp_path), OURS, shape=(6,), chunks=(2,), dtype="i4",
                   compressors=[MyZstd()])  # fmt: skip
    a[...] = np.arange(6, dtype="i4")
    assert_values(values(a), np.arange(6, dtype="i4"), "custom codec class")


def test_local_store_moved(tmp_path):
    """`LocalStore.move`: reads and writes follow the store to its new root."""
    import asyncio

    store = asyncio.run(zarr.storage.LocalStore.open(root=tmp_path / "origin"))
    with zarr.config.set(OURS), quiet_zarr_writes():
        a = zarr.create_array(store, shape=(6, 4), chunks=(2, 2), dtype="i4", fill_value=0)
    assert is_ours(a)
    data = np.arange(24, dtype="i4").reshape(6, 4)
    a[...] = data
    asyncio.run(store.move(tmp_path / "moved"))
    assert not (tmp_path / "origin").exists()
    assert_values(values(a), data, "after the move")
    a[0:2, 0:2] = -1
    data[0:2, 0:2] = -1
    moved = zarr.open_array(zarr.storage.LocalStore(tmp_path / "moved"), mode="r")
    assert_values(values(moved), data, "written after the move, read by default")


def test_blocks_are_basic(ours, loc):
    data = sample_values("int32", SHAPE, seed=12)
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0)
    a[...] = data
    with zarr.config.set({"codec_pipeline.strict": True}):
        assert_values(np.asarray(a.blocks[1, 2]), data[4:8, 10:11], "blocks")
        a.blocks[3, 0] = 9
    data[12:, 0:5] = 9
    assert_values(values(reopen(loc, DEFAULT)), data, "after a block write")


# Data types that once fell back and are now read and written natively (no FallbackWarning,
# even in strict mode); tests/read/test_dtype_matrix.py covers them by codec.
NATIVE_NOW = [
    ("str", dict(dtype=str, fill_value=""), ["a", "bb", "", "dddd", "é"]),
    ("fixed-unicode", dict(dtype="<U4", fill_value=""), ["a", "bb", "", "dddd", "é"]),
    ("datetime", dict(dtype="M8[s]"), np.arange(1_000_000, 1_000_005).astype("M8[s]")),
    ("timedelta", dict(dtype="m8[ms]"), np.arange(5).astype("m8[ms]")),
    ("v2-big-endian", dict(dtype=">i4", zarr_format=2), np.arange(5, dtype=">i4") - 2),
]


@pytest.mark.parametrize("name,kwargs,data", NATIVE_NOW, ids=[u[0] for u in NATIVE_NOW])
def test_former_fallback_dtypes_are_native(ours, loc, name, kwargs, data):
    with warnings.catch_warnings(), zarr.config.set({"codec_pipeline.strict": True}):
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        a = create(loc, OURS, shape=(5,), chunks=(2,), **kwargs)
        a[...] = data
        a[1:2] = data[3:4]
        b = reopen(loc, OURS)
        got, part = values(b), values(b, np.s_[2:4])
    want = np.asarray(data).copy()
    want[1] = want[3]
    assert np.array_equal(got, want)
    assert np.array_equal(part, want[2:4])
    assert np.array_equal(values(reopen(loc, DEFAULT)), want)


# numcodecs' lzma with a filter chain of its own (a raw stream: no header, the chain only in
# the codec configuration): zarrpipe builds the chain Python's lzma builds, so it reads and
# writes such arrays natively, chunk for chunk what numcodecs stores.
LZMA_FILTERS = [{"id": lzma.FILTER_DELTA, "dist": 8}, {"id": lzma.FILTER_LZMA2, "preset": 1}]
LZMA_RAW = dict(format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)


def numcodecs_v3(name: str, **config: Any) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        import numcodecs.zarr3

        return getattr(numcodecs.zarr3, name)(**config)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_lzma_with_custom_filters_is_native(ours, new_location, zarr_format):
    data = np.arange(10, dtype="f8") * 3
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in the Zarr version 3 specification")
        if zarr_format == 2:
            compressors: Any = numcodecs.LZMA(**LZMA_RAW)
        else:
            compressors = [numcodecs_v3("LZMA", **LZMA_RAW)]
        stored = {}
        for name, pipeline in (("ours", OURS), ("default", DEFAULT)):
            loc = new_location()
            with zarr.config.set({"codec_pipeline.strict": name == "ours"}):
                warnings.simplefilter("error", zarrpipe.FallbackWarning)
                a = create(loc, pipeline, shape=(10,), chunks=(4,), dtype="f8",
                           zarr_format=zarr_format, compressors=compressors)  # fmt: skip
                a[...] = data
                a[1:2] = data[5:6]
                store = loc.store(read_only=True)
                stored[name] = {
                    k: sync(store.get(k, default_buffer_prototype())).to_bytes()
                    for k in loc.chunk_keys()
                }
                b = reopen(loc, pipeline)
                want = data.copy()
                want[1] = want[5]
                assert_values(values(b), want, f"lzma with custom filters, {name}")
                assert_values(values(b, np.s_[2:7]), want[2:7], name)
    assert stored["ours"] == stored["default"], "chunks differ from numcodecs'"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_numcodecs_delta_natively(ours, loc, zarr_format):
    """numcodecs' delta (v2 id, v3 `numcodecs.delta`): zarrpipe encodes and decodes it
    (strict mode refuses any fallback), and zarr-python's default pipeline agrees."""
    data = np.arange(10, dtype="i4") ** 2
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in the Zarr version 3 specification")
        if zarr_format == 2:
            kwargs: dict[str, Any] = dict(zarr_format=2, filters=[numcodecs.Delta(dtype="i4")])
        else:
            kwargs = dict(filters=[numcodecs_v3("Delta", dtype="i4")])
        with zarr.config.set({"codec_pipeline.strict": True}):
            a = create(loc, OURS, shape=(10,), chunks=(4,), dtype="i4", **kwargs)
            a[...] = data
            a[3:6] = -1
            want = data.copy()
            want[3:6] = -1
            assert_values(values(reopen(loc, OURS)), want, "numcodecs delta, ours")
        assert_values(values(reopen(loc, DEFAULT)), want, "numcodecs delta, default")


# numcodecs codecs zarrpipe once left to zarr-python (issue 38): (name, dtype, v2 kwargs, v3
# kwargs, where the v3 codecs are numcodecs.zarr3 class names with their configuration).
NUMCODECS_NATIVE_NOW = [
    ("crc32", "i2", dict(compressors=numcodecs.CRC32()), dict(compressors=[("CRC32", {})])),
    (
        "crc32c",
        "f8",
        dict(compressors=numcodecs.CRC32C()),
        dict(compressors=[("CRC32C", {})]),
    ),
    (
        "jenkins_lookup3",
        "u4",
        dict(compressors=numcodecs.JenkinsLookup3(initval=9)),
        dict(compressors=[("JenkinsLookup3", {"initval": 9})]),
    ),
    ("lzma", "i8", dict(compressors=numcodecs.LZMA()), dict(compressors=[("LZMA", {})])),
    (
        "astype",
        "f8",
        dict(filters=[numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")]),
        dict(filters=[("AsType", {"encode_dtype": "<f4", "decode_dtype": "<f8"})]),
    ),
    (
        "quantize",
        "f4",
        dict(filters=[numcodecs.Quantize(digits=2, dtype="<f4")]),
        dict(filters=[("Quantize", {"digits": 2, "dtype": "<f4"})]),
    ),
]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize(
    "name,dtype,v2,v3", NUMCODECS_NATIVE_NOW, ids=[c[0] for c in NUMCODECS_NATIVE_NOW]
)
def test_numcodecs_codecs_natively(ours, loc, name, dtype, v2, v3, zarr_format):
    """numcodecs' crc32, crc32c, jenkins_lookup3, lzma, astype and quantize (v2 ids, v3
    `numcodecs.*`): zarrpipe encodes and decodes them with no fallback (strict mode, and
    FallbackWarning an error), and zarr-python's default pipeline reads the same values."""
    data = (np.arange(10) * 1.37 - 4).astype(dtype)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not in the Zarr version 3 specification")
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        if zarr_format == 2:
            kwargs: dict[str, Any] = dict(zarr_format=2, **v2)
        else:
            kwargs = {k: [numcodecs_v3(c, **cfg) for c, cfg in v] for k, v in v3.items()}
        with zarr.config.set({"codec_pipeline.strict": True}):
            a = create(loc, OURS, shape=(10,), chunks=(4,), dtype=dtype, **kwargs)
            a[...] = data
            a[3:6] = 2
            ours_read = values(reopen(loc, OURS))
    default_read = values(reopen(loc, DEFAULT))
    want = data.copy()
    want[3:6] = 2
    if name == "quantize":
        want = numcodecs.Quantize(digits=2, dtype="<f4").encode(want)
    if name == "astype":
        want = want.astype("<f4").astype("<f8")
    assert_values(default_read, want, f"numcodecs {name}, default")
    assert_values(ours_read, want, f"numcodecs {name}, ours")


def test_strict_mode(ours, loc, tmp_path):
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0)
    a[...] = 1
    with zarr.config.set({"codec_pipeline.strict": True}):
        # every selection kind is native, so strict mode reads and writes them
        assert_values(values(a.oindex, ([1, 3], slice(None))), np.ones((2, 11), "int32"), "oindex")
        assert_values(values(a, np.s_[::2]), np.ones((7, 11), "int32"), "steps")
        a[::2] = 5
        a.oindex[[1, 3], :] = 6
        # a codec class zarrpipe does not run is refused, not handed over
        with pytest.raises(zarrpipe.UnsupportedError, match="ForeignZstd"):
            create(Location(loc.kind, tmp_path), OURS, shape=(3,), dtype="f8",
                   compressors=[ForeignZstd()])  # fmt: skip
        assert issubclass(zarrpipe.UnsupportedError, zarrpipe.ZarrpipeError)
        a[1:3, -4:] = 7
        assert int(a[2, -1]) == 7
        want = np.ones(SHAPE, "int32")
        want[::2] = 5
        want[[1, 3], :] = 6
        want[1:3, -4:] = 7
        assert_values(values(a, np.s_[0, :]), want[0, :], "strict basic read")
        assert_values(values(reopen(loc, DEFAULT)), want, "strict writes, read by default")
    assert_values(values(a, np.s_[::2]), values(reopen(loc, DEFAULT), np.s_[::2]), "lenient")


# ---------------------------------------------------------------------------------------------
# read-only stores


# What zarr-python raises on a write to a store opened read-only.
READ_ONLY = "^store was opened in read-only mode and does not support writing$"


@pytest.mark.parametrize(
    "sel,value",
    [(Ellipsis, 1), (np.s_[1:3, 2:4], 1), (Ellipsis, 0), (np.s_[0:4, 0:5], 0)],
    ids=["full", "partial", "full-fill", "chunk-fill"],
)
def test_read_only_store_raises_like_default(ours, loc, sel, value):
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0)
    a[...] = 3
    before = loc.keys()
    for pipeline in (OURS, DEFAULT):
        with zarr.config.set(pipeline):
            ro = zarr.open_array(loc.store(read_only=True), mode="r")
        assert is_ours(ro) == (pipeline is OURS)
        # zarr-python's own error, whichever pipeline: exactly ValueError (not a subclass).
        with pytest.raises(ValueError, match=READ_ONLY) as info:
            ro[sel] = value
        assert info.type is ValueError
    assert loc.keys() == before
    assert_values(values(reopen(loc, DEFAULT)), np.full(SHAPE, 3, "int32"), "unchanged")


def test_read_only_by_path(ours, tmp_path):
    path = tmp_path / "ro.zarr"
    create_kwargs = dict(shape=SHAPE, chunks=CHUNKS, dtype="float32", fill_value=0)
    with quiet_zarr_writes():
        zarr.create_array(str(path), **create_kwargs)[...] = 2
    for pipeline in (OURS, DEFAULT):
        with zarr.config.set(pipeline):
            a = zarr.open_array(str(path), mode="r")
        assert is_ours(a) == (pipeline is OURS)
        with pytest.raises(ValueError, match=READ_ONLY) as info:
            a[:] = 1
        assert info.type is ValueError
    assert_values(values(zarr.open_array(str(path), mode="r")), np.full(SHAPE, 2, "f4"), "kept")


# ---------------------------------------------------------------------------------------------
# pickling


def test_pickle(ours, loc):
    data = sample_values("int32", SHAPE, seed=13)
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0)
    a[...] = data
    pipeline = a._async_array.codec_pipeline
    again = pickle.loads(pickle.dumps(pipeline))
    assert type(again) is type(pipeline)
    assert again == pipeline
    assert again.metadata == pipeline.metadata
    b = pickle.loads(pickle.dumps(a))
    assert is_ours(b)
    assert_values(values(b), data, "unpickled array")
    assert_values(values(b, np.s_[3:9, -3]), data[3:9, -3], "unpickled array, selection")
    b[0:2, 0:2] = -1  # writes through the unpickled pipeline
    data[0:2, 0:2] = -1
    assert_values(values(b), data, "unpickled array after a write")
    if loc.kind != "memory":  # an unpickled MemoryStore holds a copy of the contents
        assert_values(values(reopen(loc, DEFAULT)), data, "write by the unpickled array")


def test_pickle_nan_fill(ours, loc):
    """An unpickled pipeline of a NaN-filled array still reads missing chunks as NaN."""
    a = create(loc, OURS, shape=(10,), chunks=(4,), dtype="float32", fill_value=np.nan)
    a[0:3] = 1.0
    b = pickle.loads(pickle.dumps(a))
    want = np.full(10, np.nan, "float32")
    want[0:3] = 1.0
    assert_values(values(b), want, "NaN fill after unpickling")


@pytest.mark.parametrize("fmt", [2, 3])
def test_pickle_equal_nan_fill(ours, fmt):
    """Equal after a pickle round trip also when the fill value is NaN (zarr-python's default
    pipeline is; the usual fill value of float data written by xarray)."""
    a = create_memory(shape=(10,), chunks=(4,), dtype="float64", fill_value=np.nan, zarr_format=fmt)
    pipeline = a._async_array.codec_pipeline
    again = pickle.loads(pickle.dumps(pipeline))
    assert again == pipeline


def create_memory(**kwargs: Any) -> zarr.Array:
    with quiet_zarr_writes():
        a = zarr.create_array(MemoryStore(), **kwargs)
    assert is_ours(a)
    return a


class ForeignZstd(ZstdCodec):
    """A codec class of the user's own (at module level: it pickles): zarrpipe hands its
    arrays to zarr-python's pipeline."""


def test_pickle_fallback_pipeline(ours, loc):
    with pytest.warns(zarrpipe.FallbackWarning, match="ForeignZstd"):
        a = create(loc, OURS, shape=(4,), chunks=(2,), dtype="f8",
                   compressors=[ForeignZstd()])  # fmt: skip
    a[...] = [1.0, 2.5, 0.0, -4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", zarrpipe.FallbackWarning)
        b = pickle.loads(pickle.dumps(a))
    assert list(values(b)) == [1.0, 2.5, 0.0, -4.0]


def test_pickle_string_pipeline(ours, loc):
    with warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        a = create(loc, OURS, shape=(4,), chunks=(2,), dtype=str, fill_value="")
        a[...] = ["x", "yy", "", "z"]
        b = pickle.loads(pickle.dumps(a))
        assert list(values(b)) == ["x", "yy", "", "z"]


# ---------------------------------------------------------------------------------------------
# corrupt chunks


def corrupt(loc: Location, key: str, how: Callable[[bytes], bytes]) -> None:
    store = loc.store()
    raw = sync(store.get(key, default_buffer_prototype()))
    assert raw is not None, key
    sync(store.set(key, default_buffer_prototype().buffer.from_bytes(how(raw.to_bytes()))))


def flip(offset: int) -> Callable[[bytes], bytes]:
    def f(b: bytes) -> bytes:
        out = bytearray(b)
        out[offset] ^= 0xFF
        return bytes(out)

    return f


CORRUPTIONS = {
    "zstd-garbage": (dict(compressors=[ZstdCodec()]), flip(3), zarrpipe.DecodeError),
    "zstd-truncated": (dict(compressors=[ZstdCodec()]), lambda b: b[: len(b) // 2], None),
    "gzip-garbage": (dict(compressors=[GzipCodec()]), lambda b: b"not gzip" + b[8:], None),
    "crc32c-mismatch": (dict(compressors=[Crc32cCodec()]), flip(5), zarrpipe.ChecksumError),
    "raw-short": (dict(compressors=None), lambda b: b[:-2], None),
    "raw-long": (dict(compressors=None), lambda b: b + b"\0" * 8, None),
    "sharded-truncated": (dict(shards=(8, 10)), lambda b: b[:-5], None),
    "sharded-empty": (dict(shards=(8, 10)), lambda b: b"", None),
    "v2-blosc-garbage": (
        dict(zarr_format=2, compressors=numcodecs.Blosc()),
        lambda b: b"\x02\x01" + b[2:10] + b"\xff" * (len(b) - 10),
        None,
    ),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_chunk_raises(ours, loc, name):
    kwargs, how, exc = CORRUPTIONS[name]
    a = create(loc, OURS, shape=SHAPE, chunks=CHUNKS, dtype="int32", fill_value=0, **kwargs)
    a[...] = sample_values("int32", SHAPE, seed=14)
    key = a.metadata.encode_chunk_key((0, 0))
    corrupt(loc, key, how)
    b = reopen(loc, OURS, mode="r+")
    with pytest.raises(exc or zarrpipe.DecodeError):
        b[...]
    with pytest.raises(exc or zarrpipe.DecodeError):
        b[1, 2]
    # a partial write must read the chunk first: it fails too, and leaves the chunk alone
    before = sync(loc.store().get(key, default_buffer_prototype())).to_bytes()
    with pytest.raises(exc or zarrpipe.DecodeError):
        b[1:2, 1:2] = 5
    assert sync(loc.store().get(key, default_buffer_prototype())).to_bytes() == before
    # other chunks still read
    assert_values(
        values(b, np.s_[8:, :]), sample_values("int32", SHAPE, seed=14)[8:, :], "other chunks"
    )


# ---------------------------------------------------------------------------------------------
# identity of the pipeline; a large read


@pytest.mark.parametrize("fmt", [2, 3])
def test_pipeline_is_ours(ours, loc, fmt):
    a = create(loc, OURS, shape=(4,), chunks=(2,), dtype="uint8", zarr_format=fmt)
    pipeline = a._async_array.codec_pipeline
    assert type(pipeline).__name__ == "CodecPipeline"
    assert type(pipeline).__module__ == "zarrpipe"
    assert type(pipeline) is zarrpipe.CodecPipeline
    assert isinstance(pipeline, zarr.abc.codec.CodecPipeline)
    assert is_ours(reopen(loc, OURS))
    assert not is_ours(reopen(loc, DEFAULT))


def test_pipeline_selected_by_environment(tmp_path):
    """ZARR_CODEC_PIPELINE__PATH in a fresh interpreter selects zarrpipe's pipeline."""
    import subprocess
    import sys

    code = (
        "import zarr, numpy as np;"
        f"a = zarr.create_array({str(tmp_path / 'env.zarr')!r}, shape=(5,), chunks=(2,),"
        " dtype='i4'); a[...] = np.arange(5);"
        "p = a._async_array.codec_pipeline;"
        "print(type(p).__module__, type(p).__name__, a[1:4].tolist())"
    )
    env = dict(os.environ, ZARR_CODEC_PIPELINE__PATH="zarrpipe.CodecPipeline")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["zarrpipe", "CodecPipeline", "[1,", "2,", "3]"]


def test_large_read(ours, tmp_path):
    """64 MiB in 32 chunks, written by zarr-python, read by zarrpipe (whole and in parts);
    then written by zarrpipe and read back by zarr-python."""
    rng = np.random.default_rng(15)
    data = rng.standard_normal((2048, 4096))
    path = str(tmp_path / "big.zarr")
    with default_pipeline():
        zarr.create_array(path, shape=data.shape, chunks=(256, 1024), dtype="f8")[...] = data
    a = zarr.open_array(path, mode="r+")
    assert is_ours(a)
    got = values(a)
    assert got.flags.writeable and got.shape == data.shape
    assert np.array_equal(got, data)
    assert np.array_equal(values(a, np.s_[100:1900, 333:4000]), data[100:1900, 333:4000])
    a[...] = data[::-1]
    with default_pipeline():
        assert np.array_equal(values(zarr.open_array(path, mode="r")), data[::-1])


@pytest.mark.parametrize("shards", [None, (6,)], ids=["unsharded", "sharded"])
def test_edge_chunks_after_resizes_match_zarr_python(new_location, shards):
    """A write that covers the part of an edge chunk inside the array: zarr-python builds an
    unsharded chunk from the fill value (cells beyond the shape are lost), and keeps a
    shard's other cells (shards are encoded partially). After growing the array back, the
    cells beyond the old shape read the same through both pipelines."""
    results = []
    for pipeline in (DEFAULT, OURS):
        loc = new_location()
        a = create(loc, pipeline, shape=(5,), chunks=(3,), shards=shards, dtype="int16",
                   fill_value=-1)  # fmt: skip
        a[:] = np.arange(1, 6, dtype="int16")
        with quiet_zarr_writes():
            a.resize((4,))
            a[:] = 9
            a.resize((6,))
        results.append(values(reopen(loc, pipeline)))
    np.testing.assert_array_equal(results[1], results[0])


def test_complete_chunk_writes_do_not_read_the_store(ours):
    """zarr-python's own test_orthogonal_set_total_slice: overwriting whole chunks (an edge
    chunk's part inside the array included) never reads them."""
    from unittest import mock

    store = MemoryStore()
    with quiet_zarr_writes():
        a = zarr.create_array(store, shape=(20, 21), chunks=(1, 2), dtype=int, fill_value=-1)
    assert is_ours(a)
    with mock.patch("zarr.storage.MemoryStore.get", side_effect=RuntimeError):
        a[0, :] = np.arange(21)
        a[:] = 1
    np.testing.assert_array_equal(values(a), 1)


@pytest.mark.parametrize("out_dtype", ["float64", ">i8", "int32"])
def test_selections_into_out_buffers_of_another_dtype(ours, loc, out_dtype):
    """`get_*_selection(out=...)` with a NumPy buffer of another type or byte order (zarr-
    python's own suite reads int64 into float64): decoded natively and converted by NumPy as
    zarr-python's `out[selection] = chunk` converts, with no fallback, missing chunks too."""
    from zarr.core.buffer import default_buffer_prototype

    data = np.arange(1050, dtype="int64")
    a = create(loc, OURS, shape=(1050,), chunks=(100,), dtype="int64", fill_value=-3)
    a[:900] = data[:900]
    want = data.copy()
    want[900:] = -3
    cases = [
        ("get_basic_selection", slice(50, 150)),
        ("get_basic_selection", slice(0, 1050)),
        ("get_basic_selection", slice(1, 2)),
        ("get_orthogonal_selection", ([3, 500, 1000, 7],)),
        ("get_coordinate_selection", ([1049, 0, 333],)),
    ]
    with warnings.catch_warnings(), zarr.config.set({"codec_pipeline.strict": True}):
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        for method, selection in cases:
            expect = want[selection if isinstance(selection, slice) else selection[0]]
            out = default_buffer_prototype().nd_buffer.from_numpy_array(
                np.zeros(expect.shape, dtype=out_dtype)
            )
            getattr(a, method)(selection, out=out)
            got = out.as_numpy_array()
            assert got.dtype == np.dtype(out_dtype)
            np.testing.assert_array_equal(got, expect.astype(out_dtype), f"{method} {selection}")


@pytest.mark.skipif(
    not hasattr(zarr.abc.codec, "GetResult"), reason="zarr-python < 3.3 takes no chunk status"
)
@pytest.mark.parametrize("shards", [None, (4, 4)])
def test_read_reports_which_chunks_are_missing(ours, tmp_path, shards):
    """The status `read` gives zarr-python per chunk, in batch order: with
    `read_missing_chunks=False` zarr-python names exactly the chunks (shards) not stored."""
    store = LocalStore(tmp_path / "a")
    a = zarr.create_array(store, shape=(8, 8), chunks=(2, 2), shards=shards, dtype="i4")
    a[0:2, 0:2] = 1  # chunk (0, 0): in shard (0, 0) when sharded
    a[6:8, 2:4] = 2  # chunk (3, 1): in shard (1, 0)
    strict = zarr.open_array(store, mode="r", config={"read_missing_chunks": False})
    assert is_ours(strict)
    from zarr.errors import ChunkNotFoundError

    with pytest.raises(ChunkNotFoundError, match="not found") as caught:
        strict[...]
    named = set(re.findall(r"grid position \(([^)]*)\)", str(caught.value)))
    if shards is None:
        stored = {(0, 0), (3, 1)}
        grid = [(i, j) for i in range(4) for j in range(4)]
    else:
        stored = {(0, 0), (1, 0)}
        grid = [(i, j) for i in range(2) for j in range(2)]
    assert named == {", ".join(map(str, c)) for c in grid if c not in stored}
    assert (strict[0:2, 0:2] == 1).all()
    assert (strict[6:8, 2:4] == 2).all()
