"""`zarrpipe.engine.array_engine`: region reads equal zarr-python's, arrive writable and without
a copy (the result's memory is the decoded buffer itself), region writes land where
zarr-python reads them, bad regions raise IndexError, and `with_metadata` follows a resize."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from support.dlpack_ctypes import read_capsule
from support.zarr_stores import ALL_DTYPES, assert_values, quiet_zarr_writes, sample_values
from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec
from zarr.storage import LocalStore, MemoryStore, StorePath
from zarrpipe.engine import ArrayEngine, array_engine

DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}

# id -> (shape, chunks, dtype, create_array keyword arguments)
ARRAYS: dict[str, tuple[tuple[int, ...], tuple[int, ...], str, dict[str, Any]]] = {
    "v3-2d-ragged-zstd": ((37, 29), (8, 10), "float64", dict(compressors=[ZstdCodec()])),
    "v3-1d-crc32c": ((101,), (16,), "int16", dict(compressors=[Crc32cCodec()])),
    "v3-3d-blosc": (
        (9, 13, 7),
        (4, 5, 3),
        "uint32",
        dict(compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle")]),
    ),
    "v3-sharded": ((37, 29), (4, 5), "int32", dict(shards=(16, 20))),
    "v3-sharded-gzip-c16": (
        (21, 19),
        (3, 4),
        "complex128",
        dict(shards=(9, 8), compressors=[GzipCodec()]),
    ),
    "v3-nested-path": ((20, 20), (6, 6), "float32", dict(name="group/sub/arr")),
    "v2-zstd": ((37, 29), (8, 10), "int64", dict(zarr_format=2, compressors=numcodecs.Zstd())),
    "v2-order-F": ((23, 17), (5, 6), "float32", dict(zarr_format=2, order="F")),
    "v2-nested-path": ((15, 12), (4, 4), "uint8", dict(zarr_format=2, name="g/a")),
    "missing-chunks": ((30, 30), (7, 7), "float64", dict(fill_value=np.nan)),
}


def make(root: Path, name: str, dtype: str | None = None) -> tuple[zarr.Array, np.ndarray]:
    """Creates and writes the array `name` of ARRAYS (with zarr-python's own pipeline)."""
    shape, chunks, default_dtype, kwargs = ARRAYS[name]
    kwargs = dict(kwargs)
    dtype = dtype or default_dtype
    data = sample_values(dtype, shape, seed=len(name))
    kwargs.setdefault("fill_value", 0)
    with zarr.config.set(DEFAULT), quiet_zarr_writes():
        z = zarr.create_array(LocalStore(root), shape=shape, chunks=chunks, dtype=dtype, **kwargs)
        if name == "missing-chunks":  # only every other chunk is written
            for index in np.ndindex(*z.cdata_shape):
                if sum(index) % 2 == 0:
                    sel = tuple(
                        slice(i * c, (i + 1) * c) for i, c in zip(index, chunks, strict=True)
                    )
                    z[sel] = data[sel]
            data = np.asarray(z[...])
        else:
            z[...] = data
    return z, data


def engine_for(root: Path, z: zarr.Array, **config: Any) -> ArrayEngine:
    return array_engine(StorePath(LocalStore(root), z.path), z.metadata, config or None)


def zarr_read(root: Path, z: zarr.Array, region: Any) -> np.ndarray:
    """zarr-python's (default pipeline) values of `region`, from a fresh open."""
    with zarr.config.set(DEFAULT), quiet_zarr_writes():
        fresh = zarr.open_array(LocalStore(root, read_only=True), path=z.path, mode="r")
    return np.asarray(fresh[tuple(slice(a, b) for a, b in region)])


def regions(shape: tuple[int, ...], chunks: tuple[int, ...], seed: int = 0) -> list[list]:
    """Full, single elements (first, last, inside), ragged edges, whole chunks, chunk-crossing
    regions, empty regions (a zero-length axis), and random ones."""
    n = len(shape)
    out: list[list] = [
        [(0, s) for s in shape],
        [(0, 1)] * n,
        [(s - 1, s) for s in shape],
        [(s // 2, s // 2 + 1) for s in shape],
        [
            (c * (s // c if s % c else s // c - 1), s) for s, c in zip(shape, chunks, strict=True)
        ],  # ragged
        [(0, min(c, s)) for s, c in zip(shape, chunks, strict=True)],  # the first chunk
        [(c - 1, min(c + 1, s)) for s, c in zip(shape, chunks, strict=True)],  # across a boundary
        [(1, s - 1) for s in shape],
        [(0, 0)] + [(0, s) for s in shape[1:]],  # empty
        [(0, s) for s in shape[:-1]] + [(shape[-1], shape[-1])],  # empty at the end
        [(2, 2)] * n,
    ]
    rng = np.random.default_rng(seed)
    for _ in range(12):
        region = []
        for s in shape:
            a, b = sorted(int(v) for v in rng.integers(0, s + 1, 2))
            region.append((a, max(b, a + 1) if a < s else a))
        out.append(region)
    return out


def check_result(got: np.ndarray, region: list, dtype: Any) -> None:
    assert isinstance(got, np.ndarray)
    assert got.shape == tuple(b - a for a, b in region)
    assert got.dtype == np.dtype(dtype).newbyteorder("=")
    assert got.flags.writeable
    assert not got.flags.owndata
    assert not isinstance(got.base, np.ndarray), "the result is a view of a NumPy copy"


# ---------------------------------------------------------------------------------------------
# reads


@pytest.mark.parametrize("name", list(ARRAYS))
def test_read_selection_matches_zarr(tmp_path, name):
    z, data = make(tmp_path, name)
    engine = engine_for(tmp_path, z)
    assert engine.shape == data.shape
    assert engine.dtype == data.dtype
    for region in regions(data.shape, ARRAYS[name][1]):
        got = engine.read_selection(region)
        check_result(got, region, data.dtype)
        want = zarr_read(tmp_path, z, region)
        assert_values(got, want, f"{name} {region}")
        assert_values(got, data[tuple(slice(a, b) for a, b in region)], f"{name} {region} (np)")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_read_selection_dtypes(tmp_path, dtype):
    for name in ("v3-2d-ragged-zstd", "v3-sharded"):
        z, data = make(tmp_path / name, name, dtype)
        engine = engine_for(tmp_path / name, z)
        for region in regions(data.shape, ARRAYS[name][1], seed=1)[:8]:
            got = engine.read_selection(region)
            check_result(got, region, dtype)
            assert_values(got, zarr_read(tmp_path / name, z, region), f"{dtype} {region}")


def test_zero_d(tmp_path):
    with zarr.config.set(DEFAULT):
        z = zarr.create_array(LocalStore(tmp_path), shape=(), dtype="float32", fill_value=0)
        z[()] = 2.5
    engine = engine_for(tmp_path, z)
    got = engine.read_selection([])
    check_result(got, [], "float32")
    assert_values(got, np.float32(2.5), "0-d")
    engine.write_selection([], 4)
    with zarr.config.set(DEFAULT):
        assert_values(np.asarray(zarr.open_array(LocalStore(tmp_path))[()]), np.float32(4), "")


def test_result_is_independent_and_writable(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    for config in ({}, {"cache_bytes": 1 << 22}):
        engine = engine_for(tmp_path, z, **config)
        for region in ([(0, 8), (0, 10)], [(3, 20), (5, 29)], [(0, 37), (0, 29)]):
            first = engine.read_selection(region)
            first[...] = -7  # writable, and nobody else sees it
            second = engine.read_selection(region)
            assert_values(second, data[tuple(slice(a, b) for a, b in region)], f"{region}")
            assert first.ctypes.data != second.ctypes.data


class RecordingArray:
    """Stands in for the engine's zarrpipe.Array: reads through the real one and records the
    address of each returned tensor's buffer (through a versioned DLPack capsule, which it
    drops before handing the tensor back)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.addresses: list[int] = []

    def read(self, selection: Any) -> Any:
        tensor = self._real.read(selection)
        capsule = tensor.__dlpack__(max_version=(1, 0))
        info = read_capsule(capsule)
        assert info["name"] == "dltensor_versioned"
        self.addresses.append(info["address"])
        del capsule, info
        return tensor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.mark.parametrize("name", ["v3-2d-ragged-zstd", "v3-sharded", "v2-order-F", "v3-3d-blosc"])
def test_read_selection_is_zero_copy(tmp_path, monkeypatch, name):
    """The result's memory is the very buffer zarrpipe decoded into."""
    z, data = make(tmp_path, name)
    engine = engine_for(tmp_path, z)
    recorder = RecordingArray(engine._array)
    monkeypatch.setattr(engine, "_array", recorder)
    shape = data.shape
    for k, region in enumerate(
        [
            [(0, s) for s in shape],
            [(1, s - 1) for s in shape],
            [(0, 1)] * len(shape),
            [(s - 3, s) for s in shape],
        ]
    ):
        got = engine.read_selection(region)
        assert len(recorder.addresses) == k + 1, "the engine did not read through its array"
        assert got.ctypes.data == recorder.addresses[-1], f"{region}: the result is a copy"
        check_result(got, region, data.dtype)
        assert_values(got, data[tuple(slice(a, b) for a, b in region)], f"{region}")


# ---------------------------------------------------------------------------------------------
# writes


@pytest.mark.parametrize(
    "name", ["v3-2d-ragged-zstd", "v3-sharded", "v3-nested-path", "v2-order-F", "v3-1d-crc32c"]
)
def test_write_selection(tmp_path, name):
    z, data = make(tmp_path, name)
    engine = engine_for(tmp_path, z)
    shape = data.shape
    rng = np.random.default_rng(2)
    writes = [
        [(1, s - 2) for s in shape],  # partial chunks everywhere
        [(0, 1)] * len(shape),
        [(s - 1, s) for s in shape],
        [(0, s) for s in shape],
    ]
    for region in writes:
        sel = tuple(slice(a, b) for a, b in region)
        value = sample_values(data.dtype, data[sel].shape, seed=int(rng.integers(1000)))
        engine.write_selection(region, value)
        data[sel] = value
        assert_values(engine.read_selection([(0, s) for s in shape]), data, f"engine {region}")
        assert_values(zarr_read(tmp_path, z, [(0, s) for s in shape]), data, f"zarr {region}")


def test_write_selection_values(tmp_path):
    """Broadcast scalars and rows, non-contiguous, Fortran-ordered and big-endian values."""
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    full = [(0, 37), (0, 29)]
    big = sample_values("float64", (40, 60), seed=3)
    writes = [
        ([(2, 5), (3, 27)], 7.5),
        ([(10, 12), (0, 29)], np.float32(-1.25)),
        ([(20, 30), (0, 29)], np.arange(29.0)),  # a row broadcast over 10 rows
        ([(0, 10), (0, 1)], np.ones((10, 1)) * 3),
        ([(5, 25), (2, 22)], big[::2, ::3][:20, :20]),
        ([(30, 37), (10, 20)], np.asfortranarray(big[:7, :10])),
        ([(12, 18), (12, 18)], big[:6, :6].astype(">f8")),
        ([(0, 9), (20, 29)], big[:9, :9].T),
        ([(14, 15), (0, 29)], np.arange(29)),  # ints into floats
        ([(0, 37), (3, 5)], big[:37, :2][::-1]),  # negative strides
    ]
    for region, value in writes:
        engine.write_selection(region, value)
        data[tuple(slice(a, b) for a, b in region)] = value
        assert_values(engine.read_selection(full), data, f"after {region}")
    assert_values(zarr_read(tmp_path, z, full), data, "read by zarr-python")


def test_write_empty_region(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    for region in ([(3, 3), (0, 29)], [(0, 37), (10, 10)], [(37, 37), (29, 29)]):
        engine.write_selection(region, np.zeros((0, 0)).reshape([b - a for a, b in region]))
        engine.write_selection(region, 5.0)
    assert_values(zarr_read(tmp_path, z, [(0, 37), (0, 29)]), data, "unchanged")


def test_write_empty_chunks(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    chunk = os.path.join(tmp_path, *z.metadata.encode_chunk_key((0, 0)).split("/"))
    assert os.path.exists(chunk)
    engine = engine_for(tmp_path, z)
    engine.write_selection([(0, 8), (0, 10)], 0.0)  # the fill value: the chunk goes
    assert not os.path.exists(chunk)
    data[:8, :10] = 0
    assert_values(zarr_read(tmp_path, z, [(0, 37), (0, 29)]), data, "after a fill write")
    keeping = engine_for(tmp_path, z, write_empty_chunks=True)
    keeping.write_selection([(0, 8), (0, 10)], 0.0)
    assert os.path.exists(chunk)
    assert_values(zarr_read(tmp_path, z, [(0, 37), (0, 29)]), data, "after a kept fill write")
    assert not [f for _, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".tmp")]


def test_write_then_read_with_cache(tmp_path):
    z, data = make(tmp_path, "v3-sharded")
    engine = engine_for(tmp_path, z, cache_bytes=1 << 22)
    full = [(0, 37), (0, 29)]
    assert_values(engine.read_selection(full), data, "cached read")
    engine.write_selection([(3, 9), (4, 6)], -5)
    data[3:9, 4:6] = -5
    assert_values(engine.read_selection(full), data, "read after a write (cache cleared)")
    assert_values(engine.read_selection([(0, 4), (0, 5)]), data[:4, :5], "one inner chunk")


# ---------------------------------------------------------------------------------------------
# bad regions


BAD_REGIONS = [
    [(0, 38), (0, 29)],
    [(0, 37), (0, 30)],
    [(-1, 3), (0, 29)],
    [(5, 3), (0, 29)],
    [(37, 38), (0, 1)],
    [(0, 1)],
    [(0, 1), (0, 1), (0, 1)],
]


@pytest.mark.parametrize("region", BAD_REGIONS, ids=[str(r) for r in BAD_REGIONS])
def test_bad_region_raises_index_error(tmp_path, region):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    with pytest.raises(IndexError):
        engine.read_selection(region)
    with pytest.raises(IndexError):
        engine.write_selection(region, 1.0)
    assert_values(zarr_read(tmp_path, z, [(0, 37), (0, 29)]), data, "unchanged")


def test_wrong_value_shape_raises(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    with pytest.raises(ValueError):
        engine.write_selection([(0, 3), (0, 4)], np.ones((4, 3)))
    assert_values(zarr_read(tmp_path, z, [(0, 37), (0, 29)]), data, "unchanged")


# ---------------------------------------------------------------------------------------------
# metadata and locations


def test_with_metadata_after_resize(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    with zarr.config.set(DEFAULT):
        z.resize((50, 31))
    grown = engine.with_metadata(z.metadata)
    assert grown.shape == (50, 31)
    assert engine.shape == (37, 29)  # the old engine keeps its metadata
    got = grown.read_selection([(0, 50), (0, 31)])
    assert_values(got, zarr_read(tmp_path, z, [(0, 50), (0, 31)]), "after growing")
    assert_values(got[:37, :29], data, "old part")
    grown.write_selection([(45, 50), (28, 31)], 9.0)
    assert_values(
        zarr_read(tmp_path, z, [(45, 50), (28, 31)]), np.full((5, 3), 9.0), "write in new part"
    )
    with pytest.raises(IndexError):
        engine.read_selection([(45, 50), (0, 1)])
    with zarr.config.set(DEFAULT):
        z.resize((20, 10))
    shrunk = grown.with_metadata(z.metadata.to_dict())
    assert shrunk.shape == (20, 10)
    assert_values(shrunk.read_selection([(0, 20), (0, 10)]), data[:20, :10], "after shrinking")
    with pytest.raises(IndexError):
        shrunk.read_selection([(0, 21), (0, 10)])


def test_metadata_forms_and_paths(tmp_path):
    z, data = make(tmp_path, "v3-nested-path")
    array_dir = tmp_path / "group" / "sub" / "arr"
    region = [(3, 17), (2, 19)]
    want = data[3:17, 2:19]
    metadata_forms = [
        z.metadata,
        z.metadata.to_dict(),
        json.dumps(z.metadata.to_dict()),
        (array_dir / "zarr.json").read_text(),
    ]
    locations = [str(array_dir), array_dir, StorePath(LocalStore(tmp_path), "group/sub/arr")]
    for metadata in metadata_forms:
        for location in locations:
            engine = array_engine(location, metadata)
            assert_values(engine.read_selection(region), want, f"{type(metadata)} {location}")
            assert tuple(engine.metadata["shape"]) == (20, 20)


def test_v2_metadata(tmp_path):
    _, data = make(tmp_path, "v2-nested-path")
    zarray = json.loads((tmp_path / "g" / "a" / ".zarray").read_text())
    engine = array_engine(tmp_path / "g" / "a", zarray)
    assert_values(engine.read_selection([(0, 15), (0, 12)]), data, "v2 .zarray metadata")


def test_non_local_store_is_rejected():
    with zarr.config.set(DEFAULT), quiet_zarr_writes():
        z = zarr.create_array(MemoryStore(), shape=(4,), chunks=(2,), dtype="i4")
    with pytest.raises(TypeError):
        array_engine(StorePath(MemoryStore(), ""), z.metadata)
    with pytest.raises(TypeError):
        array_engine("/nonexistent", 42)


# ---------------------------------------------------------------------------------------------
# the protocol: request kinds, out=, async, hierarchy

from zarrpipe import UnsupportedError  # noqa: E402
from zarrpipe.engine import AsyncArrayEngine, HierarchyEngine, SelectionRequest  # noqa: E402


def _requests(data: np.ndarray, chunks: tuple[int, ...]) -> list[tuple[SelectionRequest, Any]]:
    """(request, NumPy's expected value) for every kind, on a 2-d array."""
    shape = data.shape
    n0, n1 = shape
    rows, cols = np.array([5, 0, 5, n0 - 1]), np.array([3, n1 - 1, 3, 0])
    mask = (data.real if np.iscomplexobj(data) else data) > np.median(data.real)
    return [
        (SelectionRequest("basic", (slice(1, 30, 3), -1), shape, chunks), data[1:30:3, -1]),
        (SelectionRequest("basic", (None, slice(None, None, -2)), shape, chunks), data[None, ::-2]),
        (
            SelectionRequest("orthogonal", ([n0 - 1, 1, 1], slice(None, None, 5)), shape, chunks),
            data[[n0 - 1, 1, 1]][:, ::5],
        ),
        (SelectionRequest("coordinate", (rows, cols), shape, chunks), data[rows, cols]),
        (SelectionRequest("mask", mask, shape, chunks), data[mask]),
        (SelectionRequest("block", (1, slice(0, 2)), shape, chunks), None),
    ]


@pytest.mark.parametrize("name", ["v3-2d-ragged-zstd", "v3-sharded", "v2-zstd"])
def test_every_request_kind_with_and_without_out(tmp_path, monkeypatch, name):
    z, data = make(tmp_path, name)
    engine = engine_for(tmp_path, z)
    addresses: list[int] = []
    real = engine._array

    def recorded(tensor: Any) -> Any:
        capsule = tensor.__dlpack__(max_version=(1, 0))
        addresses.append(read_capsule(capsule)["address"])
        del capsule
        return tensor

    class Recording:
        def read(self, sel: Any) -> Any:
            return recorded(real.read(sel))

        def _read_as(self, *a: Any) -> Any:
            return recorded(real._read_as(*a))

        def __getattr__(self, n: str) -> Any:
            return getattr(real, n)

    monkeypatch.setattr(engine, "_array", Recording())
    stored = z.shards or z.chunks
    for request, want in _requests(data, z.chunks):
        if want is None:  # block (1, 0:2) of the stored grid
            want = data[stored[0] : 2 * stored[0], : 2 * stored[1]]
        got = engine.read_selection(request, prototype=None)
        assert got.flags.writeable and got.ctypes.data == addresses[-1], request.kind
        assert_values(got, want, f"{request.kind} {request.selection!r}")
        out = np.full(want.shape, 7, want.dtype)
        assert engine.read_selection(request, prototype=None, out=out) is out
        assert_values(out, want, f"out= {request.kind}")


@pytest.mark.parametrize("name", ["v3-2d-ragged-zstd", "v3-sharded", "v2-zstd"])
def test_writes_of_every_request_kind(tmp_path, name):
    z, data = make(tmp_path, name)
    engine = engine_for(tmp_path, z)
    want = np.array(data)
    stored = z.shards or z.chunks
    for k, (request, _) in enumerate(_requests(data, z.chunks)):
        if request.kind == "block":  # block (1, 0:2) of the stored grid
            sel: Any = np.s_[stored[0] : 2 * stored[0], : 2 * stored[1]]
        else:
            sel = request.selection
        if request.kind == "orthogonal":
            rows, cols = request.selection
            idx = np.ix_(np.asarray(rows), np.arange(data.shape[1])[cols])
            shape = want[idx].shape
        else:
            idx = sel
            shape = want[sel].shape
        value = (np.arange(np.prod(shape)) + 100 * k).reshape(shape).astype(data.dtype)
        want[idx] = value
        engine.write_selection(request, value)
        assert_values(engine.read_selection([(0, n) for n in data.shape]), want, request.kind)
    got = np.asarray(zarr.open_array(store=str(tmp_path), path=z.path, mode="r")[...])
    assert_values(got.astype(got.dtype.newbyteorder("=")), want, "zarr-python")


def test_async_engine_and_hierarchy(tmp_path):
    import asyncio

    z, data = make(tmp_path, "v3-nested-path")
    hierarchy = HierarchyEngine(str(tmp_path), config={"cache_bytes": 1 << 20})
    engine = hierarchy.async_array_engine(z.path, z.metadata)
    assert isinstance(engine, AsyncArrayEngine)
    sync = hierarchy.array_engine(z.path, z.metadata)

    async def main() -> None:
        for request, want in _requests(data, z.chunks)[:-1]:
            got = await engine.read_selection(request, prototype=None)
            assert_values(got, want, f"async {request.kind}")
            out = np.zeros(want.shape, want.dtype)
            await engine.read_selection(request, prototype=None, out=out)
            assert_values(out, want, f"async out= {request.kind}")
        block = SelectionRequest("block", (0, 0), data.shape, z.chunks)
        await engine.write_selection(block, 5.0, prototype=None)
        assert (await engine.read_selection(block, prototype=None) == 5).all()

    asyncio.run(main())
    assert_values(sync.read_selection([(0, 6), (0, 6)]), np.full((6, 6), 5, data.dtype), "sync")


def test_unsupported_requests_raise(tmp_path):
    z, data = make(tmp_path, "v3-2d-ragged-zstd")
    engine = engine_for(tmp_path, z)
    rows = SelectionRequest("coordinate", ([0], [0]), data.shape)
    with pytest.raises(UnsupportedError, match="fields"):
        engine.read_selection(rows, fields=["a"])
    with pytest.raises(UnsupportedError, match="'fancy'"):
        engine.read_selection(SelectionRequest("fancy", 0, data.shape))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        engine.read_selection(SelectionRequest("basic", 0, (1, 2)))
    with pytest.raises(IndexError):
        engine.read_selection(SelectionRequest("mask", np.ones((2, 2), bool), data.shape))
    with pytest.raises(IndexError):
        engine.read_selection(SelectionRequest("coordinate", ([0, 1], [0, 1, 2]), data.shape))
