"""Arrays that zarr-python's own test suite made zarrpipe's pipeline hand back to zarr-python
(or fail): each is now read and written natively, in strict mode (a fallback would raise), with
the values and stored bytes of zarr-python's default pipeline, and read by the native API."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BytesCodec, ShardingCodec

OURS = {"codec_pipeline.path": "zarrpipe.CodecPipeline", "codec_pipeline.strict": True}
DEFAULT = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}
ZARR = tuple(int(x) for x in zarr.__version__.split(".")[:2])
GENERIC_DEPRECATED = "ignore:The 'generic' unit for NumPy timedelta:DeprecationWarning"


def stored(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name not in ("zarr.json", ".zarray", ".zattrs")
    }


def both(tmp_path: Path, make, fill) -> None:
    """`make(path)` creates an array; `fill(array)` writes it. Written once by each pipeline:
    the same stored bytes, and each pipeline (and the native API) reads both back alike."""
    for name, pipeline in (("ours", OURS), ("theirs", DEFAULT)):
        with zarr.config.set(pipeline), warnings.catch_warnings():
            warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
            fill(make(tmp_path / name))
    assert stored(tmp_path / "ours") == stored(tmp_path / "theirs")
    results = []
    for name in ("ours", "theirs"):
        for pipeline in (OURS, DEFAULT):
            with zarr.config.set(pipeline), warnings.catch_warnings():
                warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
                results.append(np.asarray(zarr.open_array(tmp_path / name, mode="r")[...]))
        results.append(zarrpipe.Store(tmp_path).open_array(name)[...])
    for r in results[1:]:
        if r.dtype.kind in "Mm":
            # Times in either byte order (the native API gives native ones): their counts.
            assert np.datetime_data(r.dtype) == np.datetime_data(results[0].dtype)
            assert counts(r) == counts(results[0])
        else:
            assert r.dtype == results[0].dtype
            assert r.tobytes() == results[0].tobytes()


def counts(times: np.ndarray) -> list[int]:
    """A time array's int64 counts, whatever its byte order (NumPy's casts of generic-unit
    times between byte orders do not swap; views of the counts do)."""
    order = times.dtype.byteorder if times.dtype.byteorder in "<>" else ""
    return times.view(f"{order}i8").tolist()


@pytest.mark.skipif(ZARR < (3, 4), reason="zarr-python 3.1's own pipeline fails on it")
def test_zero_dimensional_sharded_array(tmp_path: Path):
    def make(path: Path) -> zarr.Array:
        return zarr.create_array(path, shape=(), dtype="f4", chunks=(), shards=())

    def fill(a: zarr.Array) -> None:
        a[...] = 2.5
        assert float(a[...]) == 2.5

    both(tmp_path, make, fill)


@pytest.mark.skipif(ZARR < (3, 2), reason="zarr.codecs.numcodecs.CRC32 is in zarr-python 3.2+")
def test_shard_index_with_a_numcodecs_checksum(tmp_path: Path):
    """A shard index checked by numcodecs' crc32 (zarr-python's suite has it): zarrs encodes
    the index, which needs the checksum's fixed size."""
    from zarr.codecs.numcodecs import CRC32

    def make(path: Path) -> zarr.Array:
        codec = ShardingCodec(chunk_shape=(2,), index_codecs=(BytesCodec(), CRC32()))
        return zarr.create_array(
            path, shape=(16,), dtype="i4", chunks=(8,), serializer=codec, compressors=None
        )

    def fill(a: zarr.Array) -> None:
        a[:] = np.arange(16, dtype="i4")
        a[3:6] = -1

    both(tmp_path, make, fill)


def times_array(dtype: np.dtype, zarr_format: int):
    """`both`'s `make` for six times of `dtype`, chunks of two, uncompressed."""

    def make(path: Path) -> zarr.Array:
        return zarr.create_array(
            path, shape=(6,), dtype=dtype, chunks=(2,), zarr_format=zarr_format, compressors=None
        )

    return make


@pytest.mark.skipif(ZARR < (3, 4), reason="zarr-python reads generic time units since 3.4")
@pytest.mark.filterwarnings(GENERIC_DEPRECATED)
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("spelling", ["<M8", "<m8[2generic]", "<M8[7generic]"])
def test_generic_time_units(tmp_path: Path, spelling: str, zarr_format: int):
    dtype = np.dtype(spelling)
    values = np.array([0, 1, -2, 100], dtype="<i8")

    def fill(a: zarr.Array) -> None:
        a[:4] = values.view(dtype)

    both(tmp_path, times_array(dtype, zarr_format), fill)
    back = zarrpipe.Store(tmp_path).open_array("ours")[...]
    assert np.datetime_data(back.dtype) == np.datetime_data(dtype)
    assert back[:4].view("i8").tolist() == values.tolist()
    assert back[4:].view("i8").tolist() == [np.iinfo("i8").min] * 2  # NaT, the default fill


@pytest.mark.skipif(ZARR < (3, 4), reason="zarr-python reads generic time units since 3.4")
@pytest.mark.filterwarnings(GENERIC_DEPRECATED)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_big_endian_generic_times(tmp_path: Path, zarr_format: int):
    """NumPy copies a generic-unit time between byte orders unswapped: zarrpipe converts
    zarr-python's big-endian buffers through int64 counts, natively in strict mode; the
    native API reads the array (the engine swaps) and writes it (swapping the counts)."""
    dtype = np.dtype(">m8[2generic]")
    values = np.array([0, 1, -2, 100], dtype=">i8")

    def fill(a: zarr.Array) -> None:
        a[:4] = values.view(dtype)
        a[1:3] = values[1:3].view(dtype)  # a part of a chunk: read, update, write

    both(tmp_path, times_array(dtype, zarr_format), fill)
    with zarr.config.set(OURS):
        got = zarr.open_array(tmp_path / "ours", mode="r")[:]
    assert counts(got)[:4] == values.tolist()
    native = zarrpipe.Store(tmp_path).open_array("ours")
    assert counts(native[:4]) == values.tolist()
    native[1:3] = np.array([7, 8], dtype=">i8").view(dtype)
    with zarr.config.set(DEFAULT):
        back = zarr.open_array(tmp_path / "ours", mode="r")[:]
    assert counts(back)[:4] == [0, 7, 8, 100]


@pytest.mark.skipif(ZARR < (3, 4), reason="zarr-python reads generic time units since 3.4")
@pytest.mark.filterwarnings(GENERIC_DEPRECATED)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_records_with_big_endian_generic_times(tmp_path: Path, zarr_format: int):
    """A record with a big-endian generic-unit time field (zarr-python's suite has them):
    zarrpipe converts records between byte orders through a dtype of the same layout whose
    times are int64 counts, so strict mode writes what zarr-python's pipeline writes and
    reads each field's counts back."""
    record = np.dtype([("t", ">m8[2generic]"), ("v", ">i4")])
    counts_of = np.dtype([("t", ">i8"), ("v", ">i4")])
    data = np.array([(0, 5), (1, -6), (-2, 7), (100, -8)], dtype=counts_of).view(record)
    for name, pipeline in (("ours", {**OURS, "codec_pipeline.strict": True}), ("theirs", DEFAULT)):
        with zarr.config.set(pipeline), warnings.catch_warnings():
            warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
            warnings.simplefilter("error", zarrpipe.FallbackWarning)
            a = times_array(record, zarr_format)(tmp_path / name)
            a[:4] = data
            a[1:3] = data[2:0:-1]  # a part of a chunk: read, update, write
    assert stored(tmp_path / "ours") == stored(tmp_path / "theirs")
    want_t, want_v = [0, -2, 1, 100], [5, 7, -6, -8]
    for name in ("ours", "theirs"):
        with zarr.config.set({**OURS, "codec_pipeline.strict": True}), warnings.catch_warnings():
            warnings.simplefilter("ignore", zarr.errors.UnstableSpecificationWarning)
            got = zarr.open_array(tmp_path / name, mode="r")[:4]
        assert counts(got["t"]) == want_t and got["v"].tolist() == want_v, name
        native = zarrpipe.Store(tmp_path).open_array(name)[:4]
        assert counts(native["t"]) == want_t and native["v"].tolist() == want_v, name


@pytest.mark.skipif(importlib.util.find_spec("fsspec") is None, reason="needs fsspec")
def test_fsspec_local_files_are_read_and_written_by_the_engine(tmp_path: Path):
    """`da.from_zarr("path")` and `xr.open_zarr("path")` open an FsspecStore over fsspec's
    local filesystem: zarrpipe reads and writes those files itself (partial shard reads,
    the writers' lock protocol), as for a LocalStore, rather than receiving whole shards
    from zarr-python."""
    from zarr.storage import FsspecStore, LocalStore

    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    with zarr.config.set(DEFAULT):
        zarr.create_array(
            LocalStore(tmp_path / "a"), shape=(32, 32), dtype="i4", chunks=(8, 8), shards=(16, 16)
        )[...] = data
    store = FsspecStore.from_url((tmp_path / "a").as_uri())
    with zarr.config.set(OURS):
        a = zarr.open_array(store, mode="r+")
        pipeline = a._async_array.codec_pipeline
        assert pipeline._impl is not None and pipeline._impl.reads_store
        assert a[3:11, 5:20].tolist() == data[3:11, 5:20].tolist()
        a[0:3, 0:3] = -1
    data[0:3, 0:3] = -1
    with zarr.config.set(DEFAULT):
        assert zarr.open_array(LocalStore(tmp_path / "a"), mode="r")[...].tolist() == data.tolist()


def test_attributes_that_are_not_json_stay_out_of_the_engine(tmp_path: Path):
    """The engine never needs an array's attributes: a lone surrogate (which JSON can spell
    but Rust's parser refuses) does not send the array back to zarr-python."""
    with zarr.config.set(OURS):
        a = zarr.create_array(
            tmp_path / "a", shape=(4,), dtype="i4", chunks=(2,), attributes={"a": "\ud800"}
        )
        a[:] = np.arange(4)
        assert a[:].tolist() == [0, 1, 2, 3]


@pytest.mark.skipif(ZARR < (3, 4), reason="zarr-python lays shards out in Morton order since 3.4")
def test_shards_of_a_grown_rectilinear_grid_keep_zarr_pythons_layout(tmp_path: Path):
    """zarr-python lays each shard's inner chunks out in Morton order, whatever the shard's
    shape: a shard of a shape the grid gains only when `append` grows it (after the
    pipeline was built) is laid out as zarr-python lays it out, byte for byte."""

    def make(path: Path) -> zarr.Array:
        return zarr.create_array(
            path, shape=(12, 6), dtype="i4", chunks=(2, 3), shards=[[4, 8], 6], compressors=None
        )

    def fill(a: zarr.Array) -> None:
        a[...] = np.arange(72, dtype="i4").reshape(12, 6)
        a.append(np.full((6, 6), -1, dtype="i4"))  # a shard of 6 rows: 3 x 2 inner chunks
        a[10:14, 1:4] = 5

    with zarr.config.set({"array.rectilinear_chunks": True}):
        both(tmp_path, make, fill)
        with zarr.config.set(DEFAULT):
            grid = zarr.open_array(tmp_path / "ours", mode="r").write_chunk_sizes
    assert grid == ((4, 8, 6), (6,))


@pytest.mark.skipif(ZARR < (3, 2), reason="zarr-python writes rectilinear grids since 3.2")
def test_strings_on_a_rectilinear_grid_through_the_pipeline(tmp_path: Path):
    """Variable-length strings in chunks of different sizes: zarrpipe's pipeline (strict)
    decodes and encodes each chunk at its own shape, zarr-python's bytes."""
    words = np.array([[f"w{i}{j}" * (i % 3) for j in range(3)] for i in range(7)])
    got = {}
    with zarr.config.set({"array.rectilinear_chunks": True}):
        for name, pipeline in (
            ("ours", {**OURS, "codec_pipeline.strict": True}),
            ("theirs", DEFAULT),
        ):
            with zarr.config.set(pipeline), warnings.catch_warnings():
                warnings.simplefilter("error", zarrpipe.FallbackWarning)
                a = zarr.create_array(
                    tmp_path / name, shape=(7, 3), dtype=str, chunks=[[2, 4, 1], [1, 2]]
                )
                a[...] = words
                a[1:4, 1] = ["x", "yy", "zzz"]
                got[name] = zarr.open_array(tmp_path / name, mode="r")[...].tolist()
    words[1:4, 1] = ["x", "yy", "zzz"]
    assert got["ours"] == got["theirs"] == words.tolist()
    assert stored(tmp_path / "ours") == stored(tmp_path / "theirs")
