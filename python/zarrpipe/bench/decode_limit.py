"""The decode limit of a dataset: how fast the reference library decodes its stored chunks in
one thread, times the cores. A reader's MB/s is judged against it (no reader decodes faster
than its codec's library on all cores)."""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from zarrpipe.bench import checksum
from zarrpipe.bench.datasets import Dataset, key, pieces

METHOD = (
    "each stored chunk (each inner chunk of a shard) decoded by the reference library "
    "(numcodecs Zstd / Blosc, blosc held to 1 thread) in one thread, into one reused output "
    "buffer, files read and shard indexes parsed outside the clock; decoded MB / summed decode "
    "seconds, median of the timed passes after one untimed pass (which also checks every "
    "decoded chunk against the source checksums), times the CPU count"
)
EMPTY = 2**64 - 1  # a shard index entry of a missing inner chunk


def _decoder(codecs: list[dict]):
    """(codec description, numcodecs codec) for the one compressor in a codec chain."""
    import numcodecs
    import numcodecs.blosc

    for c in codecs:
        name = c["name"]
        if name == "zstd":
            return "zstd (numcodecs Zstd)", numcodecs.Zstd()
        if name == "blosc":
            numcodecs.blosc.use_threads = False
            numcodecs.blosc.set_nthreads(1)
            return "blosc (numcodecs Blosc, 1 thread)", numcodecs.Blosc()
        if name not in ("bytes", "crc32c", "transpose"):
            raise ValueError(f"no reference decoder for codec {name!r}")
    raise ValueError("no compressor: nothing to decode")


def _chunk_file(array_dir: Path, meta: dict, index: tuple[int, ...]) -> Path:
    enc = meta["chunk_key_encoding"]
    sep = enc.get("configuration", {}).get("separator", "/" if enc["name"] == "default" else ".")
    parts = [str(i) for i in index]
    return array_dir / (("c" + sep if enc["name"] == "default" else "") + sep.join(parts))


def _encoded(dataset: Dataset, meta: dict) -> Iterator[tuple[tuple[int, ...], memoryview]]:
    """(chunk index at the decoded level, its encoded bytes) for every stored chunk; inner
    chunks (indexed in the inner grid) when the array is sharded."""
    array_dir = Path(dataset.root, dataset.path)
    shard = meta["codecs"][0] if meta["codecs"][0]["name"] == "sharding_indexed" else None
    for outer, _ in pieces(dataset.shape, dataset.chunks):
        path = _chunk_file(array_dir, meta, outer)
        if not path.exists():
            continue
        data = memoryview(path.read_bytes())
        if shard is None:
            yield outer, data
            continue
        conf = shard["configuration"]
        per = [c // i for c, i in zip(dataset.chunks, conf["chunk_shape"], strict=True)]
        n = math.prod(per)
        crc = 4 if any(c["name"] == "crc32c" for c in conf["index_codecs"]) else 0
        size = 16 * n + crc
        at = len(data) - size if conf.get("index_location", "end") == "end" else 0
        index = np.frombuffer(data[at : at + 16 * n], dtype="<u8").reshape(n, 2)
        for k, (offset, nbytes) in enumerate(index.tolist()):
            if offset == EMPTY and nbytes == EMPTY:
                continue
            inner = np.unravel_index(k, per)
            yield (
                tuple(int(o * p + i) for o, p, i in zip(outer, per, inner, strict=True)),
                data[offset : offset + nbytes],
            )


def _meta(dataset: Dataset) -> tuple[dict, list[dict], tuple[int, ...], str]:
    """(zarr.json, the codec chain of one decoded chunk, the decoded chunk shape, its level)."""
    meta = json.loads(Path(dataset.root, dataset.path, "zarr.json").read_text())
    codecs = meta["codecs"]
    if codecs[0]["name"] == "sharding_indexed":
        conf = codecs[0]["configuration"]
        return meta, conf["codecs"], tuple(conf["chunk_shape"]), "inner"
    return meta, codecs, tuple(dataset.chunks), "outer"


def compressor(dataset: Dataset) -> str | None:
    """The name of the dataset's compressor (inside the shard when sharded), None if none."""
    _, codecs, _, _ = _meta(dataset)
    return next(
        (c["name"] for c in codecs if c["name"] not in ("bytes", "crc32c", "transpose")), None
    )


def measure(dataset: Dataset, repeats: int = 3) -> dict:
    """Single-thread decode MB/s of the dataset's codec on its stored chunks (see METHOD)."""
    meta, codecs, shape, level = _meta(dataset)
    name, codec = _decoder(codecs)
    itemsize = np.dtype(dataset.dtype).itemsize
    out = bytearray(math.prod(shape) * itemsize)
    view = np.frombuffer(out, dtype=np.dtype(dataset.dtype).newbyteorder("<")).reshape(shape)
    sums = dataset.checksums[level]
    grid = dataset.grid(level)
    trims = dict(pieces(dataset.shape, grid))
    passes, chunks, decoded = [], 0, 0
    for p in range(1 + repeats):
        seconds, chunks, decoded = 0.0, 0, 0
        for index, src in _encoded(dataset, meta):
            t0 = time.perf_counter()
            codec.decode(src, out=out)
            seconds += time.perf_counter() - t0
            chunks += 1
            decoded += len(out)
            if p == 0:
                sl = tuple(slice(0, s.stop - s.start) for s in trims[index])
                if checksum.digest(view[sl]) != sums[key(index)]:
                    raise ValueError(f"{dataset.name}: decoded chunk {index} differs from source")
        if p > 0:
            passes.append(seconds)
    if not chunks:
        raise ValueError(f"{dataset.name}: no stored chunks to decode")
    single = [decoded / 1e6 / s for s in passes]
    cores = os.cpu_count() or 1
    median = statistics.median(single)
    return {
        "codec": name,
        "level": level,
        "chunk_shape": list(shape),
        "chunks": chunks,
        "decoded_bytes": decoded,
        "seconds": passes,
        "single_thread_mb_s": median,
        "single_thread_mb_s_best": max(single),
        "cores": cores,
        "limit_mb_s": median * cores,
        "method": METHOD,
    }


BATCHED_METHOD = (
    "zstd only: every stored chunk (inner chunk of a shard) decoded by one call of "
    "python-zstandard's multi_decompress_to_buffer in one thread, so no Python call is paid "
    "per chunk (with chunks of a few KiB, numcodecs' per-call cost was as long as the "
    "decoding); files read and shard indexes parsed outside the clock; the median of the "
    "timed calls after one untimed call (whose chunks are checked against the source "
    "checksums), times the CPU count"
)


def measure_batched(dataset: Dataset, repeats: int = 5) -> dict:
    """The decode limit of a zstd dataset of small chunks (see BATCHED_METHOD); other codecs,
    or without python-zstandard (the `bench` extra has it), as `measure` does."""
    try:
        import zstandard
    except ImportError:
        return measure(dataset, repeats)

    meta, _, shape, level = _meta(dataset)
    if compressor(dataset) != "zstd":
        return measure(dataset, repeats)
    itemsize = np.dtype(dataset.dtype).itemsize
    chunk_bytes = math.prod(shape) * itemsize
    encoded = list(_encoded(dataset, meta))
    if not encoded:
        raise ValueError(f"{dataset.name}: no stored chunks to decode")
    frames: Any = [bytes(src) for _, src in encoded]
    sizes = np.full(len(frames), chunk_bytes, dtype=np.uint64).tobytes()
    dctx = zstandard.ZstdDecompressor()
    decoded: Any = dctx.multi_decompress_to_buffer(frames, decompressed_sizes=sizes, threads=1)
    sums, trims = dataset.checksums[level], dict(pieces(dataset.shape, dataset.grid(level)))
    dtype = np.dtype(dataset.dtype).newbyteorder("<")
    for (index, _), segment in zip(encoded, decoded, strict=True):
        view = np.frombuffer(segment, dtype=dtype).reshape(shape)
        sl = tuple(slice(0, s.stop - s.start) for s in trims[index])
        if checksum.digest(view[sl]) != sums[key(index)]:
            raise ValueError(f"{dataset.name}: decoded chunk {index} differs from source")
    del decoded
    passes = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dctx.multi_decompress_to_buffer(frames, decompressed_sizes=sizes, threads=1)
        passes.append(time.perf_counter() - t0)
    total = chunk_bytes * len(frames)
    single = [total / 1e6 / s for s in passes]
    cores = os.cpu_count() or 1
    median = statistics.median(single)
    return {
        "codec": "zstd (python-zstandard, one batched call)",
        "level": level,
        "chunk_shape": list(shape),
        "chunks": len(frames),
        "decoded_bytes": total,
        "seconds": passes,
        "single_thread_mb_s": median,
        "single_thread_mb_s_best": max(single),
        "cores": cores,
        "limit_mb_s": median * cores,
        "method": BATCHED_METHOD,
    }
