"""Byte order of records and times: what zarrpipe stores and reads equals zarr-python's own
pipeline, whatever byte order the caller's NumPy dtype has; v3 records whose bytes codec
stores their fields in the other byte order are refused cleanly (the engine swaps no field),
never read as wrong values."""

from __future__ import annotations

import json
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


def test_records_stored_big_endian_are_refused_not_misread(tmp_path: Path):
    dtype = np.dtype([("a", "<i4"), ("b", "<i2")])
    data = sample(dtype, 6)
    with warnings.catch_warnings(), zarr.config.set(DEFAULT):
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        a = zarr.create_array(
            tmp_path / "big.zarr",
            shape=(6,),
            chunks=(3,),
            dtype=dtype,
            serializer=BytesCodec(endian="big"),
            compressors=None,
        )
        a[:] = data
    codecs = json.loads((tmp_path / "big.zarr" / "zarr.json").read_text())["codecs"]
    if codecs[0].get("configuration", {}).get("endian") != "big":
        # zarr-python before 3.2 drops the endian of a record's bytes codec (stores as is).
        assert OLD_ZARR
        assert zarrpipe.Store(tmp_path).read("big.zarr").to_numpy().tolist() == data.tolist()
        return
    with pytest.raises(zarrpipe.UnsupportedError, match="record fields"):
        zarrpipe.Store(tmp_path).read("big.zarr")
    # Through zarr-python, zarrpipe's pipeline hands the array back, and says so.
    with (
        warnings.catch_warnings(),
        pytest.warns(zarrpipe.FallbackWarning, match="record fields"),
        zarr.config.set(OURS),
    ):
        warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
        back = zarr.open_array(tmp_path / "big.zarr", mode="r")[:]
    assert back.tolist() == data.tolist()
