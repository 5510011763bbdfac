"""The benchmark's datasets: realistic uint16 volumes written by zarr-python, with checksums."""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zarrpipe.bench import checksum

GENERATOR_VERSION = 1
MANIFEST = "manifest.json"
STORE = "bench.zarr"
SIZES = {"quick": (256, 512, 512), "full": (512, 1024, 1024)}
VARIANTS = ("uncompressed", "zstd", "blosc", "zstd-sharded")
NOISE_BLOCK = 16  # planes per noise RNG stream, so the data never depends on the slab size
CONTENT: dict[str, Any] = {
    "background": 100.0,
    "waves": 3,
    "wave_amplitude": 1500.0,
    "wavelength": [150, 600],
    "wave_floor": 800.0,
    "blobs_per_64cube": 0.125,
    "blob_amplitude": 3000.0,
    "blob_sigma": [8, 40],
    "noise_scale": 1.0,
}

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Dataset:
    """One generated array: where it is, its layout, and the checksums of its source data."""

    name: str
    root: str  # the zarr store directory
    path: str  # the array's path inside the store
    shape: Shape
    dtype: str
    chunks: Shape  # stored objects: the chunk shape, or the shard shape when sharded
    inner: Shape | None  # inner chunk shape of a sharded array
    checksums: dict
    stored_bytes: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    @property
    def ratio(self) -> float:
        return self.nbytes / self.stored_bytes if self.stored_bytes else float("nan")

    def grid(self, level: str) -> Shape:
        """Chunk shape of a piece level: 'outer' (chunks or shards) or 'inner' (inner chunks)."""
        if level == "outer":
            return self.chunks
        if self.inner is None:
            raise ValueError(f"{self.name} is not sharded: it has no inner chunks")
        return self.inner


def pieces(shape: Shape, grid: Shape) -> list[tuple[Shape, tuple[slice, ...]]]:
    """Every chunk of a regular grid in C order: (chunk index, the slices it covers)."""
    counts = [math.ceil(s / g) for s, g in zip(shape, grid, strict=True)]
    out = []
    for index in itertools.product(*(range(c) for c in counts)):
        sl = tuple(
            slice(i * g, min((i + 1) * g, s)) for i, g, s in zip(index, grid, shape, strict=True)
        )
        out.append((tuple(index), sl))
    return out


def key(index: Sequence[int]) -> str:
    """The manifest key of a chunk index."""
    return ",".join(str(int(i)) for i in index)


def _codec_params(variant: str) -> dict[str, Any]:
    params: dict[str, dict[str, Any]] = {
        "uncompressed": {"compressors": None},
        "zstd": {"compressors": "zstd(level=3)"},
        "blosc": {"compressors": "blosc(cname=lz4, clevel=5, shuffle=shuffle)"},
        "zstd-sharded": {"compressors": "zstd(level=3)", "sharded": True},
    }
    return params[variant]


def params_for(variant: str, shape: Shape, chunks: Shape, inner: Shape, seed: int) -> dict:
    """Everything that determines a dataset's bytes on disk: a manifest entry matches on this."""
    sharded = variant == "zstd-sharded"
    return {
        "generator_version": GENERATOR_VERSION,
        "variant": variant,
        "shape": list(shape),
        "dtype": "uint16",
        "chunks": list(chunks),
        "inner": list(inner) if sharded else None,
        "seed": seed,
        "content": CONTENT,
        **_codec_params(variant),
    }


def _compressors(variant: str):
    from zarr.codecs import BloscCodec, ZstdCodec

    if variant == "uncompressed":
        return None
    if variant == "blosc":
        return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=2)
    return ZstdCodec(level=3)


class Source:
    """The deterministic volume, microscopy-like: a dark background of ~`background` counts,
    smooth bright structure (rectified low-frequency waves + gaussian blobs) up to a few
    thousand, and shot noise (gaussian, sigma = noise_scale * sqrt(signal): ~10 on the
    background, tens on the structure)."""

    def __init__(self, shape: Shape, seed: int):
        if len(shape) != 3:
            raise ValueError("the benchmark volume is 3-d")
        self.shape, self.seed = tuple(shape), seed
        rng = np.random.default_rng([seed, 0xB10B])
        nz, ny, nx = self.shape
        self.waves = [
            (
                rng.uniform(0.5, 1.0) * CONTENT["wave_amplitude"],
                rng.uniform(CONTENT["wavelength"][0], CONTENT["wavelength"][1], 3),
                rng.uniform(0, 2 * np.pi, 3),
            )
            for _ in range(int(CONTENT["waves"]))
        ]
        n_blobs = int(np.clip(math.prod(self.shape) / 64**3 * CONTENT["blobs_per_64cube"], 4, 400))
        self.blobs = [
            (
                rng.uniform(0.2, 1.0) * CONTENT["blob_amplitude"],
                rng.uniform(0, [nz, ny, nx]),
                rng.uniform(CONTENT["blob_sigma"][0], CONTENT["blob_sigma"][1]),
            )
            for _ in range(n_blobs)
        ]

    def _block(self, b: int) -> np.ndarray:
        """Planes [b*NOISE_BLOCK, ...) of the volume, as float32."""
        nz, ny, nx = self.shape
        z0, z1 = b * NOISE_BLOCK, min((b + 1) * NOISE_BLOCK, nz)
        axes = [
            np.arange(z0, z1, dtype=np.float32),
            np.arange(ny, dtype=np.float32),
            np.arange(nx, dtype=np.float32),
        ]
        field = np.zeros((z1 - z0, ny, nx), dtype=np.float32)
        for amp, wavelength, phase in self.waves:
            s = [
                np.sin(2 * np.pi * a / w + p).astype(np.float32)
                for a, w, p in zip(axes, wavelength, phase, strict=True)
            ]
            field += (amp * s[0])[:, None, None] * s[1][None, :, None] * s[2][None, None, :]
        field -= CONTENT["wave_floor"]
        np.maximum(field, 0, out=field)
        for amp, center, sigma in self.blobs:
            lo = [max(int(c - 3 * sigma), 0) for c in center]
            hi = [min(int(c + 3 * sigma) + 1, n) for c, n in zip(center, (nz, ny, nx), strict=True)]
            lo[0], hi[0] = max(lo[0], z0), min(hi[0], z1)
            if any(h <= low for low, h in zip(lo, hi, strict=True)):
                continue
            g = [
                np.exp(-0.5 * ((np.arange(low, h, dtype=np.float32) - c) / sigma) ** 2)
                for low, h, c in zip(lo, hi, center, strict=True)
            ]
            field[lo[0] - z0 : hi[0] - z0, lo[1] : hi[1], lo[2] : hi[2]] += (
                (amp * g[0])[:, None, None] * g[1][None, :, None] * g[2][None, None, :]
            )
        field += CONTENT["background"]
        rng = np.random.default_rng([self.seed, 1, b])
        noise = rng.standard_normal(field.shape, dtype=np.float32)
        noise *= np.sqrt(field) * np.float32(CONTENT["noise_scale"])
        field += noise
        return field

    def slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes [z0, z1) as uint16, generated NOISE_BLOCK planes at a time."""
        out = np.empty((z1 - z0, *self.shape[1:]), dtype=np.uint16)
        for b in range(z0 // NOISE_BLOCK, (z1 - 1) // NOISE_BLOCK + 1):
            block = self._block(b)
            lo, hi = max(z0, b * NOISE_BLOCK), min(z1, (b + 1) * NOISE_BLOCK)
            part = block[lo - b * NOISE_BLOCK : hi - b * NOISE_BLOCK]
            np.rint(np.clip(part, 0, 65535), out=part)
            out[lo - z0 : hi - z0] = part
        return out

    def slabs(self, thickness: int) -> Iterator[tuple[int, np.ndarray]]:
        for z0 in range(0, self.shape[0], thickness):
            yield z0, self.slab(z0, min(z0 + thickness, self.shape[0]))


def stored_bytes(array_dir: Path) -> int:
    """Bytes of the chunk/shard files of one array (metadata excluded)."""
    total = 0
    for dirpath, _, files in os.walk(array_dir):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files if f != "zarr.json")
    return total


def load_manifest(data_dir: str | os.PathLike) -> dict:
    path = Path(data_dir) / MANIFEST
    if not path.exists():
        return {"store": STORE, "datasets": {}}
    return json.loads(path.read_text())


def _dataset(data_dir: Path, name: str, entry: dict) -> Dataset:
    p = entry["params"]
    return Dataset(
        name=name,
        root=str(data_dir / STORE),
        path=name,
        shape=tuple(p["shape"]),
        dtype=p["dtype"],
        chunks=tuple(p["chunks"]),
        inner=tuple(p["inner"]) if p["inner"] else None,
        checksums=entry["checksums"],
        stored_bytes=entry["stored_bytes"],
    )


def open_dataset(data_dir: str | os.PathLike, name: str) -> Dataset:
    """A dataset already listed in the directory's manifest."""
    return _dataset(Path(data_dir), name, load_manifest(data_dir)["datasets"][name])


def generate(
    data_dir: str | os.PathLike,
    shape: Shape = SIZES["quick"],
    chunks: Shape = (256, 256, 256),
    inner: Shape = (64, 64, 64),
    variants: Sequence[str] = VARIANTS,
    seed: int = 0,
    log: Callable[[str], None] = lambda _msg: None,
) -> list[Dataset]:
    """Writes (or reuses, when the manifest and files match) the datasets; returns them."""
    try:
        import zarr
    except ImportError:
        raise ValueError(
            "the benchmark datasets are written by zarr-python: "
            "pip install 'zarrpipe[bench]' (or zarr>=3)"
        ) from None

    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown dataset variants {sorted(unknown)}; known: {VARIANTS}")
    if any(c % i for c, i in zip(chunks, inner, strict=True)):
        raise ValueError(f"inner chunks {inner} must divide the shard shape {chunks}")
    manifest = load_manifest(data_dir)
    store_dir = data_dir / STORE
    todo = []
    for v in variants:
        entry = manifest["datasets"].get(v)
        params = params_for(v, shape, chunks, inner, seed)
        if (
            entry is None
            or entry["params"] != params
            or not (store_dir / v / "zarr.json").exists()
            or stored_bytes(store_dir / v) != entry["stored_bytes"]
        ):
            todo.append(v)
        else:
            log(f"reusing {v} in {store_dir} (manifest parameters and file sizes match)")
    if todo:
        log(f"writing {', '.join(todo)} {shape} uint16 to {store_dir} ...")
        group = zarr.open_group(str(store_dir), mode="a")
        arrays = {
            v: group.create_array(
                v,
                shape=shape,
                dtype="uint16",
                fill_value=0,
                overwrite=True,
                chunks=inner if v == "zstd-sharded" else chunks,
                shards=chunks if v == "zstd-sharded" else None,
                compressors=_compressors(v),
            )
            for v in todo
        }
        grids = {"outer": chunks, "inner": inner}
        sums: dict[str, dict[str, str]] = {"outer": {}, "inner": {}}
        whole = checksum.new_hasher(np.dtype("uint16"), shape)
        for z0, slab in Source(shape, seed).slabs(chunks[0]):
            checksum.update(whole, slab)
            for level, grid in grids.items():
                for index, sl in pieces(slab.shape, grid):
                    at = (index[0] + z0 // grid[0], *index[1:])
                    sums[level][key(at)] = checksum.digest(slab[sl])
            for arr in arrays.values():
                arr[z0 : z0 + slab.shape[0]] = slab
        for v in todo:
            levels = ("outer", "inner") if v == "zstd-sharded" else ("outer",)
            manifest["datasets"][v] = {
                "params": params_for(v, shape, chunks, inner, seed),
                "stored_bytes": stored_bytes(store_dir / v),
                "checksums": {
                    "algorithm": checksum.ALGORITHM,
                    "whole": whole.hexdigest(),
                    **{lvl: sums[lvl] for lvl in levels},
                },
            }
        manifest["store"] = STORE
        tmp = data_dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1))
        tmp.replace(data_dir / MANIFEST)
    out = [_dataset(data_dir, v, manifest["datasets"][v]) for v in variants]
    for d in out:
        log(
            f"  {d.name:13s} {d.nbytes / 2**20:8.1f} MiB decoded, "
            f"{d.stored_bytes / 2**20:8.1f} MiB stored, ratio {d.ratio:.2f}x"
        )
    return out
