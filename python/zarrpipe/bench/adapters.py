"""One adapter per Zarr implementation, behind a name registry the runner and workers share."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import cast

import numpy as np

from zarrpipe.bench.datasets import Dataset

Index = tuple[int, ...]
Slices = tuple[slice, ...]


class Adapter:
    """How one implementation reads a dataset. Methods return NumPy arrays (or objects that
    `np.asarray` views without decoding): the worker stops the clock when they return."""

    name = "base"
    description = ""

    def __init__(self, threads: int):
        self.threads = threads  # decode threads the implementation may use

    @classmethod
    def available(cls) -> str | None:
        """None if the implementation can run here, else why not (the row is skipped)."""
        return None

    @classmethod
    def version(cls) -> str:
        return ""

    @classmethod
    def batch_api(cls, level: str, sharded: bool) -> str | None:
        """The batch call used for the '-batch' workloads at this level, None if there is none."""
        return None

    @classmethod
    def no_batch_reason(cls, level: str, sharded: bool) -> str:
        return f"{cls.name} has no batch read API"

    def open(self, dataset: Dataset) -> None:
        raise NotImplementedError

    def read_all(self) -> np.ndarray:
        raise NotImplementedError

    def read_piece(self, level: str, index: Index, slices: Slices) -> np.ndarray:
        """One chunk ('outer': a chunk, or a shard when sharded; 'inner': an inner chunk)."""
        raise NotImplementedError

    def read_batch(
        self, level: str, indices: Sequence[Index], slices: Sequence[Slices]
    ) -> list[np.ndarray]:
        raise NotImplementedError

    no_pick_reason = "no orthogonal selection with index arrays"

    def can_pick(self) -> bool:
        """Whether `read_oindex` exists for this implementation."""
        return type(self).read_oindex is not Adapter.read_oindex

    def read_oindex(self, index: tuple[np.ndarray, ...]) -> np.ndarray:
        """An orthogonal selection: one integer index array per axis."""
        raise NotImplementedError


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def _missing(*modules: str) -> str | None:
    for m in modules:
        if importlib.util.find_spec(m) is None:
            return f"python package {m!r} is not installed"
    return None


class ZarrpipeAdapter(Adapter):
    name = "zarrpipe"
    description = (
        "zarrpipe.Store(dir).read(path) -> np.from_dlpack(t.into_dlpack()); chunks: "
        "Array.read_chunk(i), shards: Store.read(path, slices); batch: Array.read_chunks"
    )

    @classmethod
    def version(cls) -> str:
        import zarrpipe

        return zarrpipe.__version__

    @classmethod
    def batch_api(cls, level: str, sharded: bool) -> str | None:
        # read_chunks indexes the `chunks` grid: inner chunks when sharded, so no shard batch.
        return None if (level == "outer" and sharded) else "Array.read_chunks(indices)"

    @classmethod
    def no_batch_reason(cls, level: str, sharded: bool) -> str:
        return "no batch read of whole shards (Array.read_chunks indexes inner chunks)"

    def open(self, dataset: Dataset) -> None:
        import zarrpipe

        zarrpipe.set_num_threads(self.threads)
        self.dataset = dataset
        self.store = zarrpipe.Store(dataset.root)
        self.array = self.store.open_array(dataset.path)

    @staticmethod
    def _np(tensor) -> np.ndarray:
        return np.from_dlpack(tensor.into_dlpack())

    def read_all(self) -> np.ndarray:
        return self._np(self.store.read(self.dataset.path))

    def read_piece(self, level: str, index: Index, slices: Slices) -> np.ndarray:
        if level == "outer" and self.dataset.inner is not None:
            return self._np(self.store.read(self.dataset.path, slices))
        return self._np(self.array.read_chunk(index))

    def read_batch(self, level, indices, slices):
        return [self._np(t) for t in self.array.read_chunks(list(indices))]

    def read_oindex(self, index):
        # `oindex[...]` returns NumPy arrays (zarr-python's API), over the fresh buffer.
        return self.array.oindex[index]


class ZarrPythonAdapter(Adapter):
    name = "zarr"
    description = "zarr-python, default codec pipeline: zarr.open_array(...)[slices]"
    pipeline: str | None = None  # codec_pipeline.path, None for zarr's default

    @classmethod
    def available(cls) -> str | None:
        return _missing("zarr")

    @classmethod
    def version(cls) -> str:
        import zarr

        return f"zarr {zarr.__version__}"

    def _config(self) -> dict:
        conf: dict = {"threading.max_workers": self.threads}
        if self.pipeline:
            # strict: an array the pipeline cannot decode is an error (a FAILED row), not a
            # quiet fallback to zarr-python's own pipeline measured under the wrong name.
            conf.update({"codec_pipeline.path": self.pipeline, "codec_pipeline.strict": True})
        return conf

    def open(self, dataset: Dataset) -> None:
        import zarr

        zarr.config.set(self._config())
        self.array = zarr.open_array(store=dataset.root, path=dataset.path, mode="r")
        got = type(self.array._async_array.codec_pipeline)
        want = self.pipeline.rsplit(".", 1)[-1] if self.pipeline else "BatchedCodecPipeline"
        if got.__name__ != want:
            raise RuntimeError(f"zarr chose codec pipeline {got.__qualname__}, not {want}")

    def read_all(self) -> np.ndarray:
        return cast(np.ndarray, self.array[...])

    def read_piece(self, level: str, index: Index, slices: Slices) -> np.ndarray:
        return cast(np.ndarray, self.array[slices])

    def read_oindex(self, index):
        return self.array.oindex[index]


class ZarrZarrpipeAdapter(ZarrPythonAdapter):
    name = "zarr+zarrpipe"
    description = (
        'zarr-python with codec_pipeline.path = "zarrpipe.CodecPipeline" '
        "(strict: no silent fallback to zarr's pipeline)"
    )
    pipeline = "zarrpipe.CodecPipeline"

    @classmethod
    def available(cls) -> str | None:
        reason = _missing("zarr")
        if reason:
            return reason
        import zarrpipe

        try:
            zarrpipe.CodecPipeline  # noqa: B018 (a lazy attribute: this imports it)
        except AttributeError:
            return "zarrpipe.CodecPipeline does not exist (yet) in this zarrpipe build"
        except ImportError as e:
            return f"zarrpipe.CodecPipeline cannot be imported: {e}"
        return None

    @classmethod
    def version(cls) -> str:
        import zarr

        import zarrpipe

        return f"zarr {zarr.__version__}, zarrpipe {zarrpipe.__version__}"


class ZarrZarrsAdapter(ZarrPythonAdapter):
    name = "zarr+zarrs"
    description = (
        'zarr-python with codec_pipeline.path = "zarrs.ZarrsCodecPipeline" '
        "(strict: no silent fallback to zarr's pipeline)"
    )
    pipeline = "zarrs.ZarrsCodecPipeline"

    @classmethod
    def available(cls) -> str | None:
        return _missing("zarr", "zarrs")

    @classmethod
    def version(cls) -> str:
        import zarr
        import zarrs

        return f"zarr {zarr.__version__}, zarrs {zarrs.__version__}"


class ZarrFusedAdapter(ZarrPythonAdapter):
    name = "zarr-fused"
    description = (
        'zarr-python >= 3.3 with codec_pipeline.path = "zarr.core.codec_pipeline.'
        'FusedCodecPipeline" (its own synchronous, fused pipeline)'
    )
    pipeline = "zarr.core.codec_pipeline.FusedCodecPipeline"

    @classmethod
    def available(cls) -> str | None:
        reason = _missing("zarr")
        if reason:
            return reason
        import zarr.core.codec_pipeline as cp

        if not hasattr(cp, "FusedCodecPipeline"):
            import zarr

            return f"zarr {zarr.__version__} has no FusedCodecPipeline (zarr-python >= 3.3)"
        return None


class TensorStoreAdapter(Adapter):
    name = "tensorstore"
    description = (
        "tensorstore zarr3 driver, file kvstore, no cache pool; t[slices].read().result();"
        " batch: every read issued, then all futures awaited"
    )

    @classmethod
    def available(cls) -> str | None:
        return _missing("tensorstore")

    @classmethod
    def version(cls) -> str:
        return _dist_version("tensorstore")

    @classmethod
    def batch_api(cls, level: str, sharded: bool) -> str | None:
        return "[t[s].read() for s in slices] then .result() each"

    def open(self, dataset: Dataset) -> None:
        import tensorstore as ts

        context = ts.Context(
            {
                "data_copy_concurrency": {"limit": self.threads},
                "cache_pool": {"total_bytes_limit": 0},
            }
        )
        spec = {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": f"{dataset.root}/{dataset.path}"},
        }
        self.store = ts.open(spec, read=True, context=context).result()

    def read_all(self) -> np.ndarray:
        return self.store.read().result()

    def read_piece(self, level: str, index: Index, slices: Slices) -> np.ndarray:
        return self.store[slices].read().result()

    def read_batch(self, level, indices, slices):
        futures = [self.store[s].read() for s in slices]
        return [f.result() for f in futures]

    def read_oindex(self, index):
        return self.store.oindex[index].read().result()


class ZarristaAdapter(Adapter):
    name = "zarrista"
    description = (
        "zarrista (zarrs bindings): retrieve_array_subset(...), retrieve_chunk(i) "
        "(shards when sharded), retrieve_subchunk(i, shard_cache=...) for inner chunks"
    )

    @classmethod
    def available(cls) -> str | None:
        return _missing("zarrista")

    @classmethod
    def version(cls) -> str:
        return _dist_version("zarrista")

    def open(self, dataset: Dataset) -> None:
        import zarrista
        from zarrista.store import FilesystemStore

        self.array = zarrista.Array.open(FilesystemStore(dataset.root), "/" + dataset.path)
        self.shard_cache = self.array.shard_cache() if dataset.inner is not None else None

    def read_all(self) -> np.ndarray:
        return self.array.retrieve_array_subset(...).to_numpy()

    def read_piece(self, level: str, index: Index, slices: Slices) -> np.ndarray:
        if level == "inner":
            return self.array.retrieve_subchunk(
                list(index), shard_cache=self.shard_cache
            ).to_numpy()
        return self.array.retrieve_chunk(list(index)).to_numpy()


_BUILTIN = [
    ZarrpipeAdapter,
    ZarrZarrpipeAdapter,
    ZarrPythonAdapter,
    ZarrZarrsAdapter,
    ZarrFusedAdapter,
    TensorStoreAdapter,
    ZarristaAdapter,
]
REGISTRY: dict[str, str] = {c.name: f"{c.__module__}:{c.__qualname__}" for c in _BUILTIN}
"""name -> where a worker imports the adapter class from (see `spec_of`)."""


def spec_of(cls: type[Adapter]) -> str:
    """How a worker finds the class: "package.module:Class", or "/path/file.py:Class" for a
    top-level module (a test file or a script), which a fresh process may not import by name."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if "." not in cls.__module__ and path:
        return f"{os.path.abspath(path)}:{cls.__qualname__}"
    return f"{cls.__module__}:{cls.__qualname__}"


def register(name: str, adapter: type[Adapter] | str) -> None:
    """Adds an implementation under `name`: a class, or a "module:Class" / "file.py:Class" spec."""
    REGISTRY[name] = adapter if isinstance(adapter, str) else spec_of(adapter)


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def load(spec: str) -> type[Adapter]:
    """The class of a "module:Class" or "/path/file.py:Class" spec."""
    module, _, qualname = spec.rpartition(":")
    if module.endswith(".py"):
        name = "_zarrpipe_bench_" + os.path.splitext(os.path.basename(module))[0]
        obj = sys.modules.get(name)
        if obj is None:
            file_spec = importlib.util.spec_from_file_location(name, module)
            if file_spec is None or file_spec.loader is None:
                raise ImportError(f"cannot load adapter module {module}")
            obj = importlib.util.module_from_spec(file_spec)
            sys.modules[name] = obj
            file_spec.loader.exec_module(obj)
    else:
        obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return cast(type[Adapter], obj)
