"""The read correctness matrix: codecs x dtypes x sharded/unsharded x v2/v3 x ragged edges x
missing chunks x big-endian. Stores are written with zarr-python; zarrpipe's reads (whole array,
random sub-selections, every chunk) must equal what zarr-python reads back."""

from __future__ import annotations

import math

import numcodecs
import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import (
    ALL_DTYPES,
    all_chunk_indices,
    assert_moves_out,
    assert_tensor,
    check_reads,
    chunk_slices,
    interesting_selections,
    num_threads,
    random_selections,
    reference,
    sample_values,
    write_array,
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


def rev(ndim: int) -> tuple[int, ...]:
    return tuple(reversed(range(ndim)))


def rot(ndim: int) -> tuple[int, ...]:
    return (ndim - 1, *range(ndim - 1))


# ---------------------------------------------------------------------------------------------
# Zarr v3 codec chains (unsharded). Each entry: ndim -> create_array keyword arguments.

V3_CHAINS = {
    "bytes-le": lambda n: dict(serializer=BytesCodec(endian="little"), compressors=None),
    "bytes-be": lambda n: dict(serializer=BytesCodec(endian="big"), compressors=None),
    "zstd": lambda n: dict(compressors=[ZstdCodec(level=3)]),
    "zstd-checksum": lambda n: dict(compressors=[ZstdCodec(level=1, checksum=True)]),
    "be-zstd": lambda n: dict(serializer=BytesCodec(endian="big"), compressors=[ZstdCodec()]),
    "gzip": lambda n: dict(compressors=[GzipCodec(level=6)]),
    "crc32c": lambda n: dict(compressors=[Crc32cCodec()]),
    "zstd-crc32c": lambda n: dict(compressors=[ZstdCodec(), Crc32cCodec()]),
    "be-gzip-crc32c": lambda n: dict(
        serializer=BytesCodec(endian="big"), compressors=[GzipCodec(), Crc32cCodec()]
    ),
    "gzip-zstd": lambda n: dict(compressors=[GzipCodec(level=1), ZstdCodec()]),
    "blosc-lz4-shuffle": lambda n: dict(compressors=[BloscCodec(cname="lz4", shuffle="shuffle")]),
    "blosc-lz4hc-bitshuffle": lambda n: dict(
        compressors=[BloscCodec(cname="lz4hc", shuffle="bitshuffle")]
    ),
    "blosc-blosclz-noshuffle": lambda n: dict(
        compressors=[BloscCodec(cname="blosclz", shuffle="noshuffle")]
    ),
    "blosc-zstd-bitshuffle": lambda n: dict(
        compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle", clevel=9)]
    ),
    "blosc-zlib-shuffle": lambda n: dict(compressors=[BloscCodec(cname="zlib", shuffle="shuffle")]),
    "blosc-typesize1": lambda n: dict(
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle", typesize=1)]
    ),
    "transpose": lambda n: dict(filters=[TransposeCodec(order=rev(n))], compressors=None),
    "transpose-be-zstd": lambda n: dict(
        filters=[TransposeCodec(order=rot(n))],
        serializer=BytesCodec(endian="big"),
        compressors=[ZstdCodec()],
    ),
    "transpose2-blosc-crc32c": lambda n: dict(
        filters=[TransposeCodec(order=rot(n)), TransposeCodec(order=(1, 0, *range(2, n)))],
        compressors=[BloscCodec(cname="lz4", shuffle="bitshuffle"), Crc32cCodec()],
    ),
    "transpose-identity-gzip": lambda n: dict(
        filters=[TransposeCodec(order=tuple(range(n)))], compressors=[GzipCodec()]
    ),
}

# nonzero fill values so that a missing chunk read as zeros (or garbage) is caught
CODEC_DTYPES = {"uint8": 5, "int16": -3, "float64": np.nan, "complex64": 1 - 2j}


@pytest.mark.parametrize("dtype", list(CODEC_DTYPES))
@pytest.mark.parametrize("chain", list(V3_CHAINS))
def test_v3_codec_chain(tmp_path, chain, dtype):
    """Ragged 3-D array, some chunks never written, every v3 codec chain."""
    data = sample_values(dtype, (7, 9, 5), seed=list(V3_CHAINS).index(chain))
    write_array(
        tmp_path,
        data,
        chunks=(3, 4, 2),
        missing="partial",
        fill_value=CODEC_DTYPES[dtype],
        **V3_CHAINS[chain](3),
    )
    _, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, seed=len(chain))
    assert arr.zarr_format == 3
    assert arr.shards is None
    assert tuple(arr.chunks) == (3, 4, 2)
    assert arr.fallback_reason is None, arr.fallback_reason


@pytest.mark.parametrize("chain", ["transpose", "transpose-be-zstd", "transpose2-blosc-crc32c"])
@pytest.mark.parametrize(
    "shape,chunks",
    [
        ((11,), (4,)),
        ((5, 7), (2, 3)),
        ((3, 4, 5, 3), (2, 3, 2, 2)),
        ((2, 3, 4, 3, 2), (1, 2, 3, 2, 2)),
    ],
    ids=["1d", "2d", "4d", "5d"],
)
def test_v3_transpose_ndim(tmp_path, chain, shape, chunks):
    if chain == "transpose2-blosc-crc32c" and len(shape) < 2:
        pytest.skip("needs two axes to swap")
    data = sample_values("int32", shape, seed=len(shape))
    write_array(
        tmp_path,
        data,
        chunks=chunks,
        missing="partial",
        fill_value=-1,
        **V3_CHAINS[chain](len(shape)),
    )
    _, expected = reference(tmp_path)
    check_reads(tmp_path, "", expected, seed=3)


# Bigger chunks (1221 elements: not a multiple of 8, so bitshuffle has leftovers), several blosc
# blocks per chunk (blocksize not a multiple of the type size), compressible and random data.

BIG_CODECS = {
    "v3-blosc-lz4-shuffle-bs1000": lambda: dict(
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle", blocksize=1000)]
    ),
    "v3-blosc-zstd-bitshuffle-bs3000": lambda: dict(
        compressors=[BloscCodec(cname="zstd", shuffle="bitshuffle", blocksize=3000)]
    ),
    "v3-blosc-blosclz-noshuffle": lambda: dict(
        compressors=[BloscCodec(cname="blosclz", shuffle="noshuffle", clevel=9)]
    ),
    "v3-blosc-lz4hc-bitshuffle-bs256": lambda: dict(
        compressors=[BloscCodec(cname="lz4hc", shuffle="bitshuffle", blocksize=256)]
    ),
    "v3-blosc-zlib-clevel0": lambda: dict(compressors=[BloscCodec(cname="zlib", clevel=0)]),
    "v3-zstd-level-neg": lambda: dict(compressors=[ZstdCodec(level=-5)]),
    "v3-gzip-9": lambda: dict(compressors=[GzipCodec(level=9)]),
    "v2-blosc-autoshuffle": lambda: dict(
        zarr_format=2,
        filters=None,
        compressors=numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.AUTOSHUFFLE),
    ),
    "v2-blosc-bitshuffle-bs512": lambda: dict(
        zarr_format=2,
        filters=None,
        compressors=numcodecs.Blosc(
            cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE, blocksize=512
        ),
    ),
    "v2-zstd-checksum": lambda: dict(
        zarr_format=2, filters=None, compressors=numcodecs.Zstd(level=5, checksum=True)
    ),
    "v2-lz4": lambda: dict(zarr_format=2, filters=None, compressors=numcodecs.LZ4()),
}


@pytest.mark.parametrize("kind", ["smooth", "random"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "complex128"])
@pytest.mark.parametrize("codec", list(BIG_CODECS))
def test_big_chunks(tmp_path, codec, dtype, kind):
    shape = (70, 80)
    if kind == "random":
        data = sample_values(dtype, shape, seed=13)
    else:
        data = ((np.arange(70 * 80) // 7) % 251).reshape(shape).astype(dtype)
    write_array(
        tmp_path, data, chunks=(33, 37), missing="partial", fill_value=1, **BIG_CODECS[codec]()
    )
    _, expected = reference(tmp_path)
    check_reads(tmp_path, "", expected, seed=1, n_random=3)


# ---------------------------------------------------------------------------------------------
# Sharding

SHARD_CHAINS = {
    # (chunks given to create_array, kwargs): inner chunks (3, 4), shards (6, 8)
    "shards-default": ((3, 4), dict(shards=(6, 8))),
    "shards-gzip": ((3, 4), dict(shards=(6, 8), compressors=[GzipCodec()])),
    "shards-blosc-be": (
        (3, 4),
        dict(
            shards=(6, 8),
            serializer=BytesCodec(endian="big"),
            compressors=[BloscCodec(cname="zstd", shuffle="shuffle")],
        ),
    ),
    "shards-transpose-crc32c": (
        (3, 4),
        dict(shards=(6, 8), filters=[TransposeCodec(order=(1, 0))], compressors=[Crc32cCodec()]),
    ),
    "index-end": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4), codecs=[BytesCodec(), ZstdCodec()], index_location="end"
            ),
            compressors=None,
        ),
    ),
    "index-start": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4), codecs=[BytesCodec(), ZstdCodec()], index_location="start"
            ),
            compressors=None,
        ),
    ),
    "index-start-no-crc": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4),
                codecs=[BytesCodec(endian="big"), GzipCodec()],
                index_codecs=[BytesCodec()],
                index_location="start",
            ),
            compressors=None,
        ),
    ),
    "index-be-crc32c": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4),
                codecs=[TransposeCodec(order=(1, 0)), BytesCodec(), Crc32cCodec()],
                index_codecs=[BytesCodec(endian="big"), Crc32cCodec()],
            ),
            compressors=None,
        ),
    ),
    "nested": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4),
                codecs=[ShardingCodec(chunk_shape=(1, 2), codecs=[BytesCodec(), ZstdCodec()])],
            ),
            compressors=None,
        ),
    ),
    "nested-index-start": (
        (6, 8),
        dict(
            serializer=ShardingCodec(
                chunk_shape=(3, 4),
                index_location="start",
                codecs=[
                    ShardingCodec(
                        chunk_shape=(3, 2),
                        index_location="end",
                        codecs=[BytesCodec(endian="big"), Crc32cCodec()],
                    ),
                    GzipCodec(),
                ],
            ),
            compressors=None,
        ),
    ),
    # a sharding codec followed by a compressor: not a "plain" shard, read shard by shard
    "sharding-then-zstd": (
        (6, 8),
        dict(serializer=ShardingCodec(chunk_shape=(3, 4)), compressors=[ZstdCodec()]),
    ),
}

SHARD_DTYPES = ["int32", "float32", "complex128", "uint16", "bool", "float16"]


@pytest.mark.parametrize("missing", ["none", "partial", "deleted"])
@pytest.mark.parametrize("chain", list(SHARD_CHAINS))
def test_sharded(tmp_path, chain, missing):
    """13x11 array, inner chunks 3x4 (ragged), shards 6x8 (ragged); missing shards and inner
    chunks; reads of whole, random selections, every inner chunk."""
    chunks, kwargs = SHARD_CHAINS[chain]
    dtype = SHARD_DTYPES[list(SHARD_CHAINS).index(chain) % len(SHARD_DTYPES)]
    fill = {"bool": True, "float32": np.nan, "float16": -np.inf}.get(dtype, 9)
    data = sample_values(dtype, (13, 11), seed=7)
    if "shards" not in kwargs:  # explicit sharding serializer: chunks is the shard shape
        kwargs = dict(kwargs, write_grid=(3, 4), skip_first=(6, 8))
    write_array(tmp_path, data, chunks=chunks, missing=missing, fill_value=fill, **kwargs)
    z, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, seed=11, n_random=6)
    assert tuple(arr.chunks) == tuple(z.chunks)
    if chain == "sharding-then-zstd":
        assert arr.shards is None
    else:
        assert tuple(arr.chunks) == (3, 4)
        assert tuple(arr.shards) == (6, 8)
        assert tuple(arr.chunk_grid_shape) == (5, 3)
    assert arr.fallback_reason is None, arr.fallback_reason


@pytest.mark.parametrize("layout", ["sharded", "nested", "index-start"])
def test_sharded_partial_reads(tmp_path, layout):
    """Regions inside one inner chunk, across inner-chunk and shard boundaries, inside missing
    inner chunks and missing shards."""
    shape = (20, 18)
    data = sample_values("int64", shape, seed=5)
    if layout == "sharded":
        kwargs = dict(chunks=(3, 3), shards=(9, 6))
    else:
        codecs = [ShardingCodec(chunk_shape=(1, 3))] if layout == "nested" else [BytesCodec()]
        kwargs = dict(
            chunks=(9, 6),
            serializer=ShardingCodec(
                chunk_shape=(3, 3),
                codecs=codecs,
                index_location="start" if layout == "index-start" else "end",
            ),
            compressors=None,
            write_grid=(3, 3),
            skip_first=(9, 6),
        )
    # inner chunk (i, j) is written unless (i + j) % 4 == 0; shard (0, 0) is never written
    write_array(
        tmp_path,
        data,
        missing="partial",
        keep=lambda idx: (idx[0] + idx[1]) % 4 != 0,
        fill_value=-42,
        **kwargs,
    )
    _, expected = reference(tmp_path)
    assert (expected[:9, :6] == -42).all()  # the missing shard
    assert (expected[12:15, 0:3] == -42).all()  # inner chunk (4, 0) of a written shard
    assert (expected[12:15, 9:12] != -42).all()  # inner chunk (4, 3): written
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array("")
    assert tuple(arr.chunks) == (3, 3)
    assert tuple(arr.shards) == (9, 6)
    regions = [
        (4, 4),  # one element
        (-1, -1),
        (slice(3, 6), slice(3, 6)),  # exactly one inner chunk
        (slice(10, 11), slice(7, 9)),  # inside one inner chunk
        (slice(11, 13), slice(8, 10)),  # across 4 inner chunks in a shard
        (slice(8, 10), slice(5, 7)),  # across 4 shards
        (slice(0, 9), slice(0, 6)),  # exactly the missing shard
        (slice(1, 2), slice(1, 2)),  # inside the missing shard
        (slice(12, 15), slice(0, 3)),  # inner chunk (4, 0): missing in a written shard
        (slice(13, 14), slice(1, 3)),  # inside that missing inner chunk
        (slice(18, 20), slice(12, 18)),  # ragged last shard
        (slice(17, None), slice(None)),  # ragged edge, all columns
        (slice(None), slice(16, None)),
        (Ellipsis, 7),
        (13, Ellipsis),
    ]
    for sel in regions:
        want = expected[sel]
        assert_tensor(arr[sel], want, f"{layout} {sel}")
        assert_moves_out(store.read("", sel), want, f"{layout} {sel}")
    for index in all_chunk_indices(shape, arr.chunks):
        want = expected[chunk_slices(shape, arr.chunks, index)]
        assert_tensor(arr.read_chunk(index), want, f"chunk {index}")


# ---------------------------------------------------------------------------------------------
# every dtype, in several layouts

DTYPE_LAYOUTS = {
    "v3-default": lambda dt: dict(chunks=(4, 3)),
    "v3-be-blosc": lambda dt: dict(
        chunks=(4, 3),
        serializer=BytesCodec(endian="big") if np.dtype(dt).itemsize > 1 else BytesCodec(),
        compressors=[BloscCodec(cname="lz4", shuffle="shuffle")],
    ),
    "v3-sharded-transpose": lambda dt: dict(
        chunks=(2, 3), shards=(4, 6), filters=[TransposeCodec(order=(1, 0))]
    ),
    "v2-zlib-F": lambda dt: dict(
        chunks=(4, 3), zarr_format=2, compressors=numcodecs.Zlib(level=1), filters=None, order="F"
    ),
    "v2-be-blosc": lambda dt: dict(
        chunks=(4, 3),
        zarr_format=2,
        dtype=np.dtype(dt).newbyteorder(">"),
        compressors=numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
        filters=None,
    ),
}


@pytest.mark.parametrize("layout", list(DTYPE_LAYOUTS))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dtype(tmp_path, dtype, layout):
    """Every fixed-size dtype with its extremes (min/max, NaN, inf, -0.0), ragged 9x7 array with
    missing chunks."""
    kwargs = DTYPE_LAYOUTS[layout](dtype)
    data = sample_values(dtype, (9, 7), seed=ALL_DTYPES.index(dtype))
    if "dtype" in kwargs:
        data = data.astype(kwargs["dtype"])
    write_array(tmp_path, data, missing="deleted", **kwargs)
    _, expected = reference(tmp_path)
    if np.dtype(dtype).kind in "fc":
        assert np.isnan(data).any() and np.isinf(data).any() and np.signbit(data.real).any()
    arr = check_reads(tmp_path, "", expected, seed=ALL_DTYPES.index(dtype), n_random=3)
    assert arr.dtype == np.dtype(dtype)


# ---------------------------------------------------------------------------------------------
# Zarr v2

V2_COMPRESSORS = {
    "none": None,
    "zlib": numcodecs.Zlib(level=5),
    "gzip": numcodecs.GZip(level=5),
    "zstd": numcodecs.Zstd(level=3),
    "blosc-lz4-shuffle": numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc-zstd-bitshuffle": numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE),
    "blosc-blosclz-noshuffle": numcodecs.Blosc(cname="blosclz", shuffle=numcodecs.Blosc.NOSHUFFLE),
    "lz4": numcodecs.LZ4(),
}
V2_DTYPES = {"<": ["<i4", "<f8", "<c8", "<u2"], ">": [">i4", ">f8", ">c16", ">u8", ">f2", ">i2"]}


def _v2_dtype(compressor: str, endian: str) -> str:
    options = V2_DTYPES[endian]
    return options[list(V2_COMPRESSORS).index(compressor) % len(options)]


@pytest.mark.parametrize("separator", [".", "/"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
def test_v2(tmp_path, compressor, endian, order, separator):
    dtype = _v2_dtype(compressor, endian)
    data = sample_values(dtype, (7, 6, 5), seed=3).astype(dtype)
    fill = np.nan if np.dtype(dtype).kind == "f" else 3
    write_array(
        tmp_path,
        data,
        path="grp/arr",
        chunks=(3, 4, 2),
        zarr_format=2,
        compressors=V2_COMPRESSORS[compressor],
        filters=None,
        order=order,
        fill_value=fill,
        chunk_key_encoding={"name": "v2", "separator": separator},
        missing="partial",
    )
    _, expected = reference(tmp_path, "grp/arr")
    assert expected.dtype == np.dtype(dtype)
    arr = check_reads(tmp_path, "grp/arr", expected, seed=2)
    assert arr.zarr_format == 2
    assert arr.dtype == np.dtype(dtype).newbyteorder("=")
    # lz4: numcodecs' blocks, through zarrs' decoder and zarrpipe's plugin (zarrs has no lz4).
    assert arr.fallback_reason == ('codec "numcodecs.lz4"' if compressor == "lz4" else None)


@pytest.mark.parametrize(
    "filters,compressor,fallback_reason",
    [
        ([numcodecs.Delta(dtype="<i4")], None, 'codec "numcodecs.delta" in this position'),
        (None, numcodecs.BZ2(), 'codec "numcodecs.bz2"'),
        (None, numcodecs.LZMA(), 'codec "numcodecs.lzma"'),
        (
            [numcodecs.Shuffle(elementsize=4)],
            numcodecs.Zlib(),
            'codec "numcodecs.shuffle" in this position',
        ),
        (
            [numcodecs.AsType(encode_dtype="<i2", decode_dtype="<i4")],
            None,
            'codec "numcodecs.astype" in this position',
        ),
        (None, numcodecs.Adler32(), 'codec "numcodecs.adler32"'),
    ],
    ids=["delta", "bz2", "lzma", "shuffle-zlib", "astype", "adler32"],
)
def test_v2_numcodecs_codecs_read(tmp_path, filters, compressor, fallback_reason):
    """numcodecs filters and compressors zarrpipe's own decoder does not stream read as
    zarr-python reads them, through zarrs' decoder and zarrpipe's plugins (codec/plugins/);
    `fallback_reason` names the codec that sent them there. (What zarrpipe does not read at
    all: test_read_api.py's test_what_zarrpipe_does_not_read_is_unsupported.)"""
    data = (np.arange(6 * 7, dtype="<i4").reshape(6, 7) * 37 - 500).astype("<i4")
    write_array(
        tmp_path,
        data,
        chunks=(4, 3),
        zarr_format=2,
        filters=filters,
        compressors=compressor,
        fill_value=0,
        missing="partial",
    )
    _, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, n_random=3)
    assert arr.fallback_reason == fallback_reason


# ---------------------------------------------------------------------------------------------
# Fill values and missing chunks

FILLS = {
    "int32-default": ("int32", None),
    "int32-neg": ("int32", -123456),
    "int8-min": ("int8", -128),
    "uint64-max": ("uint64", np.iinfo(np.uint64).max),
    "uint16-nonzero": ("uint16", 4242),
    "int64-min": ("int64", np.iinfo(np.int64).min),
    "float32-nan": ("float32", np.nan),
    "float64-nan": ("float64", np.nan),
    "float16-nan": ("float16", np.nan),
    "float64-inf": ("float64", np.inf),
    "float32-neginf": ("float32", -np.inf),
    "float64-negzero": ("float64", -0.0),
    "float64-value": ("float64", 2.5e-300),
    "float16-value": ("float16", -1.5),
    "complex64": ("complex64", 1.5 - 2.25j),
    "complex128-nan": ("complex128", complex(np.nan, 1.0)),
    "complex128-inf": ("complex128", complex(-np.inf, 0.0)),
    "bool-true": ("bool", True),
    "bool-default": ("bool", None),
}


def _same_scalar(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc":
        return bool(
            np.array_equal(a, b, equal_nan=True)
            and np.signbit(a.real) == np.signbit(b.real)
            and np.signbit(a.imag) == np.signbit(b.imag)
        )
    return bool(a == b)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("missing", ["never", "deleted", "partial"])
@pytest.mark.parametrize("fill", list(FILLS))
def test_fill_value(tmp_path, fill, missing, zarr_format):
    dtype, value = FILLS[fill]
    kwargs = {} if value is None else {"fill_value": value}
    if zarr_format == 2:
        kwargs.update(filters=None, compressors=numcodecs.Zstd())
    data = sample_values(dtype, (5, 7), seed=1)
    write_array(tmp_path, data, chunks=(2, 3), missing=missing, zarr_format=zarr_format, **kwargs)
    z, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, seed=4, n_random=2)
    # the fill value is surfaced, as a numpy scalar of the array's dtype
    fv = arr.fill_value
    assert isinstance(fv, np.generic), type(fv)
    assert fv.dtype == np.dtype(dtype)
    want = np.asarray(z.fill_value if z.fill_value is not None else 0, dtype=dtype)
    assert _same_scalar(fv, want), (fv, want)
    if missing == "never":
        # every element is the fill value
        assert_tensor(arr[...], np.full((5, 7), want, dtype=dtype))


@pytest.mark.parametrize("fill", ["int32-neg", "float32-nan", "complex64", "bool-true"])
@pytest.mark.parametrize("missing", ["never", "deleted", "partial"])
def test_fill_value_sharded(tmp_path, fill, missing):
    """Missing shards and missing inner chunks of written shards read as the fill value."""
    dtype, value = FILLS[fill]
    data = sample_values(dtype, (10, 9), seed=2)
    write_array(tmp_path, data, chunks=(2, 3), shards=(4, 6), missing=missing, fill_value=value)
    _, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, seed=5, n_random=3)
    assert _same_scalar(arr.fill_value, np.asarray(value, dtype=dtype))


# ---------------------------------------------------------------------------------------------
# Shapes: 0-d, zero-size, 1..5 dimensions, chunk size 1, single chunk, ragged edges

SHAPES = {
    "0d": ((), (), None),
    "1-elem": ((1,), (1,), None),
    "1d-single-chunk": ((5,), (5,), None),
    "1d-ragged": ((11,), (4,), None),
    "1d-chunk1": ((6,), (1,), None),
    "1d-sharded": ((17,), (2,), (8,)),
    "1d-empty": ((0,), (3,), None),
    "2d-empty": ((4, 0), (2, 2), None),
    "2d-empty-both": ((0, 0), (1, 1), None),
    "3d-empty-sharded": ((3, 0, 2), (1, 2, 2), (2, 4, 2)),
    "2d-chunk1-axis0": ((5, 7), (1, 3), None),
    "2d-chunk1-both": ((3, 4), (1, 1), None),
    "2d-single-chunk": ((5, 7), (5, 7), None),
    "2d-chunk-bigger": ((5, 7), (8, 10), None),
    "3d-ragged": ((4, 5, 6), (3, 2, 4), None),
    "3d-chunk1-last": ((6, 5, 4), (4, 3, 1), None),
    "4d-ragged": ((3, 4, 5, 6), (2, 3, 2, 4), None),
    "5d-ragged": ((2, 3, 4, 5, 3), (1, 2, 3, 2, 2), None),
    "5d-sharded": ((2, 3, 4, 5, 3), (1, 2, 3, 2, 2), (2, 2, 3, 4, 2)),
    "4d-sharded-single-shard": ((3, 4, 5, 2), (2, 2, 2, 2), (4, 4, 6, 2)),
    "2d-sharded-chunk1": ((5, 7), (1, 1), (2, 7)),
}


@pytest.mark.parametrize("fmt", ["v3", "v2-C", "v2-F"])
@pytest.mark.parametrize("case", list(SHAPES))
def test_shapes(tmp_path, case, fmt):
    shape, chunks, shards = SHAPES[case]
    if shards is not None and fmt != "v3":
        pytest.skip("no sharding in Zarr v2")
    data = sample_values("float32", shape, seed=len(shape))
    kwargs = {}
    if fmt != "v3":
        kwargs = dict(zarr_format=2, compressors=numcodecs.Zlib(), order=fmt[-1])
    write_array(
        tmp_path,
        data,
        chunks=chunks,
        shards=shards,
        fill_value=-7.5,
        missing="partial" if math.prod(shape) > 1 else "none",
        **kwargs,
    )
    _, expected = reference(tmp_path)
    arr = check_reads(tmp_path, "", expected, seed=len(case), n_random=5)
    assert tuple(arr.chunks) == chunks
    assert arr.shards == (None if shards is None else shards)
    if shape == ():
        assert_tensor(arr[()], expected)
        assert_tensor(arr.read_chunk(()), expected)
        assert_moves_out(arr[...], expected)
        with pytest.raises(IndexError):
            arr[0]


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype,fill", [("float64", np.nan), ("int16", -5), ("bool", True)])
def test_zero_d_never_written(tmp_path, zarr_format, dtype, fill):
    """A 0-d array whose only chunk was never written reads as its fill value."""
    kwargs = {"compressors": numcodecs.Zstd()} if zarr_format == 2 else {}
    write_array(
        tmp_path,
        np.zeros((), dtype),
        chunks=(),
        zarr_format=zarr_format,
        fill_value=fill,
        missing="never",
        **kwargs,
    )
    _, expected = reference(tmp_path)
    np.testing.assert_array_equal(expected, np.asarray(fill, dtype))
    arr = check_reads(tmp_path, "", expected)
    assert_tensor(arr.read_chunk(()), np.asarray(fill, dtype))


# ---------------------------------------------------------------------------------------------
# Hand-picked selections on one store per layout (written once per module)

SEL_SHAPE = (7, 9, 5)
SEL_LAYOUTS = {
    "v3": dict(chunks=(3, 4, 2)),
    "v3-sharded": dict(chunks=(3, 2, 2), shards=(3, 4, 4)),
    "v2-F": dict(chunks=(3, 4, 2), zarr_format=2, order="F", compressors=numcodecs.Zstd()),
    "v3-transpose-be": dict(
        chunks=(3, 4, 2),
        filters=[TransposeCodec(order=(1, 2, 0))],
        serializer=BytesCodec(endian="big"),
        compressors=[GzipCodec()],
    ),
    "v3-nested-shards-index-start": dict(
        chunks=(6, 4, 4),
        serializer=ShardingCodec(
            chunk_shape=(3, 2, 2),
            index_location="start",
            codecs=[ShardingCodec(chunk_shape=(1, 2, 1), codecs=[BytesCodec(), ZstdCodec()])],
        ),
        compressors=None,
        write_grid=(3, 2, 2),
        skip_first=(6, 4, 4),
    ),
}


@pytest.fixture(scope="module", params=list(SEL_LAYOUTS))
def sel_store(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"sel-{request.param}")
    data = sample_values("int16", SEL_SHAPE, seed=9)
    write_array(
        root, data, path="a/b", missing="partial", fill_value=-1, **SEL_LAYOUTS[request.param]
    )
    _, expected = reference(root, "a/b")
    return zarrpipe.Store(str(root)), expected


@pytest.mark.parametrize(
    "sel", interesting_selections(SEL_SHAPE), ids=lambda s: repr(s).replace(" ", "")
)
def test_selection(sel_store, sel):
    store, expected = sel_store
    want = np.asarray(expected[sel])
    arr = store.open_array("a/b")
    assert_tensor(arr[sel], want, repr(sel))
    assert_tensor(arr.read(sel), want, repr(sel))
    assert_moves_out(store.read("a/b", sel), want, repr(sel))


def test_random_selections(sel_store):
    store, expected = sel_store
    arr = store.open_array("a/b")
    for sel in random_selections(123, SEL_SHAPE, 60):
        want = np.asarray(expected[sel])
        assert_tensor(arr[sel], want, repr(sel))


def test_every_chunk_matches_zarr_blocks(tmp_path):
    """Per-chunk reads against zarr-python's own `blocks` (unsharded: blocks are chunks)."""
    data = sample_values("uint32", (10, 7, 3), seed=8)
    write_array(tmp_path, data, chunks=(4, 3, 2), missing="partial", fill_value=77)
    z, _ = reference(tmp_path)
    arr = zarrpipe.Store(str(tmp_path)).open_array()
    indices = list(np.ndindex(*arr.chunk_grid_shape))
    assert len(indices) == 3 * 3 * 2
    for index, t in zip(indices, arr.read_chunks(indices), strict=True):
        assert_tensor(t, np.asarray(z.blocks[index]), f"chunk {index}")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["index-end", "index-start-crc32c"])
def test_each_shard_read_by_itself(tmp_path, layout, threads):
    """Whole shards read one call each: with several threads a lone shard file is read inner
    chunk by inner chunk in parallel, with one it is read whole; both match zarr-python,
    missing inner chunks and a missing shard included."""
    index_codecs = [BytesCodec(), Crc32cCodec()] if "crc32c" in layout else [BytesCodec()]
    write_array(
        tmp_path,
        sample_values("uint16", (24, 20), seed=12),
        chunks=(12, 10),
        serializer=ShardingCodec(
            chunk_shape=(3, 5),
            codecs=[BytesCodec(), ZstdCodec(level=1)],
            index_codecs=index_codecs,
            index_location="start" if "start" in layout else "end",
        ),
        compressors=None,
        write_grid=(3, 5),
        skip_first=(12, 10),
        missing="partial",
        keep=lambda idx: (idx[0] * 3 + idx[1]) % 5 != 0,
        fill_value=7,
    )
    _, expected = reference(tmp_path)
    assert (expected[:12, :10] == 7).all()  # shard (0, 0) was never written
    with num_threads(threads):
        arr = zarrpipe.Store(str(tmp_path)).open_array("")
        assert tuple(arr.shards) == (12, 10)
        for index in np.ndindex(2, 2):
            sel = chunk_slices(expected.shape, (12, 10), index)
            assert_tensor(arr[sel], expected[sel], f"shard {index}, {threads} threads")


# ---------------------------------------------------------------------------------------------
# Thread counts

THREAD_LAYOUTS = {
    "v3-zstd": dict(chunks=(3, 5, 4)),
    "v3-sharded": dict(chunks=(3, 5, 2), shards=(6, 10, 4)),
    "v2-blosc-F": dict(chunks=(3, 5, 4), zarr_format=2, order="F", compressors=numcodecs.Blosc()),
}


@pytest.mark.parametrize("layout", list(THREAD_LAYOUTS))
def test_thread_counts(tmp_path, layout):
    data = sample_values("float64", (20, 21, 9), seed=10)
    write_array(tmp_path, data, missing="partial", fill_value=np.nan, **THREAD_LAYOUTS[layout])
    _, expected = reference(tmp_path)
    default = zarrpipe.get_num_threads()
    results = {}
    try:
        for n in (1, 4, 2):
            zarrpipe.set_num_threads(n)
            assert zarrpipe.get_num_threads() == n
            arr = zarrpipe.Store(str(tmp_path)).open_array()
            whole = arr[...]
            assert_tensor(whole, expected, f"{n} threads")
            sel = (slice(2, 19), 5, slice(1, None))
            assert_tensor(arr[sel], expected[sel], f"{n} threads {sel}")
            indices = list(np.ndindex(*arr.chunk_grid_shape))
            for index, t in zip(indices, arr.read_chunks(indices), strict=True):
                assert_tensor(t, expected[chunk_slices(expected.shape, arr.chunks, index)])
            results[n] = np.array(whole)
    finally:
        zarrpipe.set_num_threads(default)
    assert zarrpipe.get_num_threads() == default
    assert results[1].tobytes() == results[4].tobytes() == results[2].tobytes()


def test_num_threads_context_restores():
    before = zarrpipe.get_num_threads()
    with num_threads(3):
        assert zarrpipe.get_num_threads() == 3
    assert zarrpipe.get_num_threads() == before
