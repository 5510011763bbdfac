"""The data type matrix: every fixed-size and variable-length data type zarr-python writes
(datetime64/timedelta64 in any unit and scale, fixed-length UTF-32, null-terminated and raw
bytes, structured records, variable-length strings and bytes) x codecs (none, zstd, gzip,
blosc, sharded, v2 numcodecs) x odd fill values x missing chunks. `Store.read`,
`Array.read_chunks` and zarr-python under `zarrpipe.CodecPipeline` (no FallbackWarning) must
return exactly zarr-python's values and dtypes; arrays zarrpipe writes, through either API,
must read back equal in zarr-python."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import (
    all_chunk_indices,
    chunk_slices,
    quiet_zarr_writes,
    reference,
    write_array,
)
from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

SHAPE = (10, 7)
CHUNKS = (4, 3)
SHARDS = (8, 6)
RNG_SEED = 11
STRUCT = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")])
# v2 only: a big-endian field, stored (and returned) as it is.
STRUCT_V2 = np.dtype([("x", ">i2"), ("y", "<f4")])
HAS_STRING_DTYPE = hasattr(np.dtypes, "StringDType")


def _vlen_bytes() -> Any:
    from zarr.core.dtype import VariableLengthBytes

    return VariableLengthBytes()


# id -> (dtype as create_array takes it, fill values to try: None is zarr-python's default)
DTYPES: dict[str, tuple[Any, list[Any]]] = {
    "M8[ns]": ("datetime64[ns]", [None, np.datetime64("2001-02-03T04:05:06", "ns")]),
    "M8[10s]": ("datetime64[10s]", [np.datetime64("NaT", "10s"), None]),
    "m8[ms]": ("timedelta64[ms]", [np.timedelta64(-5, "ms"), None]),
    "m8[10s]": ("timedelta64[10s]", [None, np.timedelta64("NaT", "10s")]),
    "<U7": ("<U7", ["", "zz"]),
    ">U13": (">U13", ["é€", None]),
    "|S7": ("|S7", [b"\x00", b"ab"]),
    "|V8": ("|V8", [None, np.void(b"\x01\x02\x03\x04\x05\x06\x07\x08")]),
    "struct": (STRUCT, [None, np.array((7, 2.5, b"x"), dtype=STRUCT)[()]]),
    "struct-v2": (STRUCT_V2, [None]),
    "str": (str, ["", "fill"]),
    "bytes": ("vlen-bytes", [b"", b"\x00"]),
}
V2_ONLY = {"struct-v2"}


def values(dtype: np.dtype, shape: tuple[int, ...], seed: int = RNG_SEED) -> np.ndarray:
    """Distinct values of `dtype`, with its odd ones (NaT, '', NUL bytes) mixed in."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype.kind in "Mm":
        out = rng.integers(-(10**12), 10**12, n).astype(np.int64).view(dtype)
        out[::5] = np.array("NaT", dtype=dtype)
    elif dtype.kind == "U":
        pool = ["", "a", "é", "€uro", "x" * 7, "日本", "ab\x00c", "🙂"]
        width = dtype.itemsize // 4
        out = np.array(
            [pool[i % len(pool)][:width] + str(rng.integers(10))[: max(0, width - 3)]
             for i in range(n)],
            dtype=dtype,
        )  # fmt: skip
    elif dtype.kind == "S":
        out = np.array([bytes(rng.integers(0, 256, dtype.itemsize - i % 3)) for i in range(n)],
                       dtype=dtype)  # fmt: skip
    elif dtype.kind == "V" and dtype.names is None:
        out = np.frombuffer(rng.bytes(n * dtype.itemsize), dtype=dtype).copy()
    elif dtype.names is not None:
        out = np.frombuffer(rng.bytes(n * dtype.itemsize), dtype=dtype).copy()
        for name in dtype.names:
            field = dtype.fields[name][0]  # type: ignore[index]
            base = field.base if field.subdtype is not None else field
            if base.kind == "f":  # no NaN payload games: compare as bytes anyway
                out[name] = rng.standard_normal(out[name].shape)
    else:
        raise AssertionError(dtype)
    return out.reshape(shape)


def text_values(shape: tuple[int, ...], kind: str) -> np.ndarray:
    pool = ["", "a", "é", "€uro", "label-0042", "日本語", "🙂🙂", "x" * 50]
    items = [pool[i % len(pool)] + ("" if i % 4 else str(i)) for i in range(int(np.prod(shape)))]
    if kind == "bytes":
        return np.array([s.encode() + b"\x00" * (i % 2) for i, s in enumerate(items)],
                        dtype=object).reshape(shape)  # fmt: skip
    dtype = np.dtypes.StringDType() if HAS_STRING_DTYPE else object
    return np.array(items, dtype=dtype).reshape(shape)


# id -> (zarr_format, create_array keyword arguments, sharded)
CODECS: dict[str, tuple[int, dict[str, Any], bool]] = {
    "v3-none": (3, {"compressors": None}, False),
    "v3-zstd": (3, {"compressors": [ZstdCodec(level=3)]}, False),
    "v3-gzip": (3, {"compressors": [GzipCodec(level=1)]}, False),
    "v3-blosc-lz4-shuffle": (
        3,
        {"compressors": [BloscCodec(cname="lz4", shuffle="shuffle")]},
        False,
    ),
    "v3-blosc-zstd-bitshuffle": (
        3,
        {"compressors": [BloscCodec(cname="zstd", shuffle="bitshuffle")]},
        False,
    ),
    "v3-sharded-zstd": (3, {"compressors": [ZstdCodec()]}, True),
    "v2-none": (2, {"compressors": None}, False),
    "v2-zstd": (2, {"compressors": numcodecs.Zstd(level=1)}, False),
    "v2-blosc": (2, {"compressors": numcodecs.Blosc(cname="lz4", shuffle=1)}, False),
    "v2-gzip": (2, {"compressors": numcodecs.GZip(level=1)}, False),
}


def cases() -> list[Any]:
    out = []
    for k, (did, cid) in enumerate(itertools.product(DTYPES, CODECS)):
        fmt = CODECS[cid][0]
        if did in V2_ONLY and fmt != 2:
            continue
        fills = DTYPES[did][1]
        fill = fills[k % len(fills)]
        missing = "partial" if k % 2 else "none"
        out.append(pytest.param(did, cid, fill, missing, id=f"{did}-{cid}-{missing}"))
    return out


def zarr_dtype(did: str) -> Any:
    spec = DTYPES[did][0]
    return _vlen_bytes() if spec == "vlen-bytes" else spec


def data_for(did: str) -> np.ndarray:
    spec = DTYPES[did][0]
    if spec == "vlen-bytes":
        return text_values(SHAPE, "bytes")
    if spec is str:
        return text_values(SHAPE, "str")
    return values(np.dtype(spec), SHAPE)


def as_array(x: Any) -> np.ndarray:
    """A read result as NumPy: Tensors through np.asarray (which must keep their dtype)."""
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def assert_same(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    """zarr-python's dtype (native byte order where zarrpipe swapped; records as stored)
    and exactly its values: every byte of fixed-size elements, every object otherwise."""
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    want = expected.dtype
    if want.names is None and want.kind not in "OT":
        want = want.newbyteorder("=")
    assert actual.dtype == want, f"{what}: dtype {actual.dtype} != {want}"
    if want.kind in "OT":
        assert actual.tolist() == expected.tolist(), what
    else:
        assert actual.tobytes() == expected.astype(want).tobytes(), what


def make(tmp_path: Any, did: str, cid: str, fill: Any, missing: str) -> tuple[str, np.ndarray]:
    fmt, kwargs, sharded = CODECS[cid]
    data = data_for(did)
    root = str(tmp_path / "store")
    try:
        write_array(
            root,
            data,
            path="a",
            chunks=CHUNKS,
            shards=SHARDS if sharded else None,
            missing=missing,
            dtype=zarr_dtype(did),
            fill_value=fill,
            zarr_format=fmt,
            **kwargs,
        )
    except TypeError as e:
        if sharded and "unhashable" in str(e):
            # zarr-python 3.1's sharding codec hashes the fill value: no void fills.
            pytest.skip(f"zarr-python cannot write this array: {e}")
        raise
    return root, data


@pytest.mark.parametrize(("did", "cid", "fill", "missing"), cases())
def test_zarr_python_written_arrays_read_exactly(
    tmp_path: Any, did: str, cid: str, fill: Any, missing: str
) -> None:
    root, _ = make(tmp_path, did, cid, fill, missing)
    z, expected = reference(root, "a")
    store = zarrpipe.Store(root)
    arr = store.open_array("a")
    assert arr.dtype == (
        expected.dtype
        if expected.dtype.names is not None or expected.dtype.kind in "OT"
        else expected.dtype.newbyteorder("=")
    )
    assert_same(as_array(store.read("a")), expected, "Store.read")
    assert_same(as_array(arr[2:9, 1:6]), expected[2:9, 1:6], "arr[2:9, 1:6]")
    assert_same(as_array(arr[3]), expected[3], "arr[3]")
    indices = all_chunk_indices(SHAPE, arr.chunks)
    for index, got in zip(indices, arr.read_chunks(indices), strict=True):
        region = chunk_slices(SHAPE, arr.chunks, index)
        assert_same(as_array(got), expected[region], f"chunk {index}")
    fill_dtype = expected.dtype
    if z.fill_value is None:
        # v2 `fill_value: null`: zarr-python reads missing chunks as the type's default,
        # which the reads above compared.
        pass
    elif fill_dtype.kind in "OT":
        assert arr.fill_value == z.fill_value
    else:
        got_fill = np.asarray(arr.fill_value, dtype=fill_dtype.newbyteorder("="))
        want_fill = np.asarray(z.fill_value, dtype=fill_dtype).astype(got_fill.dtype)
        assert got_fill.tobytes() == want_fill.tobytes()


@pytest.mark.parametrize(("did", "cid", "fill", "missing"), cases())
def test_zarr_python_under_the_pipeline_reads_natively(
    tmp_path: Any, did: str, cid: str, fill: Any, missing: str
) -> None:
    root, _ = make(tmp_path, did, cid, fill, missing)
    _, expected = reference(root, "a")
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}):
        with warnings.catch_warnings():
            # Big-endian buffers too: decoded native, swapped into zarr-python's buffer.
            warnings.simplefilter("error", zarrpipe.FallbackWarning)
            z = zarr.open_array(store=root, path="a", mode="r")
            got = np.asarray(z[...])
            part = np.asarray(z[1:7, 2:5])
    # zarr-python allocates the output: its dtype, byte order included.
    assert_identical(got, expected, "pipeline [...]")
    assert_identical(part, expected[1:7, 2:5], "pipeline [1:7, 2:5]")


def assert_identical(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, what
    if expected.dtype.kind in "OT":
        assert actual.tolist() == expected.tolist(), what
    else:
        assert actual.tobytes() == expected.tobytes(), what


WRITE_CASES = [
    pytest.param(did, cid, id=f"{did}-{cid}")
    for did, cid in itertools.product(DTYPES, ["v3-zstd", "v3-sharded-zstd", "v2-blosc"])
    if not (did in V2_ONLY and CODECS[cid][0] != 2)
]


@pytest.mark.parametrize(("did", "cid"), WRITE_CASES)
def test_zarrpipe_writes_read_back_in_zarr_python(tmp_path: Any, did: str, cid: str) -> None:
    fmt, kwargs, sharded = CODECS[cid]
    data = data_for(did)
    fill = DTYPES[did][1][-1]
    spec = DTYPES[did][0]
    if spec == "vlen-bytes":
        spec = "variable_length_bytes"
    (tmp_path / "np").mkdir()
    store = zarrpipe.Store(str(tmp_path / "np"), mode="a")
    arr = store.create_array(
        "a",
        shape=SHAPE,
        dtype=spec,
        chunks=CHUNKS,
        shards=SHARDS if sharded else None,
        compressors=[c.get_config() if hasattr(c, "get_config") else c.to_dict()
                     for c in ([kwargs["compressors"]] if fmt == 2 else kwargs["compressors"])],
        fill_value=fill,
        zarr_format=fmt,
    )  # fmt: skip
    arr[...] = data
    arr[0:2, 0:3] = data[5:7, 1:4]  # a partial overwrite (read-modify-write)
    mirror = data.copy()
    mirror[0:2, 0:3] = data[5:7, 1:4]
    try:
        _, got = reference(str(tmp_path / "np"), "a")
    except TypeError as e:
        if sharded and "unhashable" in str(e):
            pytest.skip(f"zarr-python cannot read this sharded array: {e}")
        raise
    native = got.dtype.names is None and got.dtype.kind not in "OT"
    assert_same(got.astype(got.dtype.newbyteorder("=")) if native else got,
                mirror, "zarr-python reading zarrpipe's array")  # fmt: skip
    assert_same(as_array(store.read("a")), got, "zarrpipe reading its own array")


@pytest.mark.parametrize(("did", "cid"), WRITE_CASES)
def test_pipeline_writes_read_back_with_zarr_python(tmp_path: Any, did: str, cid: str) -> None:
    fmt, kwargs, sharded = CODECS[cid]
    data = data_for(did)
    root = str(tmp_path / "p")
    with (
        zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}),
        quiet_zarr_writes(),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        try:
            z = zarr.create_array(
                store=root,
                shape=SHAPE,
                dtype=zarr_dtype(did),
                chunks=CHUNKS,
                shards=SHARDS if sharded else None,
                zarr_format=fmt,
                fill_value=DTYPES[did][1][0],
                **kwargs,
            )
            z[...] = data
            z[1:3, 2:4] = data[4:6, 0:2]
        except TypeError as e:
            if sharded and "unhashable" in str(e):
                pytest.skip(f"zarr-python cannot write this array: {e}")
            raise
    mirror = data.copy()
    mirror[1:3, 2:4] = data[4:6, 0:2]
    try:
        _, got = reference(root)
    except TypeError as e:
        if sharded and "unhashable" in str(e):
            pytest.skip(f"zarr-python cannot read this sharded array: {e}")
        raise
    assert_identical(got, np.asarray(mirror, dtype=got.dtype), "pipeline write")


# ---------------------------------------------------------------------------------------------
# the Tensor faces of types DLPack cannot describe


@pytest.mark.parametrize(
    "dtype",
    ["datetime64[ns]", "timedelta64[10s]", "<U5", "|S3", "|V4", STRUCT],
    ids=["M8", "m8", "U5", "S3", "V4", "struct"],
)
def test_tensors_of_non_dlpack_types_keep_their_dtype(tmp_path: Any, dtype: Any) -> None:
    dt = np.dtype(dtype)
    data = values(dt, (3, 4))
    store = zarrpipe.Store(str(tmp_path), mode="a")
    arr = store.create_array("x", shape=data.shape, dtype=dt, chunks=(2, 3))
    arr[...] = data
    indexed = arr[...]  # indexing: a writable NumPy array of the dtype, no DLPack needed
    assert isinstance(indexed, np.ndarray) and indexed.dtype == dt and indexed.flags.writeable
    assert indexed.tobytes() == data.tobytes()
    t = arr.read()
    assert isinstance(t, zarrpipe.Tensor) and t.dtype == dt
    # np.asarray: the buffer protocol refuses, __array__ gives the dtype (not int64 / void).
    got = np.asarray(t)
    assert got.dtype == dt and got.tobytes() == data.tobytes()
    assert t.to_numpy().dtype == dt
    assert bytes(t.buffer()) == data.tobytes()
    with pytest.raises(BufferError, match="no buffer-protocol format"):
        memoryview(t)
    with pytest.raises(BufferError, match="DLPack has no type code"):
        np.from_dlpack(t)
    with pytest.raises(BufferError, match="DLPack has no type code"):
        t.into_dlpack()
    assert np.asarray(t).tobytes() == data.tobytes(), "a refused into_dlpack leaves it intact"
    copy = zarrpipe.Tensor.from_numpy(data)
    assert copy.dtype == dt and np.asarray(copy).tobytes() == data.tobytes()


def test_small_floats_round_trip_with_ml_dtypes(tmp_path: Any) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    store = zarrpipe.Store(str(tmp_path), mode="a")
    for name in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        dt = np.dtype(getattr(ml_dtypes, name))
        data = np.array([[0.5, -1.0, 2.0], [0.0, 1.5, -0.5]], dtype=dt)
        arr = store.create_array(name, shape=(2, 3), dtype=dt, chunks=(1, 2),
                                 fill_value=1.0)  # fmt: skip
        arr[0] = data[0]
        got = np.asarray(store.read(name))
        assert got.dtype == dt
        want = np.array([data[0], np.ones(3, dt)])
        assert got.tobytes() == want.tobytes(), name
        meta = (tmp_path / name / "zarr.json").read_text()
        assert f'"data_type": "{name}"' in meta


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_orthogonal_and_coordinate_selections_of_strings_equal_numpy(tmp_path, zarr_format):
    """Strings: oindex/vindex read only the box spanning the selection, then NumPy picks."""
    data = np.array(
        [[f"s{i}-{j}" * (1 + (i + j) % 3) for j in range(7)] for i in range(9)], dtype=object
    )
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}):
        z = zarr.create_array(
            tmp_path / "s.zarr", shape=data.shape, chunks=(4, 3), dtype=str, zarr_format=zarr_format
        )
        z[...] = data
    a = zarrpipe.Store(str(tmp_path), mode="r").open_array("s.zarr")
    expect = data.astype(str)
    rows, cols = np.array([8, 0, 3, 3, -1]), np.array([6, 1, 1, 0, 2])
    mask = (np.arange(63).reshape(9, 7) % 5) == 0
    cases = [
        (a.oindex[rows, 2:6], expect[np.ix_(rows % 9, np.arange(2, 6))]),
        (a.oindex[[1, 5], ::-2], expect[np.ix_([1, 5], np.arange(6, -1, -2))]),
        (a.oindex[mask.any(axis=1), [4]], expect[np.ix_(mask.any(axis=1), [4])]),
        (a.vindex[rows, cols], expect[rows, cols]),
        (a.vindex[mask], expect[mask]),
        (a.vindex[[[0, 8], [2, 2]], 3], expect[[[0, 8], [2, 2]], 3]),
        (a.oindex[[], :], expect[[], :]),
        (a[::-2, 1], expect[::-2, 1]),
        (a[mask], expect[mask]),
        (a[None, 1:3, [0, 0]], expect[None, 1:3, [0, 0]]),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        assert got.tolist() == want.tolist()
    # Only the box spanning a selection is read: a damaged chunk outside it is never decoded.
    key = "2.2" if zarr_format == 2 else "c/2/2"
    (tmp_path / "s.zarr" / key).write_bytes(b"not a chunk")
    assert a.vindex[[0, 5], [1, 4]].tolist() == expect[[0, 5], [1, 4]].tolist()
    assert a.oindex[[1, 4], ::3][:, :2].tolist() == expect[np.ix_([1, 4], [0, 3])].tolist()
    with pytest.raises(zarrpipe.DecodeError):
        a.vindex[[0, 8], [1, 6]]
