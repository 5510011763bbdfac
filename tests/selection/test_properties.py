"""Property tests (hypothesis): zarrpipe reads what zarr-python wrote exactly as NumPy would
index it, for random shapes (1-4 dims), chunkings, shardings, dtypes, codecs, fill values,
missing chunks and selections; and random bytes in place of a chunk, or random shard index
entries, are an error or a right answer, never a crash or a wrong type of exception.

Examples are small and `max_examples` moderate so the file runs in well under a minute.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np
import pytest
import zarr
import zarrpipe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.faults.checks import assert_raises
from support.faults.shard_cases import SHARD_BAD, inner_chunk_bytes, shard_bytes, write_sharded
from support.faults.stores import DATA, FILL, U64_MAX, key_file, stored_key, write_plain
from support.zarr_stores import assert_values, quiet_zarr_writes, sample_values

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float32", "float64", "complex64"]
CODECS = ["none", "zstd", "gzip", "blosc"]


def _v3_codecs(codec: str, endian: str) -> dict:
    from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ZstdCodec

    compressors = {
        "none": None,
        "zstd": [ZstdCodec(level=1)],
        "gzip": [GzipCodec(level=1)],
        "blosc": [BloscCodec(cname="lz4", clevel=1)],
    }[codec]
    return {"compressors": compressors, "serializer": BytesCodec(endian=endian)}


def _v2_codecs(codec: str) -> dict:
    import numcodecs

    compressor = {
        "none": None,
        "zstd": numcodecs.Zstd(level=1),
        "gzip": numcodecs.GZip(level=1),
        "blosc": numcodecs.Blosc(cname="lz4", clevel=1),
    }[codec]
    return {"compressors": compressor, "zarr_format": 2}


@st.composite
def layouts(draw):
    """(shape, chunks, shards or None, dtype, codec, zarr_format, endian, fill, missing)."""
    ndim = draw(st.integers(1, 4))
    max_extent = {1: 40, 2: 12, 3: 7, 4: 5}[ndim]
    shape = tuple(draw(st.integers(1, max_extent)) for _ in range(ndim))
    if draw(st.integers(0, 9)) == 0:  # sometimes an empty axis
        axis = draw(st.integers(0, ndim - 1))
        shape = (*shape[:axis], 0, *shape[axis + 1 :])
    chunks = tuple(draw(st.integers(1, max(1, s))) for s in shape)
    sharded = draw(st.booleans())
    shards = tuple(c * draw(st.integers(1, 3)) for c in chunks) if sharded else None
    dtype = draw(st.sampled_from(DTYPES))
    codec = draw(st.sampled_from(CODECS))
    zarr_format = 3 if sharded else draw(st.sampled_from([2, 3]))
    endian = draw(st.sampled_from(["little", "big"]))
    fill = draw(st.sampled_from(["zero", "special"]))
    missing = draw(st.sampled_from(["none", "some"]))
    return shape, chunks, shards, dtype, codec, zarr_format, endian, fill, missing


@st.composite
def selections(draw, shape):
    """A zarrpipe selection (NumPy semantics): ints (negative too), step-1 slices with None,
    negative and out-of-range bounds, empty slices; sometimes an Ellipsis for a run of axes
    or trailing axes left out."""
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full", "slice"]))
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 3, n + 3)
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1]))))
        else:
            items.append(slice(None))
    how = draw(st.integers(0, 3))
    if how == 1:
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items[i:j] = [Ellipsis]
    elif how == 2:
        items = items[: draw(st.integers(0, len(items)))]
    if len(items) == 1 and draw(st.booleans()):
        return items[0]  # bare, not in a tuple
    return tuple(items)


def _fill_value(dtype: np.dtype, kind: str):
    if kind == "zero":
        return np.zeros((), dtype)[()]
    return sample_values(dtype, (1,), seed=7)[0]


def _write(root: str, data: np.ndarray, layout) -> tuple[np.ndarray, object]:
    """Writes `data` as array "a"; returns (what NumPy says the array holds, the zarr.Array)."""
    shape, chunks, shards, dtype, codec, zarr_format, endian, fill_kind, missing = layout
    fill = _fill_value(np.dtype(dtype), fill_kind)
    kwargs = _v3_codecs(codec, endian) if zarr_format == 3 else _v2_codecs(codec)
    if zarr_format == 2 and endian == "big":
        kwargs["dtype"] = np.dtype(dtype).newbyteorder(">")
    with quiet_zarr_writes():
        z = zarr.create_array(
            store=root,
            name="a",
            shape=shape,
            chunks=chunks,
            shards=shards,
            dtype=kwargs.pop("dtype", dtype),
            fill_value=fill,
            **kwargs,
        )
        z[...] = data
    expected = data.copy()
    if missing == "some":  # delete every third stored chunk (shard) file
        stored = shards or chunks
        grid = [-(-s // c) for s, c in zip(shape, stored, strict=True)]
        for k, index in enumerate(np.ndindex(*grid)):
            if k % 3 == 1:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(key_file(root, stored_key("a", z, index)))
                region = tuple(
                    slice(i * c, min((i + 1) * c, s))
                    for i, c, s in zip(index, stored, shape, strict=True)
                )
                expected[region] = fill
    return expected, z


@SETTINGS
@given(data=st.data(), layout=layouts())
def test_reads_equal_numpy(data, layout):
    shape, chunks, *_ = layout
    dtype = np.dtype(layout[3])
    values = sample_values(dtype, shape, seed=data.draw(st.integers(0, 1000)))
    with tempfile.TemporaryDirectory() as root:
        _write(root, values, layout)
        # The reference is what an independent implementation reads from the files. (Not
        # the values written: zarr-python drops a complex chunk equal to a NaN fill value if
        # either part is NaN, so its write can lose data; that is not the reader's doing.)
        with quiet_zarr_writes():
            ref = np.asarray(zarr.open_array(store=root, path="a", mode="r")[...])
        expected = ref.astype(ref.dtype.newbyteorder("="))
        store = zarrpipe.Store(root)
        arr = store.open_array("a")
        assert tuple(arr.shape) == shape and tuple(arr.chunks) == tuple(chunks)
        assert_values(np.asarray(arr[...]), expected, "arr[...]")
        for sel in data.draw(st.lists(selections(shape), min_size=1, max_size=5)):
            want = expected[sel]
            assert_values(np.asarray(arr[sel]), want, f"arr[{sel!r}]")
            assert_values(np.asarray(store.read("a", sel)), want, f"store.read({sel!r})")
        if all(shape):
            grid = [-(-s // c) for s, c in zip(shape, chunks, strict=True)]
            index = tuple(data.draw(st.integers(0, g - 1)) for g in grid)
            region = tuple(
                slice(i * c, min((i + 1) * c, s))
                for i, c, s in zip(index, chunks, shape, strict=True)
            )
            (t,) = arr.read_chunks([index])
            assert_values(np.asarray(t), expected[region], f"read_chunks {index}")


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple),
    data=st.data(),
)
def test_out_of_range_integers_raise_index_error_like_numpy(shape, data):
    """An integer index raises IndexError exactly when NumPy's does; otherwise the values
    are NumPy's."""
    values = np.arange(int(np.prod(shape)), dtype="int32").reshape(shape)
    sel = tuple(data.draw(st.integers(-2 * n - 1, 2 * n + 1)) for n in shape)
    with tempfile.TemporaryDirectory() as root:
        write_plain(root, "zstd", data=values, chunks=tuple(max(1, n // 2) for n in shape))
        arr = zarrpipe.Store(root).open_array("a")
        try:
            want = values[sel]
        except IndexError:
            assert_raises(lambda: arr[sel], IndexError, what=repr(sel))
        else:
            np.testing.assert_array_equal(np.asarray(arr[sel]), want)


# ---------------------------------------------------------------------------------------------
# random bytes where a chunk should be


@pytest.fixture(scope="module")
def plain_stores(tmp_path_factory):
    """One 8x8 uint16 array per compressor (fill value 2), built once."""
    out = {}
    for kind in ["zstd", "blosc", "gzip", "zlib-v2", "none", "crc32c"]:
        root = str(tmp_path_factory.mktemp(kind))
        z = write_plain(root, kind)
        out[kind] = (root, key_file(root, stored_key("a", z, (1, 1))), stored_key("a", z, (1, 1)))
    return out


@SETTINGS
@given(
    kind=st.sampled_from(["zstd", "blosc", "gzip", "zlib-v2", "none", "crc32c"]),
    payload=st.binary(max_size=96),
    tail=st.sampled_from([b"", b"\x00" * 4, bytes(range(16))]),
)
def test_random_chunk_bytes_are_an_error_or_the_right_shape(plain_stores, kind, payload, tail):
    root, file, key = plain_stores[kind]
    with open(file, "wb") as f:
        f.write(payload + tail)
    arr = zarrpipe.Store(root).open_array("a")
    for read in (lambda: arr[4:8, 4:8], lambda: arr[5, 6], lambda: arr.read_chunk((1, 1))):
        try:
            t = read()
        except zarrpipe.DecodeError as e:
            assert key in str(e), str(e)
        else:  # only bytes that really decode to one chunk can get here
            assert t.nbytes in (2, 4 * 4 * 2), t.shape
    np.testing.assert_array_equal(np.asarray(arr[0:4, :]), DATA[0:4, :])


# ---------------------------------------------------------------------------------------------
# random shard index entries


_N = 12  # a 2x2 uint16 inner chunk + crc32c
_CHUNKS = [inner_chunk_bytes(SHARD_BAD, (i, j)) for i in range(2) for j in range(2)]
_INNER_VALUES = [np.frombuffer(c[:-4], "<u2").reshape(2, 2) for c in _CHUNKS]


def _entry():
    return st.one_of(
        st.sampled_from([(k * _N, _N) for k in range(4)]),  # a real chunk (maybe another's)
        st.just((U64_MAX, U64_MAX)),  # empty
        st.tuples(st.integers(0, 60), st.integers(0, 60)),  # small, often wrong
        st.tuples(st.integers(0, U64_MAX), st.integers(0, U64_MAX)),  # anything
        st.tuples(st.sampled_from([U64_MAX, U64_MAX - 1, 1 << 63]), st.integers(0, 16)),
    )


@pytest.fixture(scope="module")
def shard_store(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("shard"))
    z = write_sharded(root)
    key = stored_key("a", z, SHARD_BAD)
    return root, key_file(root, key), key


@SETTINGS
@given(entries=st.lists(_entry(), min_size=4, max_size=4), index_crc_ok=st.booleans())
def test_random_shard_index_entries(shard_store, entries, index_crc_ok):
    """Each inner chunk reads as the data of the chunk its entry points at, the fill value
    (empty entry), or a DecodeError naming the shard; never a crash, never other bytes."""
    root, file, key = shard_store
    shard = shard_bytes(entries, b"".join(_CHUNKS))
    if not index_crc_ok:
        shard = shard[:-1] + bytes([shard[-1] ^ 0xFF])
    with open(file, "wb") as f:
        f.write(shard)
    arr = zarrpipe.Store(root).open_array("a")
    for k in range(4):
        index = (2 + k // 2, 2 + k % 2)
        try:
            got = np.asarray(arr.read_chunk(index))
        except zarrpipe.DecodeError as e:
            assert key in str(e), str(e)
            continue
        assert index_crc_ok, "a corrupt index checksum must not read"
        offset, size = entries[k]
        if (offset, size) == (U64_MAX, U64_MAX):
            np.testing.assert_array_equal(got, np.full((2, 2), FILL, "<u2"))
        else:
            assert offset % _N == 0 and size == _N, f"read entry {entries[k]} as {got}"
            np.testing.assert_array_equal(got, _INNER_VALUES[offset // _N])
    np.testing.assert_array_equal(np.asarray(arr[0:4, :]), DATA[0:4, :])
