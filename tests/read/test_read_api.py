"""The read API around the matrix: store layout (root arrays, nested groups, list), metadata
surfaced on Array, selection and chunk-index errors, corrupt and unsupported data, threads."""

from __future__ import annotations

import bz2
import json
import os
import re

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from support.zarr_stores import (
    all_chunk_indices,
    assert_moves_out,
    assert_tensor,
    check_reads,
    chunk_file,
    chunk_slices,
    quiet_zarr_writes,
    reference,
    sample_values,
    write_array,
)
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    FixedScaleOffset,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

# ---------------------------------------------------------------------------------------------
# hierarchy: root arrays, nested groups, list()


@pytest.fixture
def hierarchy(tmp_path):
    """/ (group) with a/ (group) -> a/b/ (group) -> a/b/c (array); x (array, sharded);
    v2/ (v2 group) -> v2/y (v2 array)."""
    with quiet_zarr_writes():
        root = zarr.open_group(str(tmp_path), mode="w", attributes={"title": "root"})
        a = root.create_group("a", attributes={"level": 1})
        b = a.create_group("b")
        c = b.create_array(
            "c",
            shape=(5, 6),
            chunks=(2, 4),
            dtype="int16",
            fill_value=3,
            attributes={"units": "m", "scale": [1.5, 2], "nested": {"k": None}},
            dimension_names=("y", None),
        )
        c[:4, :] = np.arange(24, dtype="int16").reshape(4, 6) - 10
        x = root.create_array(
            "x", shape=(7,), chunks=(2,), shards=(4,), dtype="float32", fill_value=np.nan,
            dimension_names=["t"],
        )  # fmt: skip
        x[:5] = np.linspace(-1, 1, 5, dtype="float32")
        v2 = zarr.open_group(str(tmp_path / "v2"), mode="w", zarr_format=2)
        y = v2.create_array(
            "y", shape=(3, 4), chunks=(2, 2), dtype=">u2", attributes={"v": 2}, fill_value=9
        )
        y[1:, 1:] = np.arange(6, dtype=">u2").reshape(2, 3)
    return tmp_path


def test_list_nested(hierarchy):
    store = zarrpipe.Store(str(hierarchy))
    assert store.list() == [
        ("", "group"),
        ("a", "group"),
        ("a/b", "group"),
        ("a/b/c", "array"),
        ("v2", "group"),
        ("v2/y", "array"),
        ("x", "array"),
    ]


def test_nested_array_metadata_and_values(hierarchy):
    store = zarrpipe.Store(str(hierarchy))
    _, expected = reference(hierarchy, "a/b/c")
    arr = store.open_array("a/b/c")
    assert arr.path == "a/b/c"
    assert arr.attrs == {"units": "m", "scale": [1.5, 2], "nested": {"k": None}}
    assert arr.dimension_names == ("y", None)
    assert arr.zarr_format == 3
    assert tuple(arr.shape) == (5, 6) and arr.ndim == 2 and arr.size == 30 and arr.nbytes == 60
    assert tuple(arr.chunks) == (2, 4) and arr.shards is None
    assert tuple(arr.chunk_grid_shape) == (3, 2)
    assert arr.fill_value == 3 and arr.fill_value.dtype == np.int16
    assert (expected[4] == 3).all()
    check_reads(hierarchy, "a/b/c", expected)
    assert_tensor(store.read("a/b/c", (4, slice(None))), np.full(6, 3, np.int16))


def test_sharded_array_metadata(hierarchy):
    store = zarrpipe.Store(str(hierarchy))
    z, expected = reference(hierarchy, "x")
    arr = store.open_array("x")
    assert arr.path == "x"
    assert tuple(arr.chunks) == (2,) == tuple(z.chunks)
    assert tuple(arr.shards) == (4,) == tuple(z.shards)
    assert tuple(arr.chunk_grid_shape) == (4,)
    assert arr.dimension_names == ("t",)
    assert arr.attrs == {}
    assert np.isnan(arr.fill_value) and arr.fill_value.dtype == np.float32
    check_reads(hierarchy, "x", expected)


def test_v2_array_metadata(hierarchy):
    store = zarrpipe.Store(str(hierarchy))
    _, expected = reference(hierarchy, "v2/y")
    arr = store.open_array("v2/y")
    assert arr.zarr_format == 2
    assert arr.dtype == np.dtype("uint16")  # native order, even though stored big-endian
    assert arr.dimension_names is None
    assert arr.attrs == {"v": 2}
    assert arr.fill_value == 9
    assert tuple(arr.chunks) == (2, 2) and arr.shards is None
    np.testing.assert_array_equal(expected[0], 9)
    check_reads(hierarchy, "v2/y", expected)


@pytest.mark.parametrize("root_path", ["", "/"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_array_at_root(tmp_path, root_path, zarr_format):
    data = sample_values("int32", (6, 5), seed=1)
    attrs = {"where": "root", "n": 1}
    extra = {"dimension_names": ("row", "col")} if zarr_format == 3 else {}
    write_array(tmp_path, data, chunks=(4, 2), zarr_format=zarr_format, attributes=attrs, **extra)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path))
    assert store.list() == [("", "array")]
    arr = store.open_array(root_path)
    assert arr.path == ""
    assert arr.attrs == attrs
    assert arr.dimension_names == (("row", "col") if zarr_format == 3 else None)
    assert_tensor(store.read(root_path), expected)
    assert_tensor(store.read(root_path, (slice(1, 5), -1)), expected[1:5, -1])
    assert_tensor(store.open_array().read_chunk((1, 2)), expected[4:6, 4:5])
    (t,) = store.read_chunks(root_path, [(0, 0)])
    assert_tensor(t, expected[:4, :2])


def test_open_array_default_is_root(tmp_path):
    data = sample_values("uint8", (3, 3))
    write_array(tmp_path, data, chunks=(2, 2))
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    assert_tensor(arr[...], data)


def test_store_accepts_pathlike(tmp_path):
    data = sample_values("int64", (4,))
    write_array(tmp_path, data, chunks=(3,))
    assert_tensor(zarrpipe.Store(tmp_path).read(""), data)


@pytest.mark.parametrize(
    "encoding",
    [
        {"name": "default", "separator": "/"},
        {"name": "default", "separator": "."},
        {"name": "v2", "separator": "."},
        {"name": "v2", "separator": "/"},
    ],
    ids=["default-slash", "default-dot", "v2-dot", "v2-slash"],
)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_chunk_key_encodings(tmp_path, encoding, zarr_format):
    """Values and chunk_key() for every chunk key encoding (v2 arrays: separators only)."""
    if zarr_format == 2 and encoding["name"] == "default":
        pytest.skip("v2 arrays only have the v2 key encoding")
    data = sample_values("float64", (5, 7), seed=2)
    z = write_array(
        tmp_path,
        data,
        path="g/arr",
        chunks=(2, 3),
        zarr_format=zarr_format,
        chunk_key_encoding=encoding,
        missing="partial",
        fill_value=-1.0,
    )
    _, expected = reference(tmp_path, "g/arr")
    arr = check_reads(tmp_path, "g/arr", expected)
    for index in all_chunk_indices(data.shape, (2, 3)):
        key = arr.chunk_key(index)
        assert key.endswith(z.metadata.encode_chunk_key(index)), (key, index)
        # the key names the stored file (written chunks exist, others do not)
        exists = os.path.exists(os.path.join(tmp_path, *key.split("/")))
        assert exists == os.path.exists(chunk_file(tmp_path, "g/arr", z, index))


def test_chunk_key_sharded_names_the_shard(tmp_path):
    data = sample_values("int16", (9, 8), seed=2)
    z = write_array(tmp_path, data, chunks=(3, 2), shards=(6, 4))
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    for index in all_chunk_indices(data.shape, (6, 4)):
        # chunk_key takes a `chunks`-grid index and names the shard holding that chunk.
        key = arr.chunk_key((2 * index[0], 2 * index[1]))
        assert key.endswith(z.metadata.encode_chunk_key(index))
        assert os.path.isfile(os.path.join(tmp_path, *key.split("/")))


@pytest.mark.parametrize(
    "fill_json,dtype,want",
    [
        ("0x3ff8000000000000", "float64", 1.5),
        ("0x7ff8000000000000", "float64", np.nan),
        ("0xc0200000", "float32", -2.5),
        ("Infinity", "float32", np.inf),
        ("-Infinity", "float64", -np.inf),
        ("NaN", "float16", np.nan),
        ("0x3c00", "float16", 1.0),
        (["0x3ff0000000000000", "-Infinity"], "complex128", complex(1, -np.inf)),
        (["NaN", 2.5], "complex64", complex(np.nan, 2.5)),
        (-0.0, "float64", -0.0),
    ],
)
def test_v3_fill_value_spellings(tmp_path, fill_json, dtype, want):
    """Fill values written in the v3 JSON spellings (hex, Infinity, NaN, pairs for complex)."""
    write_array(tmp_path, np.zeros((4, 3), dtype), chunks=(2, 2), missing="never")
    meta_path = tmp_path / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["fill_value"] = fill_json
    meta_path.write_text(json.dumps(meta))
    _, expected = reference(tmp_path)
    want_arr = np.full((4, 3), want, dtype=dtype)
    np.testing.assert_array_equal(expected, want_arr)  # zarr-python agrees with us
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    assert_tensor(arr[...], expected)
    assert_tensor(arr.read_chunk((1, 1)), expected[2:, 2:])
    fv = np.asarray(arr.fill_value)
    assert fv.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fv, np.asarray(want, dtype=dtype))
    assert np.signbit(fv.real) == np.signbit(np.asarray(want, dtype=dtype).real)


# ---------------------------------------------------------------------------------------------
# not found


def test_missing_store_dir(tmp_path):
    missing = tmp_path / "does-not-exist" / "data.zarr"
    with pytest.raises(FileNotFoundError):
        zarrpipe.Store(str(missing), mode="r")
    assert not missing.parent.exists()
    # Read-write (the default): nothing is created until the first write.
    store = zarrpipe.Store(str(missing))
    with pytest.raises(FileNotFoundError):
        store.open_array("a")
    assert not missing.parent.exists()
    store.create_array("a", shape=(3,), dtype="i2")[...] = [1, 2, 3]
    np.testing.assert_array_equal(
        np.asarray(zarrpipe.Store(str(missing), mode="r").read("a")), [1, 2, 3]
    )


def test_missing_array_path(hierarchy):
    store = zarrpipe.Store(str(hierarchy))
    with pytest.raises(FileNotFoundError):
        store.open_array("nope")
    with pytest.raises(FileNotFoundError):
        store.open_array("a/b/nope")
    with pytest.raises(FileNotFoundError):
        store.read("nope")
    with pytest.raises(FileNotFoundError):
        store.read("a/nope", (0,))
    with pytest.raises(FileNotFoundError):
        store.read_chunks("nope", [(0,)])


@pytest.mark.parametrize("path", ["", "a", "a/b", "v2"])
def test_group_is_not_an_array(hierarchy, path):
    store = zarrpipe.Store(str(hierarchy))
    with pytest.raises(FileNotFoundError):
        store.open_array(path)
    with pytest.raises(FileNotFoundError):
        store.read(path)


def test_empty_dir_has_no_root_array(tmp_path):
    store = zarrpipe.Store(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        store.open_array()


# ---------------------------------------------------------------------------------------------
# selection errors


@pytest.fixture
def arr3(tmp_path):
    data = sample_values("int32", (4, 5, 6), seed=3)
    write_array(tmp_path, data, chunks=(3, 2, 4))
    _, expected = reference(tmp_path)
    return zarrpipe.Store(str(tmp_path)), expected


def test_every_fresh_read_starts_at_a_64_byte_boundary(arr3, tmp_path):
    """XLA's CPU client (JAX) adopts a DLPack buffer without a copy only at 64-byte
    alignment; the allocator alone gives 16. Regions, element picks (the gather path), single
    elements, whole chunks, and a large read whose freed buffer serves the next one."""
    store, expected = arr3
    arr = store.open_array("")
    reads = {
        "whole": store.read(""),
        "region": store.read("", (slice(1, 3), slice(None), slice(2, 5))),
        "element": arr.read((1, 2, 3)),
        "pick": arr.read(([0, 3, 1], slice(None), [5, 0, 2])),
        **{f"chunk {i}": t for i, t in enumerate(arr.read_chunks([(0, 0, 0), (1, 2, 1)]))},
    }
    for name, t in reads.items():
        view = np.from_dlpack(t.into_dlpack())
        assert view.ctypes.data % 64 == 0, name
    np.testing.assert_array_equal(view, expected[3:, 4:, 4:])
    big = zarrpipe.Store(tmp_path / "big").create_array(
        "a", shape=(4096, 4100), dtype="u2", chunks=(1024, 4100)
    )
    big[...] = 5
    addresses = []
    for _ in range(2):
        out = np.from_dlpack(big.read().into_dlpack())
        assert (out == 5).all()
        addresses.append(out.ctypes.data)
        del out
    assert addresses[0] % 64 == 0
    assert addresses[1] == addresses[0], "the freed output served the next read"


@pytest.mark.parametrize(
    "sel",
    [
        4,
        -5,
        100,
        -(2**70),
        2**70,
        (0, 5),
        (0, 0, 6),
        (0, -6),
        (0, 0, -7),
        (0, 0, 0, 0),  # too many indices
        (slice(None),) * 4,
        (Ellipsis, Ellipsis),
        (0, Ellipsis, 0, Ellipsis),
    ],
    ids=repr,
)
def test_selection_index_error(arr3, sel):
    store, _ = arr3
    arr = store.open_array("")
    with pytest.raises(IndexError):
        arr[sel]
    with pytest.raises(IndexError):
        store.read("", sel)
    with pytest.raises(IndexError):
        arr.read(sel)


@pytest.mark.parametrize(
    "sel",
    [
        [0, 1],
        (0, [1, 2]),
        None,
        (None, 0),
        (0, None),
        True,
        False,
        (0, True),
        np.bool_(True),
        np.array([0, 1]),
        slice(None, None, 2),
        slice(None, None, -1),
        (slice(None), slice(1, 4, 3)),
        (slice(None), [4, -1, 0, 0], slice(None, None, -2)),
    ],
    ids=repr,
)
def test_numpy_selections_beyond_basic(arr3, sel):
    store, expected = arr3
    assert_tensor(store.open_array("")[sel], expected[sel])
    if sel is not None:  # store.read(path, None) is the whole array
        assert_tensor(store.read("", sel), expected[sel])


_NOT_AN_INDEX = re.escape(
    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
    "boolean arrays are valid indices"
)
_SLICE_BOUNDS = "slice indices must be integers or None or have an __index__ method"


@pytest.mark.parametrize(
    "sel,error,message",
    [
        (1.0, IndexError, _NOT_AN_INDEX),
        ((0, 1.5), IndexError, _NOT_AN_INDEX),
        ("a", IndexError, _NOT_AN_INDEX),
        (slice(0.5, 2), TypeError, _SLICE_BOUNDS),
        (slice(0, "3"), TypeError, _SLICE_BOUNDS),
        (slice(0, 3, 0), ValueError, "slice step cannot be zero"),
        ((slice(None), {1: 2}), IndexError, _NOT_AN_INDEX),
        (
            ([0, 1], [0, 1, 2]),
            IndexError,
            re.escape(
                "shape mismatch: indexing arrays could not be broadcast together with "
                "shapes (2,) (3,)"
            ),
        ),
        (
            np.zeros(3, bool),
            IndexError,
            "boolean index did not match indexed array along axis 0; size of axis is 4 but size "
            "of corresponding boolean axis is 3",
        ),
        ((0, [0, 9]), IndexError, "index 9 is out of bounds for axis 1 with size 5"),
    ],
    ids=repr,
)
def test_selection_errors_are_numpys(arr3, sel, error, message):
    """NumPy's exception type and message, from `arr[sel]` and `Store.read` alike."""
    store, expected = arr3
    for index in (expected.__getitem__, store.open_array("").__getitem__):
        with pytest.raises(error, match=message) as info:
            index(sel)
        assert info.type is error
    with pytest.raises(error, match=message) as info:
        store.read("", sel)
    assert info.type is error


@pytest.mark.parametrize(
    "sel",
    [np.int64(2), (np.int32(-1), np.uint8(3)), (slice(np.int64(1), np.int16(3)), Ellipsis)],
    ids=["np.int64", "np-ints", "np-slice-bounds"],
)
def test_numpy_integers_select(arr3, sel):
    store, expected = arr3
    assert_tensor(store.open_array("")[sel], expected[sel])


def test_read_none_selection_is_whole_array(arr3):
    store, expected = arr3
    assert_tensor(store.read("", None), expected)
    assert_tensor(store.open_array("").read(None), expected)


# ---------------------------------------------------------------------------------------------
# chunk index errors


@pytest.mark.parametrize(
    "index",
    [
        (2, 0, 0),
        (0, 3, 0),
        (0, 0, 2),
        (0, 0, 99),
        (0, 0),
        (0, 0, 0, 0),
        (-1, 0, 0),
        (0, -1, 0),
        (2**63, 0, 0),
        (0, 2**64, 0),
        (0, 0, 2**70),
    ],
    ids=repr,
)
def test_bad_chunk_index(arr3, index):
    store, _ = arr3
    arr = store.open_array("")
    assert tuple(arr.chunk_grid_shape) == (2, 3, 2)
    with pytest.raises(IndexError):
        arr.read_chunk(index)
    with pytest.raises(IndexError):
        arr.read_chunks([(0, 0, 0), index])
    with pytest.raises(IndexError):
        store.read_chunks("", [index])


def test_read_chunks_accepts_lists_and_iterables(arr3):
    store, expected = arr3
    arr = store.open_array("")
    idx = [(1, 2, 1), [0, 1, 0]]
    got = arr.read_chunks(idx)
    assert_tensor(got[0], expected[3:4, 4:5, 4:6])
    assert_tensor(got[1], expected[0:3, 2:4, 0:4])
    got = arr.read_chunks(iter([(1, 0, 0)]))
    assert_tensor(got[0], expected[3:4, 0:2, 0:4])
    assert arr.read_chunks([]) == []
    # the same chunk twice: two independent, equal tensors
    a, b = arr.read_chunks([(0, 0, 0), (0, 0, 0)])
    assert_moves_out(a, expected[:3, :2, :4])
    assert_moves_out(b, expected[:3, :2, :4])


# ---------------------------------------------------------------------------------------------
# corrupt data


def _corrupt(path: str, how: str) -> None:
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    if how == "garbage":
        raw = bytearray(np.random.default_rng(0).integers(0, 256, len(raw), dtype=np.uint8))
    elif how == "flip-middle":
        raw[len(raw) // 2] ^= 0x5A
    elif how == "flip-last":
        raw[-1] ^= 0x01
    elif how == "truncate":
        raw = raw[: len(raw) // 2]
    elif how == "empty":
        raw = bytearray()
    elif how == "extend":
        raw += b"\x00" * 7
    elif how == "flip-index":  # shard index at the end: flip a byte of it (before its crc32c)
        raw[-8] ^= 0xFF
    else:
        raise ValueError(how)
    with open(path, "wb") as f:
        f.write(bytes(raw))


CORRUPTIONS = {
    # case: (create kwargs, corruption, expected exception)
    "zstd-garbage": (dict(compressors=[ZstdCodec()]), "garbage", zarrpipe.DecodeError),
    "zstd-truncate": (dict(compressors=[ZstdCodec()]), "truncate", zarrpipe.DecodeError),
    "zstd-empty": (dict(compressors=[ZstdCodec()]), "empty", zarrpipe.DecodeError),
    "gzip-garbage": (dict(compressors=[GzipCodec()]), "garbage", zarrpipe.DecodeError),
    "gzip-truncate": (dict(compressors=[GzipCodec()]), "truncate", zarrpipe.DecodeError),
    "blosc-garbage": (dict(compressors=[BloscCodec()]), "garbage", zarrpipe.DecodeError),
    "blosc-truncate": (dict(compressors=[BloscCodec()]), "truncate", zarrpipe.DecodeError),
    "bytes-truncate": (dict(compressors=None), "truncate", zarrpipe.DecodeError),
    "bytes-extend": (dict(compressors=None), "extend", zarrpipe.DecodeError),
    "bytes-empty": (dict(compressors=None), "empty", zarrpipe.DecodeError),
    "crc32c-flip": (dict(compressors=[Crc32cCodec()]), "flip-middle", zarrpipe.ChecksumError),
    "crc32c-flip-checksum": (
        dict(compressors=[Crc32cCodec()]),
        "flip-last",
        zarrpipe.ChecksumError,
    ),
    "crc32c-truncate": (dict(compressors=[Crc32cCodec()]), "truncate", zarrpipe.DecodeError),
    "zstd-crc32c-flip": (
        dict(compressors=[ZstdCodec(), Crc32cCodec()]),
        "flip-middle",
        zarrpipe.ChecksumError,
    ),
    "shard-index-crc32c": (dict(shards=(4, 6)), "flip-index", zarrpipe.ChecksumError),
    "shard-truncate": (dict(shards=(4, 6)), "truncate", zarrpipe.DecodeError),
    "shard-garbage-no-index-crc": (
        dict(
            serializer=ShardingCodec(chunk_shape=(2, 3), index_codecs=[BytesCodec()]),
            compressors=None,
            chunks=(4, 6),
        ),
        "garbage",
        zarrpipe.DecodeError,
    ),
    "shard-inner-crc32c": (
        dict(
            serializer=ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(), Crc32cCodec()]),
            compressors=None,
            chunks=(4, 6),
        ),
        "flip-middle",
        zarrpipe.ChecksumError,
    ),
    "v2-zlib-garbage": (
        dict(zarr_format=2, compressors=numcodecs.Zlib(), filters=None),
        "garbage",
        zarrpipe.DecodeError,
    ),
    "v2-raw-truncate": (
        dict(zarr_format=2, compressors=None, filters=None),
        "truncate",
        zarrpipe.DecodeError,
    ),
    "v2-blosc-garbage": (
        dict(zarr_format=2, compressors=numcodecs.Blosc(), filters=None),
        "garbage",
        zarrpipe.DecodeError,
    ),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_corrupt_chunk(tmp_path, case):
    kwargs, how, exc = dict(CORRUPTIONS[case][0]), CORRUPTIONS[case][1], CORRUPTIONS[case][2]
    chunks = kwargs.pop("chunks", (2, 3))
    data = sample_values("int32", (8, 12), seed=4)
    z = write_array(tmp_path, data, chunks=chunks, **kwargs)
    storage = (4, 6) if (kwargs.get("shards") or "serializer" in kwargs) else (2, 3)
    _corrupt(chunk_file(tmp_path, "", z, (1, 1)), how)
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array()
    bad = chunk_slices(data.shape, storage, (1, 1))  # the damaged chunk (shard)
    inner = tuple(arr.chunks)
    bad_inner = [
        (i, j)
        for i in range(bad[0].start // inner[0], -(-bad[0].stop // inner[0]))
        for j in range(bad[1].start // inner[1], -(-bad[1].stop // inner[1]))
    ]
    with pytest.raises(exc) as info:
        arr[...]
    assert isinstance(info.value, zarrpipe.ZarrpipeError)
    assert str(info.value)
    with pytest.raises(exc):
        store.read("", bad)
    if storage == inner:  # one stored chunk: any read of it fails
        with pytest.raises(exc):
            store.read("", (bad[0].start, bad[1].stop - 1))
        with pytest.raises(exc):
            arr.read_chunk(bad_inner[0])
    with pytest.raises(exc):
        arr.read_chunks([(0, 0), *bad_inner])
    # reads that do not touch the damaged chunk still work
    assert_tensor(arr[: storage[0], : storage[1]], data[: storage[0], : storage[1]])
    assert_tensor(arr.read_chunk((0, 0)), data[: inner[0], : inner[1]])
    assert_tensor(arr[bad[0].stop :, :], data[bad[0].stop :, :])


def test_error_hierarchy():
    assert issubclass(zarrpipe.ChecksumError, zarrpipe.DecodeError)
    assert issubclass(zarrpipe.DecodeError, zarrpipe.ZarrpipeError)
    assert issubclass(zarrpipe.UnsupportedError, zarrpipe.ZarrpipeError)
    assert issubclass(zarrpipe.ZarrpipeError, Exception)


def test_corrupt_metadata(tmp_path):
    write_array(tmp_path, np.zeros((3,), "int8"), chunks=(2,))
    (tmp_path / "zarr.json").write_text("{ not json")
    with pytest.raises(zarrpipe.MetadataError, match=r'invalid metadata for "/": zarr\.json: '):
        zarrpipe.Store(str(tmp_path)).open_array()


# ---------------------------------------------------------------------------------------------
# codecs zarrpipe's own decoder does not stream: zarrs' decoder, with zarrpipe's plugins, reads
# them as zarr-python does (each with its exact `fallback_reason`); what neither reads is an
# UnsupportedError naming it. Never "either".


def _reads_like_zarr_python(root, path, fallback_reason):
    """zarr-python's values every way `check_reads` reads, by the decoder `fallback_reason`
    says: None, zarrpipe's own; else zarrs' (with zarrpipe's plugins), and this is why."""
    _, expected = reference(root, path)
    arr = check_reads(root, path, expected, n_random=2)
    assert arr.fallback_reason == fallback_reason


@pytest.mark.parametrize("dtype", ["str", "S4", "U3", "datetime64[s]", "timedelta64[ms]"], ids=str)
def test_non_numeric_dtypes_read_like_zarr_python(tmp_path, dtype):
    """Strings, bytes and times read natively, with zarr-python's values and dtype
    (tests/read/test_dtype_matrix.py covers them by codec, fill value and byte order)."""
    with quiet_zarr_writes():
        z = zarr.create_array(str(tmp_path), shape=(5,), chunks=(2,), dtype=dtype)
        if dtype == "str":
            z[...] = np.array(["a", "bb", "", "dddd", "e"])
        elif dtype.startswith("datetime") or dtype.startswith("timedelta"):
            z[...] = np.arange(5).astype(dtype)
        else:
            z[...] = np.array(["ab", "c", "", "dd", "e"], dtype=dtype)
    _, expected = reference(tmp_path)
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    got = np.asarray(arr[...])
    assert arr.dtype == got.dtype == expected.dtype
    assert got.tolist() == expected.tolist()
    assert np.asarray(arr[1:4]).tolist() == expected[1:4].tolist()


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        (lambda: dict(compressors=[zarr.codecs.BZ2()]), 'codec "numcodecs.bz2"'),
        (lambda: dict(compressors=[zarr.codecs.LZ4()]), 'codec "numcodecs.lz4"'),
        (lambda: dict(compressors=[zarr.codecs.Zlib()]), None),
        (
            lambda: dict(filters=[zarr.codecs.Delta(dtype="<i4")]),
            'codec "numcodecs.delta" in this position',
        ),
        (lambda: dict(compressors=[zarr.codecs.Adler32()]), 'codec "numcodecs.adler32"'),
        (lambda: dict(compressors=[zarr.codecs.LZMA()]), 'codec "numcodecs.lzma"'),
    ],
    ids=["v3-bz2", "v3-lz4", "v3-numcodecs-zlib", "v3-delta", "v3-adler32", "v3-lzma"],
)
def test_numcodecs_codecs_in_v3_read(tmp_path, kwargs, reason):
    """numcodecs codecs in v3 arrays (zarr.codecs.numcodecs wrappers) read as zarr-python
    reads them: numcodecs' zlib by zarrpipe's own decoder, the others through zarrs' decoder
    and zarrpipe's plugins (codec/plugins/; zarrs alone has no lz4, delta or lzma)."""
    data = (np.arange(30, dtype="<i4").reshape(5, 6) * 7 - 100).astype("<i4")
    with quiet_zarr_writes():
        kwargs = kwargs()
    write_array(tmp_path, data, chunks=(2, 4), missing="partial", fill_value=1, **kwargs)
    _reads_like_zarr_python(tmp_path, "", reason)


def _object_array_v2(root, codec: dict) -> None:
    """The metadata of a v2 array of Python objects (`|O`) under the object codec `codec`, as
    zarr-python 2 stored them; no chunk: opening decides from the metadata."""
    meta = {
        "zarr_format": 2,
        "shape": [3],
        "chunks": [2],
        "dtype": "|O",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": [codec],
    }
    (root / ".zarray").write_text(json.dumps(meta))


def _optional_array_v3(root) -> None:
    """zarrs' optional int32 (a mask beside the values), as zarrs writes its metadata."""
    optional = {"name": "zarrs.optional", "configuration": {"name": "int32", "configuration": {}}}
    codec = {
        "name": "zarrs.optional",
        "configuration": {
            "mask_codecs": [{"name": "packbits", "configuration": {}}],
            "data_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        },
    }
    meta = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [3],
        "data_type": optional,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": None,
        "codecs": [codec],
    }
    (root / "zarr.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "make,named",
    [
        (
            lambda root: _object_array_v2(root, numcodecs.JSON().get_config()),
            "codec json2 is not supported",
        ),
        (
            lambda root: _object_array_v2(root, numcodecs.Pickle().get_config()),
            "codec pickle is not supported",
        ),
        (
            # numcodecs.MsgPack().get_config() (without needing msgpack installed)
            lambda root: _object_array_v2(
                root,
                {"id": "msgpack2", "raw": False, "use_single_float": False, "use_bin_type": True},
            ),
            "codec msgpack2 is not supported",
        ),
        (_optional_array_v3, r'data type \{"name":"zarrs\.optional".* is not a fixed-size type'),
    ],
    ids=["v2-json", "v2-pickle", "v2-msgpack", "v3-zarrs-optional"],
)
def test_what_zarrpipe_does_not_read_is_unsupported(tmp_path, make, named):
    """README's list of what is not read: v2 object codecs and zarrs' optional type. Opening
    refuses them, naming the codec (or type), so no read can return wrong values."""
    make(tmp_path)
    with pytest.raises(zarrpipe.UnsupportedError, match=named):
        zarrpipe.Store(str(tmp_path)).open_array("")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_bz2_chunk_that_inflates_past_its_size_is_a_decode_error(tmp_path, zarr_format):
    """zarrpipe's bz2 decoder (codec/plugins/bz2.rs) stops one byte past the chunk's size, so
    a bomb is a DecodeError naming the chunk before it grows. zarrs has a bz2 codec of its own
    that inflates to the end: the message tells them apart, so this fails if zarrpipe's bz2 is
    no longer registered (values alone would not: zarrs' bz2 reads v2 bz2 chunks right)."""
    with quiet_zarr_writes():
        z = zarr.create_array(
            str(tmp_path),
            shape=(6,),
            chunks=(6,),
            dtype="u1",
            zarr_format=zarr_format,
            filters=None,
            compressors=numcodecs.BZ2() if zarr_format == 2 else zarr.codecs.BZ2(),
            fill_value=0,
        )
        z[...] = np.arange(6, dtype="u1")
    key = "0" if zarr_format == 2 else "c/0"
    (tmp_path / key).write_bytes(bz2.compress(bytes(1 << 20)))  # 45 bytes, 1 MiB of zeros
    arr = zarrpipe.Store(str(tmp_path)).open_array("")
    with pytest.raises(zarrpipe.DecodeError) as info:
        arr[...]
    assert str(info.value) == (
        f'chunk "{key}" is corrupt: bz2 stream decodes to more than the 6 bytes this chunk holds'
    )


def test_zarrs_fallback_fixedscaleoffset(tmp_path):
    """An array-to-array codec zarrpipe does not decode itself: zarrs' decoder reads it."""
    data = (np.arange(9 * 7).reshape(9, 7) * 0.1 - 2).astype("f8")
    with quiet_zarr_writes():
        fso = FixedScaleOffset(offset=1, scale=10, dtype="f8", astype="i4")
    write_array(
        tmp_path,
        data,
        chunks=(4, 3),
        missing="partial",
        fill_value=-3.0,
        filters=[fso],
    )
    _reads_like_zarr_python(tmp_path, "", 'codec "numcodecs.fixedscaleoffset" in this position')


def test_zarrs_fallback_transpose_before_sharding(tmp_path):
    data = sample_values("int32", (9, 7), seed=6)
    write_array(
        tmp_path,
        data,
        chunks=(4, 6),
        missing="deleted",
        fill_value=-5,
        filters=[TransposeCodec(order=(0, 1))],
        serializer=ShardingCodec(chunk_shape=(2, 3)),
        compressors=None,
    )
    _reads_like_zarr_python(tmp_path, "", "transpose before sharding")


def test_own_decoder_has_no_fallback_reason(tmp_path):
    write_array(tmp_path, np.arange(10, dtype="i2"), chunks=(3,), shards=(6,))
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    assert arr.fallback_reason is None
    assert arr.dimension_names is None
    assert arr.attrs == {}


@pytest.mark.parametrize(
    "patch,dtype",
    [
        ({"fill_value": "NaN"}, "<f8"),
        ({"fill_value": "Infinity"}, ">f4"),
        ({"fill_value": "-Infinity"}, "<f8"),
        ({"fill_value": None}, "<i8"),
        ({"fill_value": None}, "<f4"),
        ({"fill_value": 7}, "<f8"),
        ({"fill_value": True}, "|b1"),
        ({"fill_value": 200}, "|u1"),
        ({"dimension_separator": None}, "<u2"),  # key removed: "." is the default
        ({"order": "F", "fill_value": -2}, ">i2"),
    ],
    ids=repr,
)
def test_v2_metadata_spellings(tmp_path, patch, dtype):
    """v2 .zarray spellings other writers produce; zarr-python's reading is the reference."""
    data = sample_values(dtype, (5, 6), seed=3).astype(dtype)
    z = write_array(
        tmp_path, data, chunks=(2, 4), zarr_format=2, compressors=None, filters=None,
        missing="partial",
    )  # fmt: skip
    meta_path = tmp_path / ".zarray"
    meta = json.loads(meta_path.read_text())
    if "dimension_separator" in patch:
        del meta["dimension_separator"]
    else:
        meta.update(patch)
    if meta.get("order") == "F":  # rewrite the chunks in F order, as an F-order writer would
        for index in all_chunk_indices(data.shape, (2, 4)):
            path = chunk_file(tmp_path, "", z, index)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    chunk = np.frombuffer(f.read(), dtype=dtype).reshape(2, 4)
                with open(path, "wb") as f:
                    f.write(chunk.tobytes(order="F"))
    meta_path.write_text(json.dumps(meta))
    _, expected = reference(tmp_path)
    check_reads(tmp_path, "", expected)


# ---------------------------------------------------------------------------------------------
# threads


def test_set_num_threads_roundtrip():
    default = zarrpipe.get_num_threads()
    assert isinstance(default, int) and default >= 1
    try:
        zarrpipe.set_num_threads(1)
        assert zarrpipe.get_num_threads() == 1
        zarrpipe.set_num_threads(4)
        assert zarrpipe.get_num_threads() == 4
        with pytest.raises(ValueError):
            zarrpipe.set_num_threads(0)
        assert zarrpipe.get_num_threads() == 4
    finally:
        zarrpipe.set_num_threads(default)
    assert zarrpipe.get_num_threads() == default


def test_reads_from_python_threads(tmp_path):
    """Several Python threads reading one store at once get the right values."""
    from concurrent.futures import ThreadPoolExecutor

    data = sample_values("float32", (30, 20), seed=12)
    write_array(tmp_path, data, chunks=(4, 3), missing="partial", fill_value=np.inf)
    _, expected = reference(tmp_path)
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array()
    sels = [(slice(i, i + 7), slice(i % 5, None)) for i in range(24)]

    def work(sel):
        return np.array(arr[sel]), store.read("", sel).to_numpy()

    default = zarrpipe.get_num_threads()
    try:
        zarrpipe.set_num_threads(4)
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(work, sels * 3))
    finally:
        zarrpipe.set_num_threads(default)
    for sel, (a, b) in zip(sels * 3, results, strict=True):
        np.testing.assert_array_equal(a, expected[sel])
        np.testing.assert_array_equal(b, expected[sel])


# ---------------------------------------------------------------------------------------------
# shards laid out by other writers: chunks out of order, gaps, empty index entries


def _crc32c(data: bytes) -> bytes:
    import google_crc32c

    return google_crc32c.value(data).to_bytes(4, "little")


MISSING = 2**64 - 1


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("layout", ["reversed-with-gaps", "some-empty", "all-empty", "shared"])
def test_hand_built_shards(tmp_path, layout, index_location):
    """Shards whose inner chunks are stored in reverse order with junk between them, whose
    index marks some or all inner chunks empty, or whose entries point at the same bytes."""
    shape, shard, inner = (7, 10), (4, 6), (2, 3)
    data = sample_values("int32", shape, seed=21)
    z = write_array(
        tmp_path,
        data,
        chunks=shard,
        serializer=ShardingCodec(
            chunk_shape=inner, codecs=[BytesCodec()], index_location=index_location
        ),
        compressors=None,
        fill_value=-8,
    )
    n_inner = (shard[0] // inner[0]) * (shard[1] // inner[1])
    index_size = n_inner * 16 + 4
    for shard_index in all_chunk_indices(shape, shard):
        # the shard's values, padded with the fill value to the full shard shape
        full = np.full(shard, -8, dtype="<i4")
        region = chunk_slices(shape, shard, shard_index)
        full[tuple(slice(0, r.stop - r.start) for r in region)] = data[region]
        blobs = [
            full[i * inner[0] : (i + 1) * inner[0], j * inner[1] : (j + 1) * inner[1]].tobytes()
            for i in range(shard[0] // inner[0])
            for j in range(shard[1] // inner[1])
        ]
        entries = [(MISSING, MISSING)] * n_inner
        body = b""
        base = index_size if index_location == "start" else 0
        if layout == "reversed-with-gaps":
            for k in reversed(range(n_inner)):
                body += b"\xab" * (k + 1)  # junk
                entries[k] = (base + len(body), len(blobs[k]))
                body += blobs[k]
        elif layout == "some-empty":
            for k in range(n_inner):
                if k % 2 == 0:
                    entries[k] = (base + len(body), len(blobs[k]))
                    body += blobs[k]
        elif layout == "shared":  # every inner chunk reads the bytes of inner chunk 0
            body = blobs[0]
            entries = [(base, len(blobs[0]))] * n_inner
        index = np.array(entries, dtype="<u8").tobytes()
        index += _crc32c(index)
        assert len(index) == index_size
        with open(chunk_file(tmp_path, "", z, shard_index), "wb") as f:
            f.write(index + body if index_location == "start" else body + index)
    _, expected = reference(tmp_path)
    if layout == "all-empty":
        assert (expected == -8).all()
    elif layout == "reversed-with-gaps":
        np.testing.assert_array_equal(expected, data)
    check_reads(tmp_path, "", expected, n_random=6)


@pytest.mark.parametrize(
    "entry",
    ["past-end", "offset-overflow", "huge-nbytes", "short", "overlaps-index", "one-missing-half"],
)
def test_bad_shard_index_entries(tmp_path, entry):
    """A shard index with a valid checksum but impossible entries: DecodeError, never a panic,
    never a wrong value."""
    shape, shard, inner = (4, 12), (4, 6), (2, 3)  # two shards; the first is damaged
    data = sample_values("int32", shape, seed=22)
    z = write_array(
        tmp_path,
        data,
        chunks=shard,
        serializer=ShardingCodec(chunk_shape=inner, codecs=[BytesCodec()]),
        compressors=None,
    )
    path = chunk_file(tmp_path, "", z, (0, 0))
    with open(path, "rb") as f:
        raw = f.read()
    body, index = raw[: -(4 * 16 + 4)], raw[-(4 * 16 + 4) : -4]
    entries = np.frombuffer(index, dtype="<u8").reshape(4, 2).copy()
    k = 3  # damage the last inner chunk's entry
    if entry == "past-end":
        entries[k] = (len(raw) + 10, 24)
    elif entry == "offset-overflow":
        entries[k] = (2**64 - 2, 24)
    elif entry == "huge-nbytes":
        entries[k] = (0, 2**63)
    elif entry == "short":
        entries[k] = (entries[k][0], 5)
    elif entry == "overlaps-index":
        entries[k] = (len(body) + 8, 24)  # reads bytes of the index itself: valid, if odd
    else:  # offset says missing, nbytes does not
        entries[k] = (MISSING, 24)
    index = entries.astype("<u8").tobytes()
    with open(path, "wb") as f:
        f.write(body + index + _crc32c(index))
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array()
    if entry == "overlaps-index":  # in bounds: read like zarr-python reads it
        _, expected = reference(tmp_path)
        check_reads(tmp_path, "", expected)
        return
    with pytest.raises(zarrpipe.DecodeError):
        arr[...]
    with pytest.raises(zarrpipe.DecodeError):
        arr.read_chunk((1, 1))
    with pytest.raises(zarrpipe.DecodeError):
        arr[3, 5]
    # the other shard is unaffected (rejecting all of the damaged shard is allowed)
    assert_tensor(arr[:, 6:], data[:, 6:])
    assert_tensor(arr.read_chunk((1, 3)), data[2:, 9:])


def _blosc_huge_header(raw: bytes) -> bytes:
    """A blosc chunk whose header claims 2 GiB of decompressed data."""
    raw = bytearray(raw)
    raw[4:8] = (2**31 - 1).to_bytes(4, "little")
    return bytes(raw)


@pytest.mark.parametrize(
    "codec",
    ["zstd", "gzip", "blosc", "crc32c", "v2-zlib", "v2-zstd", "blosc-huge-header", "zstd-empty"],
)
@pytest.mark.parametrize("delta", [-4, 8])
def test_valid_stream_wrong_length(tmp_path, codec, delta):
    """A chunk that decompresses fine but to the wrong number of bytes is corrupt."""
    crc = numcodecs.CRC32C()
    encoders = {
        "zstd": (dict(compressors=[ZstdCodec()]), numcodecs.Zstd().encode),
        "zstd-empty": (dict(compressors=[ZstdCodec()]), lambda b: numcodecs.Zstd().encode(b"")),
        "gzip": (dict(compressors=[GzipCodec()]), numcodecs.GZip().encode),
        "blosc": (
            dict(compressors=[BloscCodec(cname="lz4", shuffle="noshuffle", typesize=4)]),
            numcodecs.Blosc(cname="lz4", shuffle=0).encode,
        ),
        "blosc-huge-header": (
            dict(compressors=[BloscCodec(cname="lz4", shuffle="noshuffle", typesize=4)]),
            lambda b: _blosc_huge_header(numcodecs.Blosc(cname="lz4", shuffle=0).encode(b)),
        ),
        "crc32c": (dict(compressors=[Crc32cCodec()]), lambda b: bytes(crc.encode(b))),
        "v2-zlib": (
            dict(zarr_format=2, filters=None, compressors=numcodecs.Zlib()),
            numcodecs.Zlib().encode,
        ),
        "v2-zstd": (
            dict(zarr_format=2, filters=None, compressors=numcodecs.Zstd()),
            numcodecs.Zstd().encode,
        ),
    }
    kwargs, encode = encoders[codec]
    data = sample_values("int32", (6, 8), seed=23)
    z = write_array(tmp_path, data, chunks=(3, 4), **kwargs)
    chunk_nbytes = 3 * 4 * 4
    payload = np.arange(chunk_nbytes + delta, dtype=np.uint8).tobytes()
    with open(chunk_file(tmp_path, "", z, (1, 0)), "wb") as f:
        f.write(bytes(encode(payload)))
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    with pytest.raises(zarrpipe.DecodeError):
        arr.read_chunk((1, 0))
    with pytest.raises(zarrpipe.DecodeError):
        arr[...]
    with pytest.raises(zarrpipe.DecodeError):
        arr[4, 1]
    assert_tensor(arr[:3, :], data[:3, :])
    assert_tensor(arr.read_chunk((1, 1)), data[3:, 4:])


@pytest.mark.parametrize("fill", [0, 7, 1.5])
def test_v2_strings_with_a_numeric_fill_value_read_as_zarr_python(tmp_path, fill):
    """zarrs' zarr-python compatibility fixtures have a v2 vlen-utf8 array whose fill value
    is the number 0: zarr-python reads its missing chunks as the number's text."""
    root = tmp_path / "s.zarr"
    root.mkdir()
    (root / ".zarray").write_text(
        json.dumps(
            {
                "chunks": [2], "compressor": None, "dtype": "|O", "fill_value": fill,
                "filters": [{"id": "vlen-utf8"}], "order": "C", "shape": [4], "zarr_format": 2,
            }
        )
    )  # fmt: skip
    with quiet_zarr_writes():
        z = zarr.open_array(str(root), mode="a")
        z[:2] = ["a", "bc"]
        want = z[:]
    arr = zarrpipe.Store(root, mode="r").open_array()
    assert arr.fill_value == z.fill_value == str(fill)
    assert list(arr[:]) == list(want) == ["a", "bc", str(fill), str(fill)]


@pytest.mark.parametrize(
    "dtype", ["datetime64[ns]", "timedelta64[s]", "S3", [("a", "<i4"), ("b", "<f8")]]
)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_metadata_is_the_stored_document(tmp_path, dtype, zarr_format):
    """`Array.metadata` names the stored data type (not the stand-in zarrs holds), so an
    array reopened from it (as consolidated metadata and pickling do) keeps its dtype."""
    root = tmp_path / "m.zarr"
    with quiet_zarr_writes():
        zarr.create_array(str(root), shape=(3,), chunks=(3,), dtype=dtype, zarr_format=zarr_format)
    stored = json.loads((root / ("zarr.json" if zarr_format == 3 else ".zarray")).read_text())
    store = zarrpipe.Store(root, mode="r")
    arr = store.open_array()
    key = "data_type" if zarr_format == 3 else "dtype"
    assert arr.metadata[key] == stored[key]
    again = store.open_array(metadata=arr.metadata)
    assert again.dtype == arr.dtype == np.dtype(dtype)
