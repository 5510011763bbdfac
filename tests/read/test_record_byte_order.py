"""Byte order of records and times: what zarrpipe stores and reads equals zarr-python's own
pipeline, whatever byte order the caller's NumPy dtype has; v3 records whose bytes codec
stores their fields in the other byte order (big-endian, `BytesCodec(endian="big")`) are
read and written with every multi-byte field swapped, natively and through the pipeline,
with the bytes zarr-python stores."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BytesCodec

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline"}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}

RECORDS = [
    np.dtype([("a", ">i4"), ("b", ">i2"), ("c", ">f8")]),
    np.dtype([("a", "<i4"), ("b", "<i2"), ("c", "<f8")]),
    np.dtype([("t", ">M8[s]"), ("d", ">m8[ms]")]),
]
TIMES = [np.dtype(">M8[s]"), np.dtype(">m8[us]"), np.dtype("<M8[10ms]")]


def sample(dtype: np.dtype, n: int) -> np.ndarray:
    if dtype.names is None:
        return (np.arange(n, dtype=np.int64) * 7 - 3).astype(f"{dtype.byteorder}i8").view(dtype)
    data = np.zeros(n, dtype)
    for k, name in enumerate(dtype.names):
        field = dtype.fields[name][0]
        counts = np.arange(n, dtype=np.int64) * (k + 3) - 5
        data[name] = counts.view(field.newbyteorder("=")) if field.kind in "Mm" else counts
    return data


def write(path: Path, dtype: np.dtype, zarr_format: int, pipeline: dict) -> np.ndarray:
    data = sample(dtype, 10)
    with warnings.catch_warnings(), zarr.config.set(pipeline):
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        a = zarr.create_array(
            path, shape=(12,), chunks=(4,), dtype=dtype, zarr_format=zarr_format, compressors=None
        )
        a[:10] = data
    return data


def read(path: Path, pipeline: dict) -> np.ndarray:
    with warnings.catch_warnings(), zarr.config.set(pipeline):
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        return np.asarray(zarr.open_array(path, mode="r")[:])


def stored(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.name.startswith(".z") and p.name != "zarr.json"
    }


# zarr-python before 3.2 stores v3 records in the caller's byte order whatever the bytes codec
# says, and misreads them when that is not little-endian (zarr-python issue #4141).
OLD_ZARR = tuple(int(x) for x in zarr.__version__.split(".")[:2]) < (3, 2)


def foreign_record(dtype: np.dtype, zarr_format: int) -> bool:
    return (
        zarr_format == 3
        and dtype.names is not None
        and any(not dtype.fields[n][0].isnative for n in dtype.names)
    )


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", RECORDS + TIMES, ids=str)
def test_bytes_and_values_equal_zarr_pythons(tmp_path: Path, dtype: np.dtype, zarr_format: int):
    ours = write(tmp_path / "ours.zarr", dtype, zarr_format, OURS)
    if OLD_ZARR and foreign_record(dtype, zarr_format):
        # The spec's bytes (fields little-endian, as zarr-python 3.2+ writes), read back.
        first = ours[:4].astype(dtype.newbyteorder("<")).tobytes()
        assert (tmp_path / "ours.zarr" / "c" / "0").read_bytes() == first
        assert read(tmp_path / "ours.zarr", OURS)[:10].tolist() == ours.tolist()
        native = zarrpipe.Store(tmp_path).read("ours.zarr").to_numpy()
        assert native[:10].tolist() == ours.tolist()
        return
    write(tmp_path / "theirs.zarr", dtype, zarr_format, DEFAULT)
    assert stored(tmp_path / "ours.zarr") == stored(tmp_path / "theirs.zarr")
    for store in ("ours.zarr", "theirs.zarr"):
        for pipeline in (OURS, DEFAULT):
            back = read(tmp_path / store, pipeline)
            # Equal values, compared field by field whatever byte order each side has.
            assert back[:10].tolist() == ours.tolist(), (store, pipeline)
    native = zarrpipe.Store(tmp_path).read("theirs.zarr").to_numpy()
    assert native[:10].tolist() == ours.tolist()


BIG_RECORDS = [
    np.dtype([("a", "<i4"), ("b", "<i2")]),
    # Every kind of field a byte order changes: complex halves, times, UTF-32 code points,
    # nested records; and one-byte fields between them. (zarr-python 3.4 has no sub-array
    # fields; the engine's unit tests cover their spans.)
    np.dtype(
        [
            ("u", "u1"),
            ("c", "<c8"),
            ("t", "<M8[s]"),
            ("s", "<U2"),
            ("n", [("x", "<u2"), ("y", "i1")]),
        ]
    ),
]


def big_sample(dtype: np.dtype, n: int) -> np.ndarray:
    """Values whose every byte differs from its byte-swapped twin where it can."""
    data = np.zeros(n, dtype)
    raw = data.view(np.uint8).reshape(n, dtype.itemsize)
    raw[:] = (np.arange(raw.size) % 251 + 1).reshape(raw.shape).astype(np.uint8)
    if "t" in dtype.names:
        data["t"] = np.arange(n).astype("M8[s]")
    if "s" in dtype.names:
        data["s"] = [chr(0x41 + i) + chr(0x3B1 + i) for i in range(n)]
    if "c" in dtype.names:
        data["c"] = np.arange(n) * (1.5 - 2j)
    return data


def big_endian_array(path: Path, dtype: np.dtype, sharded: bool, pipeline: dict) -> zarr.Array:
    with warnings.catch_warnings(), zarr.config.set(pipeline):
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        return zarr.create_array(
            path,
            shape=(10,),
            chunks=(2,) if sharded else (4,),
            shards=(4,) if sharded else None,
            dtype=dtype,
            serializer=BytesCodec(endian="big"),
            compressors=None,
            fill_value=None,
        )


@pytest.mark.parametrize("sharded", [False, True], ids=["chunks", "shards"])
@pytest.mark.parametrize("dtype", BIG_RECORDS, ids=["ab", "all-kinds"])
def test_records_stored_big_endian_read_and_write_as_zarr_python(
    tmp_path: Path, dtype: np.dtype, sharded: bool
):
    if OLD_ZARR:
        pytest.skip("zarr-python before 3.2 stores records in the caller's byte order")
    data = big_sample(dtype, 10)
    theirs = big_endian_array(tmp_path / "theirs.zarr", dtype, sharded, DEFAULT)
    theirs[:7] = data[:7]
    # Read natively (whole, a part, one element) and through the pipeline in strict mode.
    store = zarrpipe.Store(tmp_path)
    assert store.read("theirs.zarr").to_numpy()[:7].tolist() == data[:7].tolist()
    arr = store.open_array("theirs.zarr")
    assert arr[2:6].tolist() == data[2:6].tolist()
    assert arr[8].tolist() == np.zeros((), dtype).tolist()  # never written: the fill value
    assert read(tmp_path / "theirs.zarr", OURS)[:7].tolist() == data[:7].tolist()
    # Written through the pipeline (partial chunks: read, modify, write) and natively: the
    # stored bytes are zarr-python's own, and both read them back.
    ours = big_endian_array(tmp_path / "ours.zarr", dtype, sharded, OURS)
    with zarr.config.set(OURS), warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        ours[:3] = data[:3]
        ours[3:7] = data[3:7]
    assert stored(tmp_path / "ours.zarr") == stored(tmp_path / "theirs.zarr")
    native = store.open_array("theirs.zarr")
    native[7:10] = data[7:10]
    native[0] = data[9]
    expected = data.copy()
    expected[0] = data[9]
    for pipeline in (DEFAULT, OURS):
        assert read(tmp_path / "theirs.zarr", pipeline).tolist() == expected.tolist()
    assert native[:].tolist() == expected.tolist()
