"""Every numcodecs / zarr-python codec zarrpipe reads: zarr-python writes it (v2 numcodecs ids,
v3 core and ``numcodecs.*`` names, sharded and not, a few dtypes, missing chunks and shards and
an odd fill value) and ``Store.read`` and ``Array.read_chunks`` return exactly zarr-python's
values and dtype, through the decoder ``Array.fallback_reason`` names (zarrpipe's own, or
zarrs' with zarrpipe's plugins for the codec it names: a codec that loses its decoder
fails). Codecs zarr-python >= 3.2 added (``scale_offset``, ``cast_value``) run only where that
zarr-python is installed (Python >= 3.12). Then the numcodecs codecs zarrpipe also
writes (checksums, lzma, astype, quantize): ``Store.create_array`` with their numcodecs configs
stores what zarr-python reads (and the chunk bytes numcodecs stores), and a flipped bit under a
numcodecs checksum raises ``ChecksumError``."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from zarr.codecs import BloscCodec
from zarr.codecs import numcodecs as znc

SHAPE = (9, 6)
CHUNKS = (2, 3)
SHARDS = (4, 6)

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
BYTES_DTYPES = ["bool", "int16", "uint32", "float64", "complex64"]


@dataclass
class Case:
    id: str
    dtypes: list[str]
    # Keyword arguments of zarr.create_array for one dtype; None: not for this format.
    v2: Callable[[np.dtype], dict] | None
    v3: Callable[[np.dtype], dict] | None
    needs: tuple[str, ...] = ()
    fill: Callable[[np.dtype], object] | None = None


def _case_list() -> list[Case]:
    cases = [
        Case(
            "bz2",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.BZ2(level=3)},
            lambda dt: {"compressors": [znc.BZ2()]},
        ),
        Case(
            "lz4",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.LZ4()},
            lambda dt: {"compressors": [znc.LZ4(acceleration=2)]},
        ),
        Case(
            "zlib",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.Zlib(level=2)},
            lambda dt: {"compressors": [znc.Zlib()]},
        ),
        Case(
            "numcodecs-zstd",
            ["int16", "float64"],
            lambda dt: {"compressors": numcodecs.Zstd()},
            lambda dt: {"compressors": [znc.Zstd()]},
        ),
        Case(
            "numcodecs-gzip",
            ["int16", "float64"],
            lambda dt: {"compressors": numcodecs.GZip()},
            lambda dt: {"compressors": [znc.GZip()]},
        ),
        Case(
            "shuffle",
            BYTES_DTYPES,
            lambda dt: {
                "filters": [numcodecs.Shuffle(elementsize=dt.itemsize)],
                "compressors": numcodecs.Zlib(),
            },
            lambda dt: {"compressors": [znc.Shuffle(), znc.Zlib(level=1)]},
        ),
        Case(
            "adler32",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.Adler32()},
            lambda dt: {"compressors": [znc.Zlib(level=1), znc.Adler32()]},
        ),
        Case(
            "fletcher32",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.Fletcher32()},
            lambda dt: {"compressors": [znc.Fletcher32()]},
        ),
        Case(
            "crc32",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.CRC32()},
            lambda dt: {"compressors": [znc.Zlib(level=1), znc.CRC32()]},
        ),
        Case(
            "crc32-end",
            ["int16", "float64"],
            lambda dt: {"compressors": numcodecs.CRC32(location="end")},
            lambda dt: {"compressors": [znc.CRC32(location="end")]},
        ),
        Case(
            # numcodecs' crc32c (v2 id `crc32c`, v3 `numcodecs.crc32c`), not the core codec
            "numcodecs.crc32c",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.CRC32C()},
            lambda dt: {"compressors": [znc.CRC32C()]},
        ),
        Case(
            "numcodecs.crc32c-start",
            ["int16"],
            lambda dt: {"compressors": numcodecs.CRC32C(location="start")},
            lambda dt: {"compressors": [znc.CRC32C(location="start")]},
        ),
        Case(
            "jenkins_lookup3",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.JenkinsLookup3()},
            lambda dt: {"compressors": [znc.JenkinsLookup3(initval=12345)]},
        ),
        Case(
            "lzma",
            BYTES_DTYPES,
            lambda dt: {"compressors": numcodecs.LZMA(preset=1)},
            lambda dt: {"compressors": [znc.LZMA()]},
        ),
        Case(
            "lzma-alone",
            ["int16", "float64"],
            lambda dt: {"compressors": numcodecs.LZMA(format=2, check=-1)},
            lambda dt: {"compressors": [znc.LZMA(format=2, preset=9)]},
        ),
        Case(
            "astype",
            ["int32", "uint64", "float64"],
            lambda dt: {
                "filters": [numcodecs.AsType(encode_dtype=_narrow(dt), decode_dtype=dt.str)],
                "compressors": None,
            },
            lambda dt: {"filters": [znc.AsType(encode_dtype=_narrow(dt), decode_dtype=dt.str)]},
        ),
        Case(
            "quantize",
            ["float32", "float64"],
            lambda dt: {
                "filters": [numcodecs.Quantize(digits=2, dtype=dt.str)],
                "compressors": numcodecs.Zlib(),
            },
            lambda dt: {"filters": [znc.Quantize(digits=2, dtype=dt.str)]},
        ),
        Case(
            # v2 only: zarr-python's v3 codec keeps the array's type for the stored one
            "quantize-astype",
            ["float64"],
            lambda dt: {
                "filters": [numcodecs.Quantize(digits=1, dtype=dt.str, astype="<f4")],
                "compressors": None,
            },
            None,
        ),
        Case(
            "delta",
            ["int8", "int32", "uint16", "float32", "float64"],
            lambda dt: {
                "filters": [numcodecs.Delta(dtype=dt.str)],
                "compressors": numcodecs.Zlib(),
            },
            lambda dt: {"filters": [znc.Delta(dtype=dt.str)]},
        ),
        Case(
            "delta-astype",
            ["int32", "uint64", "float64"],
            lambda dt: {
                "filters": [numcodecs.Delta(dtype=dt.str, astype=_narrow(dt))],
                "compressors": None,
            },
            lambda dt: {"filters": [znc.Delta(dtype=dt.str, astype=_narrow(dt))]},
        ),
        Case(
            "bitround",
            ["float16", "float32", "float64"],
            lambda dt: {
                "filters": [numcodecs.BitRound(keepbits=5)],
                "compressors": numcodecs.Zlib(),
            },
            lambda dt: {"filters": [znc.BitRound(keepbits=5)]},
        ),
        Case(
            "fixedscaleoffset",
            ["float32", "float64", "int32"],
            lambda dt: {"filters": [_fso(dt)], "compressors": None},
            lambda dt: {"filters": [znc.FixedScaleOffset(**_fso_config(dt))]},
        ),
        Case(
            "packbits",
            ["bool"],
            lambda dt: {"filters": [numcodecs.PackBits()], "compressors": numcodecs.Zlib()},
            lambda dt: {"filters": [znc.PackBits()]},
        ),
        Case(
            "pcodec",
            ["int16", "uint32", "int64", "float32", "float64"],
            lambda dt: {"compressors": numcodecs.PCodec(level=4)},
            lambda dt: {"serializer": znc.PCodec()},
            needs=("pcodec",),
        ),
        Case(
            "zfpy",
            ["float32", "float64", "int32", "int64"],
            lambda dt: {"compressors": numcodecs.ZFPY()},
            lambda dt: {"serializer": znc.ZFPY()},
            needs=("zfpy",),
        ),
        Case(
            "zfpy-lossy",
            ["float32", "float64"],
            lambda dt: {"compressors": numcodecs.ZFPY(mode=4, tolerance=0.01)},
            lambda dt: {"serializer": znc.ZFPY(mode=4, tolerance=0.01)},
            needs=("zfpy",),
        ),
        Case(
            "zfpy-rate",
            ["float32", "float64"],
            lambda dt: {"compressors": numcodecs.ZFPY(mode=2, rate=12)},
            lambda dt: {"serializer": znc.ZFPY(mode=2, rate=12)},
            needs=("zfpy",),
        ),
    ]
    for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd"]:
        for shuffle, mode in [("noshuffle", 0), ("shuffle", 1), ("bitshuffle", 2)]:
            cases.append(
                Case(
                    f"blosc-{cname}-{shuffle}",
                    ["int16", "float64"],
                    lambda dt, c=cname, m=mode: {
                        "compressors": numcodecs.Blosc(cname=c, shuffle=m)
                    },
                    lambda dt, c=cname, s=shuffle: {
                        "compressors": [BloscCodec(cname=c, shuffle=s)]
                    },
                )
            )
            cases.append(
                Case(
                    f"numcodecs.blosc-{cname}-{shuffle}",
                    ["int16", "float64"],
                    None,
                    lambda dt, c=cname, m=mode: {"compressors": [znc.Blosc(cname=c, shuffle=m)]},
                )
            )
    cases += [
        Case(
            "scale_offset",
            ["int16", "uint8", "int64", "float32", "float64"],
            None,
            lambda dt: {"filters": [_scale_offset(dt)]},
            needs=("zarr.codecs.scale_offset",),
        ),
        Case(
            "cast_value",
            ["float32", "float64"],
            None,
            lambda dt: {"filters": [_scale_offset(dt), _cast_value("uint8", out_of_range="clamp")]},
            needs=("zarr.codecs.cast_value", "cast_value_rs"),
        ),
        Case(
            "cast_value-int",
            ["int32", "int64", "uint16"],
            None,
            lambda dt: {"filters": [_cast_value("int16")]},
            needs=("zarr.codecs.cast_value", "cast_value_rs"),
        ),
        Case(
            "cast_value-float",
            ["float64"],
            None,
            lambda dt: {"filters": [_cast_value("float32", rounding="towards-zero")]},
            needs=("zarr.codecs.cast_value", "cast_value_rs"),
        ),
    ]
    return cases


def _narrow(dt: np.dtype) -> str:
    return {"i": "<i2", "u": "<u2", "f": "<f4"}[dt.kind]


def _fso(dt: np.dtype) -> numcodecs.FixedScaleOffset:
    if dt.kind == "f":
        return numcodecs.FixedScaleOffset(offset=-20, scale=4.5, dtype=dt.str, astype="|u1")
    return numcodecs.FixedScaleOffset(offset=-60, scale=1, dtype=dt.str, astype="|u1")


def _fso_config(dt: np.dtype) -> dict:
    config = _fso(dt).get_config()
    del config["id"]
    return config


def _scale_offset(dt: np.dtype):
    from zarr.codecs.scale_offset import ScaleOffset

    if dt.kind == "u":
        return ScaleOffset(offset=0, scale=2)
    if dt.kind == "i":
        return ScaleOffset(offset=3, scale=2)
    return ScaleOffset(offset=-20, scale=4.5)


def _cast_value(target: str, **kwargs):
    from zarr.codecs.cast_value import CastValue

    return CastValue(data_type=target, **kwargs)


CASES = _case_list()


def reads_through(case: Case) -> str | None:
    """The decoder a case reads through: None for zarrpipe's own (zlib, zstd, gzip and blosc,
    streamed into place), else the codec `Array.fallback_reason` names for sending it to
    zarrs' decoder with zarrpipe's plugins: the case's first codec that zarrpipe's own
    decoder does not take (so a codec that loses its decoder, or gains one, fails here)."""
    if case.id in ("zlib", "numcodecs-zstd", "numcodecs-gzip") or case.id.startswith(
        ("blosc-", "numcodecs.blosc-")
    ):
        return None
    if case.id == "cast_value":  # behind a scale_offset, which is named first
        return "scale_offset"
    return case.id.split("-")[0].removeprefix("numcodecs.")


FORMATS = ["v2", "v3", "v3-sharded"]


def _params():
    for case in CASES:
        for fmt in FORMATS:
            if (case.v2 if fmt == "v2" else case.v3) is None:
                continue
            for dtype in case.dtypes:
                yield pytest.param(case, fmt, dtype, id=f"{case.id}-{fmt}-{dtype}")


def sample(dtype: np.dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.random(SHAPE) < 0.4
    if dtype.kind == "i":
        return rng.integers(-50, 51, SHAPE).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 101, SHAPE).astype(dtype)
    values = np.clip(rng.standard_normal(SHAPE) * 6, -19.9, 19.9)
    if dtype.kind == "c":
        return (values + 1j * values[::-1]).astype(dtype)
    return values.astype(dtype)


def odd_fill(dtype: np.dtype):
    return {"b": True, "i": -7, "u": 7, "f": -2.5, "c": complex(-2.5, 1.0)}[dtype.kind]


def write(root, case: Case, fmt: str, dtype: np.dtype):
    """zarr-python writes the array; returns what zarr-python reads back."""
    fill = case.fill(dtype) if case.fill else odd_fill(dtype)
    with warnings.catch_warnings():
        # zarr-python warns that numcodecs codecs are not in the v3 spec.
        warnings.simplefilter("ignore")
        kwargs = (case.v2 if fmt == "v2" else case.v3)(dtype)
        a = zarr.create_array(
            str(root),
            shape=SHAPE,
            chunks=CHUNKS,
            shards=SHARDS if fmt == "v3-sharded" else None,
            dtype=dtype,
            fill_value=fill,
            zarr_format=2 if fmt == "v2" else 3,
            **kwargs,
        )
        data = sample(dtype)
        # Rows 8.. never written (a missing chunk row, and a missing shard); [4:6, 3:6] is
        # never written either (a missing chunk, or a missing inner chunk of a present shard).
        # (Contiguous copies: zarr-python's numcodecs pcodec and zfpy refuse strided input.)
        a[0:4, :] = data[0:4, :]
        a[4:6, 0:3] = np.ascontiguousarray(data[4:6, 0:3])
        a[6:8, :] = data[6:8, :]
        return zarr.open_array(str(root), mode="r")[...]


@pytest.mark.parametrize("case,fmt,dtype", list(_params()))
def test_read_equals_zarr_python(tmp_path, case, fmt, dtype):
    for module in case.needs:
        pytest.importorskip(
            module, reason=f"{case.id} needs {module} (zarr-python >= 3.2 for its own)"
        )
    dtype = np.dtype(dtype)
    expected = write(tmp_path / "a", case, fmt, dtype)
    assert expected.dtype == dtype

    store = zarrpipe.Store(str(tmp_path))
    got = store.read("a").to_numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected, strict=True)

    arr = store.open_array("a")
    through = reads_through(case)
    if through is None:
        assert arr.fallback_reason is None
    else:
        assert re.fullmatch(
            rf'codec "(numcodecs\.)?{through}"( in this position)?', str(arr.fallback_reason)
        ), arr.fallback_reason
    grid = [math.ceil(s / c) for s, c in zip(SHAPE, arr.chunks, strict=True)]
    indices = [(i, j) for i in range(grid[0]) for j in range(grid[1])]
    for (i, j), tensor in zip(indices, arr.read_chunks(indices), strict=True):
        want = expected[i * CHUNKS[0] : (i + 1) * CHUNKS[0], j * CHUNKS[1] : (j + 1) * CHUNKS[1]]
        chunk = tensor.to_numpy()
        assert chunk.dtype == want.dtype
        np.testing.assert_array_equal(chunk, want, strict=True)


def test_blosc_typesize_larger_than_chunk(tmp_path):
    """A one-element int16 chunk with typesize 4: a valid frame whose block is smaller than its
    typesize (zarr-python reads it; it used to be a DecodeError)."""
    data = np.array([-3, 7, 1000], dtype="int16")
    for shuffle in ["noshuffle", "shuffle", "bitshuffle"]:
        root = tmp_path / shuffle
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = zarr.create_array(
                str(root),
                shape=(3,),
                chunks=(1,),
                dtype="int16",
                compressors=[BloscCodec(cname="lz4", typesize=4, shuffle=shuffle)],
            )
            a[...] = data
        store = zarrpipe.Store(str(root))
        np.testing.assert_array_equal(store.read("").to_numpy(), data, strict=True)
        assert [t.to_numpy()[0] for t in store.open_array("").read_chunks([(0,), (1,), (2,)])] == [
            -3,
            7,
            1000,
        ]


def test_matrix_covers_every_codec_of_the_issue():
    ids = {c.id.split("-")[0] for c in CASES}
    for codec in [
        "bz2", "lz4", "delta", "bitround", "fixedscaleoffset", "shuffle", "packbits", "adler32",
        "fletcher32", "pcodec", "zfpy", "zlib", "blosc", "numcodecs.blosc", "scale_offset",
        "cast_value", "crc32", "numcodecs.crc32c", "jenkins_lookup3", "lzma", "astype",
        "quantize",
    ]:  # fmt: skip
        assert codec in ids


# Codecs zarrpipe writes from numcodecs configs (Store.create_array): (id, dtype, filters,
# compressors). Unsharded chunks must be exactly what numcodecs stores, but for lzma (liblzma's
# encoder may change between versions); shards may order their inner chunks otherwise.
WRITES = [
    ("crc32", "int16", None, [{"id": "crc32"}]),
    ("crc32-end", "float64", None, [{"id": "crc32", "location": "end"}]),
    ("numcodecs.crc32c", "uint32", None, [{"id": "crc32c"}]),
    ("jenkins_lookup3", "float32", None, [{"id": "jenkins_lookup3", "initval": 7, "prefix": None}]),
    ("lzma", "int32", None, [{"id": "lzma", "preset": 1}]),
    ("lzma-alone", "float64", None,
     [{"id": "lzma", "format": 2, "check": -1, "preset": None, "filters": None}]),
    ("astype", "float64", [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}], None),
    ("astype-int", "int64", [{"id": "astype", "encode_dtype": "|i1", "decode_dtype": "<i8"}],
     [{"id": "crc32"}]),
    ("quantize", "float32", [{"id": "quantize", "digits": 2, "dtype": "<f4", "astype": "<f4"}],
     [{"id": "jenkins_lookup3"}]),
    ("quantize-astype", "float64",
     [{"id": "quantize", "digits": 1, "dtype": "<f8", "astype": "<f4"}], None),
]  # fmt: skip
# zarr-python's v3 quantize stores the array's own type, whatever `astype` says.
V2_ONLY = {"quantize-astype"}


def _zarr_python_codecs(configs: list[dict] | None, fmt: str, compressor: bool = False):
    if fmt == "v2":
        codecs = [numcodecs.get_codec(dict(c)) for c in configs or []]
        # a v2 array has one compressor or none
        return (codecs[0] if codecs else None) if compressor else codecs
    if not configs:
        return []
    return [
        {"name": f"numcodecs.{c['id']}", "configuration": {k: v for k, v in c.items() if k != "id"}}
        for c in configs
    ]


def _numcodecs_round_trip(data: np.ndarray, filters: list[dict] | None) -> np.ndarray:
    """What numcodecs' filters make of `data` (they are element-wise)."""
    codecs = [numcodecs.get_codec(dict(c)) for c in filters or []]
    chunk = data
    for c in codecs:
        chunk = c.encode(chunk)
    for c in reversed(codecs):
        chunk = c.decode(chunk)
    return np.asarray(chunk).view(data.dtype).reshape(data.shape)


def _chunk_files(root) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in (".zarray", ".zattrs", "zarr.json")
    }


@pytest.mark.parametrize(
    "name,dtype,filters,compressors,fmt",
    [
        pytest.param(*w, fmt, id=f"{w[0]}-{fmt}")
        for w in WRITES
        for fmt in FORMATS
        if fmt == "v2" or w[0] not in V2_ONLY
    ],
)
def test_write_read_by_zarr_python(tmp_path, name, dtype, filters, compressors, fmt):
    """zarrpipe writes the numcodecs codecs it reads (configs as numcodecs gives them):
    zarr-python reads numcodecs' own round trip of the data, and stores the same chunk bytes
    when it writes the same array."""
    dtype = np.dtype(dtype)
    data = sample(dtype, seed=3)
    want = _numcodecs_round_trip(data, filters)
    common = dict(
        shape=SHAPE,
        chunks=CHUNKS,
        shards=SHARDS if fmt == "v3-sharded" else None,
        dtype=dtype,
        fill_value=odd_fill(dtype),
        zarr_format=2 if fmt == "v2" else 3,
    )
    store = zarrpipe.Store(str(tmp_path))
    arr = store.create_array("ours", filters=filters, compressors=compressors, **common)
    arr[...] = data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs codecs are not in the v3 spec
        got = zarr.open_array(str(tmp_path / "ours"), mode="r")[...]
        theirs = zarr.create_array(
            str(tmp_path / "theirs"),
            filters=_zarr_python_codecs(filters, fmt),
            compressors=_zarr_python_codecs(compressors, fmt, compressor=True),
            **common,
        )
        theirs[...] = data
    np.testing.assert_array_equal(got, want, strict=True)
    np.testing.assert_array_equal(store.read("ours").to_numpy(), want, strict=True)
    np.testing.assert_array_equal(store.read("theirs").to_numpy(), want, strict=True)
    ours_files, their_files = _chunk_files(tmp_path / "ours"), _chunk_files(tmp_path / "theirs")
    assert ours_files.keys() == their_files.keys()
    if not name.startswith("lzma") and fmt != "v3-sharded":
        different = [k for k in ours_files if ours_files[k] != their_files[k]]
        assert not different, f"chunks numcodecs stores otherwise: {different}"


CHECKSUMS = [
    ("crc32", {"id": "crc32"}),
    ("crc32-end", {"id": "crc32", "location": "end"}),
    ("numcodecs.crc32c", {"id": "crc32c"}),
    ("jenkins_lookup3", {"id": "jenkins_lookup3", "initval": 3, "prefix": None}),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name,config", CHECKSUMS, ids=[c[0] for c in CHECKSUMS])
def test_corrupt_checksum_raises_checksum_error(tmp_path, name, config, fmt):
    """One bit flipped in a chunk (or in the first inner chunk of a shard) zarr-python wrote
    with a numcodecs checksum: every read of it, whole or one element, raises ChecksumError
    naming the key; the other chunks still read."""
    data = sample(np.dtype("int16"), seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(
            str(tmp_path / "a"),
            shape=SHAPE,
            chunks=CHUNKS,
            shards=SHARDS if fmt == "v3-sharded" else None,
            dtype="int16",
            compressors=_zarr_python_codecs([config], fmt, compressor=True),
            zarr_format=2 if fmt == "v2" else 3,
        )
        z[...] = data
    key = z.metadata.encode_chunk_key((0, 0))
    path = tmp_path / "a" / key
    raw = bytearray(path.read_bytes())
    raw[5] ^= 0x10  # in the data of the first (inner) chunk, whatever the checksum's place
    path.write_bytes(bytes(raw))

    store = zarrpipe.Store(str(tmp_path))
    with pytest.raises(zarrpipe.ChecksumError, match=key):
        store.read("a")
    arr = store.open_array("a")
    with pytest.raises(zarrpipe.ChecksumError, match=key):
        arr[0, 0]
    np.testing.assert_array_equal(arr[6:8, 3:6], data[6:8, 3:6], strict=True)
