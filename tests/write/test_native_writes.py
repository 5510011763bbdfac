"""Arrays written by zarrpipe's native API (`Store.create_array`, `Array.write`) read back
exactly by zarr-python and TensorStore, with the metadata and chunk keys zarr-python writes;
partial overwrites equal a NumPy mirror; read-only stores refuse writes untouched; outputs
that overlap themselves are refused; cached object-store reads make no request; writers
killed mid-write leave every chunk old or new."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import quiet_zarr_writes
from zarr.storage import LocalStore

try:
    import tensorstore as ts
except ImportError:  # pragma: no cover - depends on the environment
    ts = None

SHAPE = (37, 50)  # ragged: 37 = 4*8 + 5 rows, 50 = 3*16 + 2 columns
CHUNKS = (8, 16)
INNER, SHARDS = (4, 8), (16, 32)  # ragged shards: 37 = 2*16 + 5, 50 = 32 + 18
NAN = float("nan")
METADATA = {"zarr.json", ".zarray", ".zattrs", ".zgroup"}


def zstd(level: int = 3, checksum: bool = False) -> dict:
    return {"name": "zstd", "configuration": {"level": level, "checksum": checksum}}


def blosc(cname: str, shuffle: str, typesize: int, clevel: int = 5) -> dict:
    config = {"cname": cname, "clevel": clevel, "shuffle": shuffle, "typesize": typesize}
    return {"name": "blosc", "configuration": {**config, "blocksize": 0}}


CRC32C = {"name": "crc32c"}
TRANSPOSE = {"name": "transpose", "configuration": {"order": [1, 0]}}

# id -> create_array keyword arguments, given alike to zarrpipe and zarr-python. Every codec
# create_array writes, v2 and v3, sharded and not, with a fill value that is not zero where
# that matters (NaN included).
CASES: dict[str, dict[str, Any]] = {
    "v3-default-uint16": {"dtype": "uint16"},
    "v3-none-int32": {"dtype": "int32", "compressors": None, "fill_value": -7},
    "v3-zstd-checksum-float32-nan": {
        "dtype": "float32", "compressors": zstd(5, True), "fill_value": NAN},
    "v3-blosc-lz4-int16": {"dtype": "int16", "compressors": blosc("lz4", "shuffle", 2)},
    "v3-blosc-zstd-bitshuffle-float64": {
        "dtype": "float64", "compressors": blosc("zstd", "bitshuffle", 8, 3)},
    "v3-blosc-blosclz-noshuffle-uint8": {
        "dtype": "uint8", "compressors": blosc("blosclz", "noshuffle", 1, 9), "fill_value": 255},
    "v3-blosc-defaults-int64": {
        "dtype": "int64", "compressors": {"name": "blosc", "configuration": {}}},
    "v3-gzip-complex64": {
        "dtype": "complex64", "compressors": {"name": "gzip", "configuration": {"level": 1}},
        "fill_value": 1 + 2j},
    "v3-zstd-crc32c-uint64": {"dtype": "uint64", "compressors": [zstd(), CRC32C]},
    "v3-transpose-float16": {"dtype": "float16", "filters": [TRANSPOSE], "fill_value": 0.5},
    "v3-bool": {"dtype": "bool", "fill_value": True},
    "v3-big-endian-int32": {"dtype": ">i4", "fill_value": 3},
    "v3-big-endian-float64-nan": {"dtype": ">f8", "compressors": None, "fill_value": NAN},
    "v3-names-attrs-complex128": {
        "dtype": "complex128", "attributes": {"units": "K", "n": [1, 2]},
        "dimension_names": ["y", None]},
    "v3-sharded-default-uint16": {"dtype": "uint16", "shards": SHARDS},
    "v3-sharded-zstd-int32": {"dtype": "int32", "shards": SHARDS, "compressors": zstd(),
                              "fill_value": 42},
    "v3-sharded-none-float64-nan": {
        "dtype": "float64", "shards": SHARDS, "compressors": None, "fill_value": NAN},
    "v3-sharded-blosc-crc32c-int8": {
        "dtype": "int8", "shards": SHARDS, "compressors": [blosc("lz4", "shuffle", 1), CRC32C]},
    "v3-sharded-gzip-big-endian-uint32": {
        "dtype": ">u4", "shards": SHARDS,
        "compressors": {"name": "gzip", "configuration": {"level": 6}}},
    "v2-default-float64": {"dtype": "<f8", "zarr_format": 2},
    "v2-none-int16": {"dtype": "int16", "zarr_format": 2, "compressors": None, "fill_value": 9},
    "v2-blosc-lz4-uint32": {
        "dtype": "uint32", "zarr_format": 2,
        "compressors": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}},
    "v2-zlib-int8": {"dtype": "int8", "zarr_format": 2, "compressors": {"id": "zlib", "level": 1}},
    "v2-gzip-complex128": {
        "dtype": "complex128", "zarr_format": 2, "compressors": {"id": "gzip", "level": 1}},
    "v2-zstd-bool": {"dtype": "bool", "zarr_format": 2, "compressors": {"id": "zstd", "level": 3}},
    "v2-big-endian-float32-nan": {"dtype": ">f4", "zarr_format": 2, "fill_value": NAN},
    "v2-big-endian-int64-attrs": {
        "dtype": ">i8", "zarr_format": 2, "fill_value": -1, "attributes": {"a": "b"}},
}  # fmt: skip


def chunks_of(kwargs: dict) -> tuple[int, ...]:
    return INNER if "shards" in kwargs else CHUNKS


def values(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Distinct-looking values of `dtype`, with its extremes (NaN, ±inf, -0.0 for floats)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, shape, dtype=dtype.newbyteorder("="), endpoint=True)
        out.flat[:2] = [info.min, info.max]
        return out.astype(dtype)
    out = rng.standard_normal(shape) * 1000
    if dtype.kind == "c":
        out = out + 1j * rng.standard_normal(shape)
    out = out.astype(dtype)
    out.flat[:4] = [np.inf, -np.inf, -0.0, NAN]
    return out


def data_for(kwargs: dict, seed: int = 0) -> np.ndarray:
    """Values with fill-only regions: a row of whole chunks (and, sharded, a whole shard)
    equal to the fill value, and a chunk of -0.0 where the fill value is 0.0 (data, not
    fill: zarr-python compares a zero fill bit for bit)."""
    dtype = np.dtype(kwargs["dtype"])
    data = values(dtype, SHAPE, seed)
    fill = kwargs.get("fill_value", 0)
    c = chunks_of(kwargs)
    data[c[0] : 2 * c[0]] = fill  # every chunk of the second chunk row
    data[-3:, :] = fill  # the ragged edge chunks: all fill inside the array
    if "shards" in kwargs:
        data[SHARDS[0] : 2 * SHARDS[0], : SHARDS[1]] = fill  # shard (1, 0)
    if dtype.kind == "f" and fill == 0:
        data[3 * c[0] : 4 * c[0], : c[1]] = -0.0
    return data


def new_store(root: Path) -> zarrpipe.Store:
    """A writable store in a new directory (zarrpipe opens existing directories only)."""
    root.mkdir(parents=True, exist_ok=True)
    return zarrpipe.Store(root)


def native(a: Any) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("="))


def assert_same(got: Any, want: Any, what: str = "") -> None:
    """Equal values: bit for bit, except that any NaN equals any NaN."""
    g, w = native(got), native(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
    if g.dtype.kind == "c":
        assert_same(g.real, w.real, f"{what} (real)")
        assert_same(g.imag, w.imag, f"{what} (imag)")
    elif g.dtype.kind == "f":
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan, err_msg=f"{what}: NaN positions")
        bits = f"u{g.dtype.itemsize}"
        np.testing.assert_array_equal(g[~nan].view(bits), w[~nan].view(bits), err_msg=what)
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


def files(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def chunk_keys(array_dir: Path) -> set[str]:
    return {k for k in files(array_dir) if Path(k).name not in METADATA}


def metadata_docs(array_dir: Path) -> dict[str, Any]:
    return {
        name: json.loads((array_dir / name).read_text())
        for name in sorted(METADATA)
        if (array_dir / name).exists()
    }


def json_diff(ours: Any, theirs: Any, at: str = "") -> list[str]:
    """Where two JSON documents differ, one line per differing leaf (NaN equals NaN)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [
            line
            for k in sorted(set(ours) | set(theirs))
            for line in (
                json_diff(ours[k], theirs[k], f"{at}/{k}")
                if k in ours and k in theirs
                else [f"{at}/{k}: only in {'ours' if k in ours else 'zarr-python'}"]
            )
        ]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            line
            for i, (a, b) in enumerate(zip(ours, theirs, strict=False))
            for line in json_diff(a, b, f"{at}[{i}]")
        ]
    same = ours == theirs or (ours != ours and theirs != theirs)
    return [] if same else [f"{at}: ours {ours!r}, zarr-python {theirs!r}"]


def zarr_read(root: Path, path: str) -> np.ndarray:
    with quiet_zarr_writes():
        return zarr.open_array(LocalStore(root, read_only=True), path=path, mode="r")[...]


def tensorstore_read(array_dir: Path, zarr_format: int) -> np.ndarray:
    if ts is None:
        pytest.skip("tensorstore cannot be imported")
    spec = {
        "driver": "zarr3" if zarr_format == 3 else "zarr",
        "kvstore": {"driver": "file", "path": str(array_dir)},
    }
    return ts.open(spec, open=True, read=True).result().read().result()


def zarr_python_twin(root: Path, kwargs: dict, write_empty: bool, data: np.ndarray) -> Path:
    """The same array created and written by zarr-python (default pipeline)."""
    with quiet_zarr_writes():
        z = zarr.create_array(
            LocalStore(root), name="x", shape=SHAPE, chunks=chunks_of(kwargs),
            config={"write_empty_chunks": write_empty}, **kwargs,
        )  # fmt: skip
        z[...] = data
    return root / "x"


# ------------------------------------------------------------------ written, then read back


@pytest.mark.parametrize("write_empty", [False, True], ids=["skip-empty", "write-empty"])
@pytest.mark.parametrize("case", list(CASES))
def test_native_writes_read_back_everywhere(tmp_path, case, write_empty):
    kwargs = CASES[case]
    data = data_for(kwargs)
    store = new_store(tmp_path / "ours.zarr")
    arr = store.create_array(
        "x", shape=SHAPE, chunks=chunks_of(kwargs), write_empty_chunks=write_empty, **kwargs
    )
    assert arr.write_empty_chunks is write_empty
    arr[...] = data
    ours = tmp_path / "ours.zarr" / "x"
    fmt = kwargs.get("zarr_format", 3)

    assert_same(zarr_read(tmp_path / "ours.zarr", "x"), data, "zarr-python reads zarrpipe's")
    assert_same(np.asarray(arr.read()), data, "zarrpipe reads its own")
    assert_same(tensorstore_read(ours, fmt), data, "TensorStore reads zarrpipe's")

    # Chunks that are all fill value: absent, or present with write_empty_chunks, exactly
    # as zarr-python stores the same array.
    theirs = zarr_python_twin(tmp_path / "theirs.zarr", kwargs, write_empty, data)
    assert chunk_keys(ours) == chunk_keys(theirs)
    stored_grid = kwargs.get("shards", CHUNKS)
    n_stored = np.prod([-(-s // c) for s, c in zip(SHAPE, stored_grid, strict=True)])
    if write_empty:
        assert len(chunk_keys(ours)) == n_stored
    else:
        assert len(chunk_keys(ours)) < n_stored  # the fill-only ones are not stored
    assert_same(np.asarray(zarrpipe.Store(theirs.parent).read("x")), data, "zarrpipe reads theirs")


# zarr-python and zarrpipe write the same documents; no field differs.
@pytest.mark.parametrize("case", list(CASES))
def test_metadata_equals_zarr_pythons(tmp_path, case):
    kwargs = CASES[case]
    new_store(tmp_path / "ours.zarr").create_array(
        "g/x", shape=SHAPE, chunks=chunks_of(kwargs), **kwargs
    )
    with quiet_zarr_writes():
        zarr.create_array(
            LocalStore(tmp_path / "theirs.zarr"), name="g/x", shape=SHAPE,
            chunks=chunks_of(kwargs), **kwargs,
        )  # fmt: skip
    for node in ["g/x", "g", ""]:
        ours = metadata_docs(tmp_path / "ours.zarr" / node)
        assert ours, f"no metadata at {node!r}"
        assert not json_diff(ours, metadata_docs(tmp_path / "theirs.zarr" / node)), node


def test_codec_objects_give_the_same_metadata(tmp_path):
    """zarr-python and numcodecs codec objects are taken as zarr-python takes them."""
    numcodecs = pytest.importorskip("numcodecs")
    from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

    calls = {
        "v3": {"dtype": "int16", "compressors": [ZstdCodec(level=2), Crc32cCodec()]},
        "v3-blosc": {"dtype": "float32", "compressors": BloscCodec(cname="lz4", clevel=1)},
        "v2": {"dtype": "int16", "zarr_format": 2, "compressors": numcodecs.Zstd(level=2)},
        "v2-blosc": {"dtype": "<f4", "zarr_format": 2, "compressors": numcodecs.Blosc("lz4")},
    }
    for name, kwargs in calls.items():
        data = data_for(kwargs, seed=1)
        arr = new_store(tmp_path / "ours.zarr").create_array(
            name, shape=SHAPE, chunks=CHUNKS, **kwargs
        )
        arr[...] = data
        with quiet_zarr_writes():
            zarr.create_array(
                LocalStore(tmp_path / "theirs.zarr"), name=name, shape=SHAPE, chunks=CHUNKS,
                **kwargs,
            )  # fmt: skip
        ours = metadata_docs(tmp_path / "ours.zarr" / name)
        assert not json_diff(ours, metadata_docs(tmp_path / "theirs.zarr" / name)), name
        assert_same(zarr_read(tmp_path / "ours.zarr", name), data, name)


# ------------------------------------------------------------------ partial overwrites

LAYOUTS = {
    "v3": {"chunks": CHUNKS},
    "v3-sharded": {"chunks": INNER, "shards": SHARDS},
    "v2": {"chunks": CHUNKS, "zarr_format": 2},
}


def random_selection(rng: np.random.Generator) -> tuple:
    """Slices crossing chunk and shard boundaries, sometimes an integer (dropping its axis)
    or `...`."""
    sel = []
    for n in SHAPE:
        kind = rng.integers(0, 6)
        if kind == 0:
            sel.append(int(rng.integers(0, n)))
        elif kind == 1:
            sel.append(slice(None))
        else:
            a = int(rng.integers(0, n))
            sel.append(slice(a, int(rng.integers(a + 1, n + 1))))
    return tuple(sel) if rng.integers(0, 8) else (Ellipsis, *sel[1:])


def stored_keys_expected(mirror: np.ndarray, grid: tuple[int, ...], fill: Any, sep: str) -> set:
    """The stored chunks zarr-python keeps: those not all fill value."""
    keys = set()
    for i in range(-(-SHAPE[0] // grid[0])):
        for j in range(-(-SHAPE[1] // grid[1])):
            block = mirror[i * grid[0] : (i + 1) * grid[0], j * grid[1] : (j + 1) * grid[1]]
            if not np.array_equal(block, np.full_like(block, fill), equal_nan=True):
                keys.add(f"c/{i}/{j}" if sep == "/" else f"{i}.{j}")
    return keys


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_partial_overwrites_equal_a_numpy_mirror(tmp_path, layout):
    """Read-modify-write across chunk and shard boundaries, through every write door, equals
    the same assignments to a NumPy array; chunks left all fill value are deleted."""
    kwargs = LAYOUTS[layout]
    fill = -5
    store = new_store(tmp_path / "data.zarr")
    arr = store.create_array("x", shape=SHAPE, dtype="int32", fill_value=fill, **kwargs)
    mirror = np.full(SHAPE, fill, dtype="int32")
    rng = np.random.default_rng(7)
    for step in range(40):
        sel = random_selection(rng)
        target_shape = mirror[sel].shape
        kind = step % 5
        if kind == 0:
            value: Any = fill  # scalar broadcast; may leave chunks all fill
        elif kind == 1:
            value = int(rng.integers(-1000, 1000))
        else:
            value = rng.integers(-(2**31), 2**31 - 1, target_shape, dtype="int32")
            if kind == 4 and value.ndim:  # a non-contiguous source
                value = np.asfortranarray(value)
        mirror[sel] = value
        door = step % 4
        if door == 0:
            arr[sel] = value
        elif door == 1:
            arr.write(sel, value)
        elif door == 2:
            store.write("x", sel, value)
        else:
            asyncio.run(arr.write_async(sel, value))
        got = np.asarray(zarrpipe.Store(tmp_path / "data.zarr").read("x"))
        np.testing.assert_array_equal(got, mirror, err_msg=f"step {step}: {sel}")
    np.testing.assert_array_equal(zarr_read(tmp_path / "data.zarr", "x"), mirror)
    fmt = kwargs.get("zarr_format", 3)
    array_dir = tmp_path / "data.zarr" / "x"
    assert_same(tensorstore_read(array_dir, fmt), mirror, "TensorStore")
    grid = kwargs.get("shards", CHUNKS)
    want = stored_keys_expected(mirror, grid, fill, "/" if fmt == 3 else ".")
    assert chunk_keys(array_dir) == want
    # A single element across a boundary, and the whole array back to the fill value.
    arr[15, 31] = 11
    mirror[15, 31] = 11
    np.testing.assert_array_equal(zarr_read(tmp_path / "data.zarr", "x"), mirror)
    arr[...] = fill
    assert chunk_keys(array_dir) == set()


def test_writes_broadcast_and_refuse_wrong_shapes(tmp_path):
    arr = zarrpipe.Store(tmp_path).create_array("x", shape=SHAPE, chunks=CHUNKS, dtype="f8")
    arr[:, 3:20] = np.arange(17.0)  # a row broadcast over every row
    want = np.zeros(SHAPE)
    want[:, 3:20] = np.arange(17.0)
    np.testing.assert_array_equal(zarr_read(tmp_path, "x"), want)
    before = files(tmp_path)
    with pytest.raises(ValueError, match="broadcast"):
        arr[0:4, 0:4] = np.ones((3, 4))
    with pytest.raises(IndexError):
        arr[40, 0] = 1.0
    assert files(tmp_path) == before


# ------------------------------------------------------------------ read-only stores


def test_writes_through_a_read_only_store_raise_and_change_nothing(tmp_path):
    root = tmp_path / "data.zarr"
    writer = new_store(root)
    writer.create_array("x", shape=SHAPE, chunks=INNER, shards=SHARDS, dtype="u2")[...] = 9
    writer.create_group("g", attributes={"a": 1})
    before = files(root)
    ro = zarrpipe.Store(root, mode="r")
    assert ro.read_only and not writer.read_only
    arr = ro.open_array("x")
    attempts = {
        "setitem": lambda: arr.__setitem__((slice(0, 3),), 1),
        "Array.write": lambda: arr.write(None, np.zeros(SHAPE, "u2")),
        "write_async": lambda: asyncio.run(arr.write_async((0, 0), 1)),
        "Store.write": lambda: ro.write("x", (slice(5, 30), 7), 2),
        "create_array": lambda: ro.create_array("y", shape=(4,), chunks=(2,), dtype="i1"),
        "create_array overwrite": lambda: ro.create_array(
            "x", shape=(4,), chunks=(2,), dtype="i1", overwrite=True
        ),
        "create_group": lambda: ro.create_group("h"),
        "create_group attrs": lambda: ro.create_group("g", attributes={"a": 2}),
    }
    for what, attempt in attempts.items():
        with pytest.raises(PermissionError, match="read-only"):
            attempt()
        assert files(root) == before, what
    np.testing.assert_array_equal(np.asarray(ro.read("x")), np.full(SHAPE, 9, "u2"))


# ------------------------------------------------------------------ outputs refused


@pytest.fixture
def written(tmp_path) -> tuple[zarrpipe.Array, np.ndarray]:
    data = values(np.dtype("int32"), SHAPE, 3)
    arr = zarrpipe.Store(tmp_path).create_array("x", shape=SHAPE, chunks=CHUNKS, dtype="int32")
    arr[...] = data
    return arr, data


def sentinel_buffer(n: int) -> np.ndarray:
    return np.full(n, -99, dtype="int32")


def test_read_into_outputs_that_overlap_themselves_are_refused(written):
    """An output whose elements share memory (a zero or overlapping stride) would have two
    chunks write the same bytes from two threads: refused before anything is written."""
    arr, _ = written
    sel = (slice(0, 20), slice(0, 40))  # 3 x 3 chunks, decoded in parallel
    from numpy.lib.stride_tricks import as_strided

    cases = {
        "zero stride": ((20, 40), (0, 4)),
        "zero inner stride": ((20, 40), (160, 0)),
        "rows overlap": ((20, 40), (4 * 10, 4)),
        "transposed overlap": ((20, 40), (4, 4 * 10)),
    }
    for what, (shape, strides) in cases.items():
        base = sentinel_buffer(2000)
        out = as_strided(base, shape=shape, strides=strides)
        assert out.flags.writeable
        with pytest.raises(ValueError, match="share memory"):
            arr.read_into(sel, out)
        np.testing.assert_array_equal(base, sentinel_buffer(2000), err_msg=what)


def test_read_into_refuses_read_only_and_misfit_outputs(written):
    arr, data = written
    sel = (slice(2, 30), slice(5, 45))
    out = np.full((28, 40), -99, dtype="int32")
    out.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        arr.read_into(sel, out)
    np.testing.assert_array_equal(out, -99)
    raw = bytes(28 * 40 * 4)
    with pytest.raises(ValueError, match="read-only"):
        arr.read_into(sel, raw)
    assert raw == bytes(28 * 40 * 4)
    with pytest.raises(ValueError, match="shape"):
        arr.read_into(sel, np.zeros((28, 41), dtype="int32"))
    with pytest.raises(TypeError, match="dtype"):
        arr.read_into(sel, np.zeros((28, 40), dtype="int64"))
    with pytest.raises(TypeError, match="dtype"):
        arr.read_into(sel, np.zeros((28, 40), dtype="float32"))
    with pytest.raises(ValueError):
        arr.read_into(sel, bytearray(28 * 40 * 4 - 1))
    # What fits is accepted: a reversed, strided view of a bigger buffer, a bytearray.
    big = np.full((56, 90), -99, dtype="int32")
    view = big[::-2, 5:85:2]
    arr.read_into(sel, view)
    np.testing.assert_array_equal(view, data[sel])
    untouched = np.ones(big.shape, bool)
    untouched[::-2, 5:85:2] = False
    assert (big[untouched] == -99).all()
    buf = bytearray(28 * 40 * 4)
    arr.read_into(sel, buf)
    np.testing.assert_array_equal(np.frombuffer(buf, "int32").reshape(28, 40), data[sel])


def test_pipeline_placements_that_overlap_are_refused(written, tmp_path):
    """zarr-python's pipeline hands the engine chunk placements in element terms: two that
    write the same output elements are refused before any thread writes."""
    _, data = written
    meta = json.loads((tmp_path / "x" / "zarr.json").read_text())
    engine = zarrpipe._zarrpipe._PipelineArray(json.dumps(meta), None, zarrpipe.Store(tmp_path))
    out = np.full((8, 16), -99, dtype="int32")

    def requests(*items):
        """zarr-python's batch: (getter, spec, chunk selection, out selection, complete)."""
        batch = [
            (
                SimpleNamespace(path=key),
                SimpleNamespace(shape=shape),
                tuple(slice(a, b) for a, b in chunk),
                tuple(slice(a, b) for a, b in where),
                False,
            )
            for key, chunk, where, shape in items
        ]
        return zarrpipe._zarrpipe._ChunkRequests.from_batch(batch, out.shape)

    one = ("x/c/0/0", [(0, 8), (0, 16)], [(0, 8), (0, 16)], CHUNKS)
    assert engine.read(out, requests(one)) == [True]
    np.testing.assert_array_equal(out, data[:8, :16])
    out[...] = -99
    other = ("x/c/1/1", [(0, 8), (0, 16)], [(0, 8), (0, 16)], CHUNKS)
    shifted = ("x/c/1/1", [(0, 4), (0, 16)], [(4, 8), (0, 16)], CHUNKS)
    for pair in ([one, other], [one, shifted]):
        with pytest.raises(IndexError, match="both write output elements"):
            engine.read(out, requests(*pair))
        np.testing.assert_array_equal(out, -99)
    # An empty chunk shape is refused; one of other axes is not a box request at all.
    with pytest.raises(IndexError, match="not a chunk shape"):
        engine.read(out, requests(("x/c/0/0", [(0, 8), (0, 16)], [(0, 8), (0, 16)], (8, 0))))
    assert requests(("x/c/0/0", [(0, 8), (0, 16)], [(0, 8), (0, 16)], (8,))) is None
    np.testing.assert_array_equal(out, -99)


# ------------------------------------------------------------------ object stores

BUCKET = "zarrpipe-writes"
KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}


@pytest.fixture(scope="module")
def s3() -> Any:
    pytest.importorskip("boto3")
    import boto3
    from support.remote_servers import moto_s3

    with moto_s3() as endpoint:
        client = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="test",
            aws_secret_access_key="test", region_name="us-east-1",
        )  # fmt: skip
        client.create_bucket(Bucket=BUCKET)
        yield endpoint


def s3_store(endpoint: str, **kwargs: Any) -> zarrpipe.Store:
    options = {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}
    return zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options=options, **kwargs)


@pytest.fixture(scope="module")
def s3_arrays(s3) -> dict[str, np.ndarray]:
    """Arrays written natively to S3, with chunks, inner chunks and a shard left missing."""
    store = s3_store(s3)
    want = {}
    for path, kwargs in {"plain": {"chunks": CHUNKS}, "sharded": LAYOUTS["v3-sharded"]}.items():
        data = values(np.dtype("uint16"), SHAPE, 11)
        data[16:32, :32] = 7  # a missing shard (sharded) / missing chunks (plain)
        data[:4, 32:] = 7  # missing inner chunks in a stored shard
        arr = store.create_array(path, shape=SHAPE, dtype="uint16", fill_value=7, **kwargs)
        arr[...] = data
        want[path] = data
    return want


@pytest.mark.parametrize("path", ["plain", "sharded"])
def test_s3_native_writes_read_back_by_zarr_python(s3, s3_arrays, path):
    obstore = pytest.importorskip("obstore.store")
    obs = obstore.S3Store(
        BUCKET, prefix="data.zarr", endpoint=s3, region="us-east-1",
        access_key_id="test", secret_access_key="test", client_options={"allow_http": True},
    )  # fmt: skip
    with quiet_zarr_writes():
        z = zarr.open_array(zarr.storage.ObjectStore(obs, read_only=True), path=path, mode="r")
        np.testing.assert_array_equal(z[...], s3_arrays[path])


@pytest.mark.parametrize("path", ["plain", "sharded"])
def test_s3_second_read_with_a_cache_makes_no_request(s3, s3_arrays, path):
    """Read twice through `Store.read`, `Array[...]`, `read_into` and `read_chunks`: the
    second time nothing is fetched, metadata included, even where chunks are missing."""
    want = s3_arrays[path]
    sel = (slice(3, 36), slice(5, 49))  # crosses chunks, shards, missing ones, edges
    store = s3_store(s3, cache_bytes=64 << 20)
    assert store.request_counts()["gets"] == 0
    np.testing.assert_array_equal(np.asarray(store.read(path, sel)), want[sel])
    first = store.request_counts()
    assert first["gets"] > 0
    np.testing.assert_array_equal(np.asarray(store.read(path, sel)), want[sel])
    assert store.request_counts() == first, "Store.read again"

    # An opened array (opening re-reads the metadata and forgets cached chunks: a reopen
    # is a refresh): its first read fetches, every later read of the region is cached.
    arr = store.open_array(path)
    np.testing.assert_array_equal(np.asarray(arr[sel]), want[sel])
    opened = store.request_counts()
    out = np.empty(want[sel].shape, dtype="uint16")
    arr.read_into(sel, out)
    np.testing.assert_array_equal(out, want[sel])
    np.testing.assert_array_equal(np.asarray(arr[sel]), want[sel])
    np.testing.assert_array_equal(np.asarray(arr[10:20, 40]), want[10:20, 40])
    np.testing.assert_array_equal(np.asarray(store.read(path, sel)), want[sel])
    assert store.request_counts() == opened, "reads of cached chunks through an open array"
    chunks = [(0, 0), (1, 1), (4, 3)]
    arr.read_chunks(chunks)
    after_chunks = store.request_counts()
    got = arr.read_chunks(chunks)
    assert store.request_counts() == after_chunks, "read_chunks again"
    c = arr.chunks
    for (i, j), t in zip(chunks, got, strict=True):
        np.testing.assert_array_equal(
            np.asarray(t), want[i * c[0] : (i + 1) * c[0], j * c[1] : (j + 1) * c[1]]
        )


def test_s3_read_only_store_refuses_writes_without_a_request(s3, s3_arrays):
    ro = s3_store(s3, mode="r")
    arr = ro.open_array("plain")
    before = ro.request_counts()
    with pytest.raises(PermissionError, match="read-only"):
        arr[0:3, 0:3] = 1
    with pytest.raises(PermissionError, match="read-only"):
        ro.create_array("y", shape=(4,), chunks=(2,), dtype="i1")
    after = ro.request_counts()
    assert after == before and after["puts"] == after["deletes"] == 0
    np.testing.assert_array_equal(np.asarray(s3_store(s3).read("plain")), s3_arrays["plain"])


# ------------------------------------------------------------------ interrupted writes

KILL_SHAPE, KILL_CHUNKS = (48, 96), (8, 8)

WRITER = """
import sys
import numpy as np
import zarrpipe

root, path = sys.argv[1], sys.argv[2]
old = np.load(sys.argv[3])
new = np.load(sys.argv[4])
arr = zarrpipe.Store(root).open_array(path)
arr[...] = new
print("ready", flush=True)  # it has written: from now on, a kill can land anywhere
while True:
    arr[...] = old
    arr[...] = new
"""


def old_and_new(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two versions that differ in every element; in `new`, some chunks are all fill value
    (written as deletions)."""
    old = np.random.default_rng(seed).integers(1, 2**30, KILL_SHAPE, dtype="int32")
    new = old + 1
    new[8:16, 0:40] = 0  # whole chunks (and, sharded, inner chunks) of fill value
    return old, new


def stored_objects(kwargs: dict) -> list[tuple[slice, ...]]:
    grid = kwargs.get("shards", KILL_CHUNKS)
    return [
        (slice(i, i + grid[0]), slice(j, j + grid[1]))
        for i in range(0, KILL_SHAPE[0], grid[0])
        for j in range(0, KILL_SHAPE[1], grid[1])
    ]


CHUNK_KEY = {3: re.compile(r"c(/\d+)+"), 2: re.compile(r"\d+(\.\d+)*")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "layout",
    [
        {"chunks": KILL_CHUNKS},
        {"chunks": (4, 8), "shards": (16, 32)},
        {"chunks": KILL_CHUNKS, "zarr_format": 2},
    ],
    ids=["v3", "v3-sharded", "v2"],
)
def test_killed_writers_leave_every_chunk_old_or_new(tmp_path, layout):
    """A writer that rewrites the whole array again and again (new, old, new...) is killed
    with SIGKILL at random moments; every stored chunk (or shard) then decodes, by zarrpipe
    and zarr-python, to exactly its old or its new values, and temporary files never look
    like chunk keys (a killed writer may leave its key's `.__lock` file, the lock file of
    the protocol zarrpipe shares with TensorStore)."""
    root = tmp_path / "data.zarr"
    fmt = layout.get("zarr_format", 3)
    old, new = old_and_new(5)
    np.save(tmp_path / "old.npy", old)
    np.save(tmp_path / "new.npy", new)
    arr = new_store(root).create_array("x", shape=KILL_SHAPE, dtype="int32", fill_value=0, **layout)
    arr[...] = old
    rng = np.random.default_rng(1)
    for _ in range(4):
        with subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), "x", str(tmp_path / "old.npy"),
             str(tmp_path / "new.npy")],
            stdout=subprocess.PIPE, text=True,
        ) as child:  # fmt: skip
            try:
                assert child.stdout is not None and child.stdout.readline() == "ready\n"
                time.sleep(rng.uniform(0.0, 0.3))
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait(30)
        assert child.returncode == -signal.SIGKILL
        by_zarr = zarr_read(root, "x")
        by_us = np.asarray(zarrpipe.Store(root).read("x"))
        for box in stored_objects(layout):
            for reader, got in (("zarr-python", by_zarr), ("zarrpipe", by_us)):
                is_old = np.array_equal(got[box], old[box])
                is_new = np.array_equal(got[box], new[box])
                assert is_old or is_new, f"{reader}: chunk at {box} is neither old nor new"
        array_dir = root / "x"
        for name in files(array_dir):
            if Path(name).name in METADATA or CHUNK_KEY[fmt].fullmatch(name):
                continue
            # The lock file a killed writer left beside its key: never a chunk key.
            assert name.endswith(".__lock"), name
            assert CHUNK_KEY[fmt].fullmatch(name.removesuffix(".__lock")), name


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((100,), "i4"),
        ((5000, 5000), "f8"),
        ((512, 1024, 1024), "u2"),
        ((3, 1, 7), "u1"),
        ((0, 9), "f4"),
    ],
)
def test_chunks_none_guesses_as_zarr_python_does(tmp_path, shape, dtype):
    arr = zarrpipe.Store(str(tmp_path)).create_array("a", shape=shape, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = zarr.create_array(store={}, shape=shape, dtype=dtype).chunks
    assert arr.chunks == want
    sharded = zarrpipe.Store(str(tmp_path)).create_array(
        "s", shape=(4096, 4096), dtype="u2", shards=(2048, 2048)
    )
    assert all(s % c == 0 for s, c in zip(sharded.shards, sharded.chunks, strict=True))


VARIABLE_CASES = {
    "str-v3": dict(dtype=str, zarr_format=3),
    "str-v3-sharded": dict(dtype=str, zarr_format=3, shards=(8, 6)),
    "str-v2": dict(dtype=str, zarr_format=2),
    "bytes-v3": dict(dtype=bytes, zarr_format=3),
    "bytes-v2": dict(dtype=bytes, zarr_format=2),
    "str-v3-fill": dict(dtype=str, zarr_format=3, fill_value="n/a"),
}


@pytest.mark.parametrize("case", sorted(VARIABLE_CASES))
def test_variable_length_arrays_are_created_as_zarr_python_creates_them(tmp_path, case):
    kwargs = dict(VARIABLE_CASES[case])
    is_bytes = kwargs["dtype"] is bytes
    shape, chunks = (8, 6), (4, 3)
    ours = new_store(tmp_path / "ours.zarr").create_array("x", shape=shape, chunks=chunks, **kwargs)
    if is_bytes:
        from zarr.core.dtype import VariableLengthBytes

        kwargs["dtype"] = VariableLengthBytes()  # zarr-python reads `bytes` as "|S0"
    with quiet_zarr_writes():
        zarr.create_array(
            LocalStore(tmp_path / "theirs.zarr"), name="x", shape=shape, chunks=chunks, **kwargs
        )
    diff = json_diff(
        metadata_docs(tmp_path / "ours.zarr" / "x"), metadata_docs(tmp_path / "theirs.zarr" / "x")
    )
    assert not diff, diff
    words = [f"w{i}" * (i % 4) for i in range(48)]  # "" included: the fill of most cases
    data = np.array([w.encode() for w in words] if is_bytes else words, dtype=object)
    data = data.reshape(shape)
    ours[1:7, :] = data[1:7]
    want = data.copy()
    fill = kwargs.get("fill_value", b"" if is_bytes else "")
    want[0], want[7] = fill, fill
    assert zarr_read(tmp_path / "ours.zarr", "x").tolist() == want.tolist()
    assert ours[...].tolist() == want.tolist()


SUB_BYTE = {"int2": (2, True), "int4": (4, True), "uint2": (2, False), "uint4": (4, False)}


def _packbits(values: np.ndarray, bits: int) -> bytes:
    """The spec's packbits (zarr-extensions), written out independently: each element's low
    `bits` bits in order from bit 0 of byte 0, zero-padded, the padding count first."""
    stream = []
    for v in values.view(np.uint8).tolist():
        stream += [(v >> b) & 1 for b in range(bits)]
    pad = -len(stream) % 8
    stream += [0] * pad
    out = bytes(
        sum(bit << k for k, bit in enumerate(stream[i : i + 8])) for i in range(0, len(stream), 8)
    )
    return bytes([pad]) + out


@pytest.mark.parametrize("name", list(SUB_BYTE))
def test_sub_byte_integers_as_zarr_extensions_spells_them(tmp_path, name):
    """ml_dtypes' sub-byte integers are zarr-extensions' `int2`/`int4`/`uint2`/`uint4`: one
    byte each in the `bytes` codec (sign-extended when signed), `bits` bits in `packbits`."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bits, signed = SUB_BYTE[name]
    dtype = np.dtype(getattr(ml_dtypes, name))
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    values = np.array([lo, hi, 0, 1, lo, hi, 1], dtype=np.int8).astype(dtype)
    store = zarrpipe.Store(tmp_path / "s.zarr")
    arr = store.create_array(
        "x", shape=(9,), dtype=dtype, chunks=(9,), fill_value=hi, compressors=None
    )
    meta = json.loads((tmp_path / "s.zarr" / "x" / "zarr.json").read_text())
    assert (meta["data_type"], meta["fill_value"]) == (name, hi)
    arr[1:8] = values
    got = arr[...]
    assert got.dtype == dtype
    assert got.astype(np.int8).tolist() == [hi, *values.astype(np.int8).tolist(), hi]
    stored = (tmp_path / "s.zarr" / "x" / "c" / "0").read_bytes()
    assert list(stored) == [v & 0xFF for v in got.astype(np.int8).tolist()]
    # Types DLPack cannot describe keep to_numpy().
    t = arr.read()
    with pytest.raises(BufferError):
        t.__dlpack__()
    assert t.to_numpy().astype(np.int8).tolist() == got.astype(np.int8).tolist()
    # packbits, as the spec lays it out, read and written.
    meta["codecs"] = [{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}]
    (tmp_path / "s.zarr" / "p").mkdir()
    (tmp_path / "s.zarr" / "p" / "zarr.json").write_text(json.dumps(meta))
    (tmp_path / "s.zarr" / "p" / "c").mkdir()
    (tmp_path / "s.zarr" / "p" / "c" / "0").write_bytes(_packbits(got, bits))
    packed = store.open_array("p")
    assert packed[...].astype(np.int8).tolist() == got.astype(np.int8).tolist()
    packed[0] = np.array(lo, np.int8).astype(dtype)
    want = got.astype(np.int8)
    want[0] = lo
    assert (tmp_path / "s.zarr" / "p" / "c" / "0").read_bytes() == _packbits(
        want.astype(dtype), bits
    )
    # Zarr v2 has no such type: refused before anything is written.
    with pytest.raises(TypeError, match="zarr_format=3"):
        store.create_array("v2", shape=(4,), dtype=dtype, chunks=(4,), zarr_format=2)
    assert not (tmp_path / "s.zarr" / "v2").exists()


@pytest.mark.parametrize(("name", "bits"), [("float4_e2m1fn", 4), ("float6_e2m3fn", 6)])
def test_small_floats_packed_by_packbits_at_their_width(tmp_path, name, bits):
    """`packbits` packs a 4- or 6-bit float in 4 or 6 bits (the spec), not as a byte."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype(getattr(ml_dtypes, name))
    values = np.array([0.5, -1.0, 2.0, 0.0, 1.5], dtype=np.float32).astype(dtype)
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [5],
        "data_type": name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}],
    }
    (tmp_path / "p" / "c").mkdir(parents=True)
    (tmp_path / "p" / "zarr.json").write_text(json.dumps(meta))
    (tmp_path / "p" / "c" / "0").write_bytes(_packbits(values, bits))
    arr = zarrpipe.Store(tmp_path).open_array("p")
    assert arr.dtype == dtype
    assert arr[...].astype(np.float32).tolist() == values.astype(np.float32).tolist()
    arr[1] = np.array(-0.5, np.float32).astype(dtype)
    values[1] = np.array(-0.5, np.float32).astype(dtype)
    assert (tmp_path / "p" / "c" / "0").read_bytes() == _packbits(values, bits)


def test_reshape_codec_read_and_written(tmp_path):
    """zarr-extensions' `reshape` (axes of a chunk merged before `bytes`): zarrs runs it;
    reads and writes equal NumPy, and a stored chunk is its C-order elements, zstd'd."""
    numcodecs = pytest.importorskip("numcodecs")
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4, 6, 8],
        "data_type": "int16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3, 8]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [
            {"name": "reshape", "configuration": {"shape": [[0, 1], [2]]}},
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
        ],
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(meta))
    arr = zarrpipe.Store(tmp_path).open_array("a")
    values = np.arange(4 * 6 * 8, dtype="<i2").reshape(4, 6, 8)
    arr[...] = values
    assert arr[...].tolist() == values.tolist()
    assert arr[1:3, 2:5, 3].tolist() == values[1:3, 2:5, 3].tolist()
    stored = numcodecs.Zstd().decode((tmp_path / "a" / "c" / "1" / "1" / "0").read_bytes())
    assert np.frombuffer(stored, "<i2").tolist() == values[2:4, 3:6].ravel().tolist()
    arr[3, 5, 7] = -1
    assert arr[3, 5, 7] == -1 and arr[3, 5, 6] == values[3, 5, 6]
