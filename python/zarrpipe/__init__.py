"""zarrpipe: fast, correct Zarr v2/v3 reads and writes from Python, on a Rust codec pipeline.

Stores, groups, arrays, `open`, tensors, errors and the thread pool are importable from
here, and so are `CodecPipeline`, `FallbackWarning` and `NDBuffer` (loaded with zarr-python
on first use). The training loaders are not: they live in `zarrpipe.loader`, `zarrpipe.torch` and
`zarrpipe.jax`; the engine adapter in `zarrpipe.engine`, the xarray backend in
`zarrpipe.xarray_backend`.
"""

from zarrpipe._zarrpipe import (
    Array,
    Attributes,
    ChecksumError,
    DecodeError,
    Group,
    MetadataError,
    OwnedTensor,
    Store,
    Tensor,
    UnconditionalWriteWarning,
    UnsupportedError,
    WriteConflictError,
    ZarrpipeError,
    __version__,
    get_num_threads,
    open,
    set_num_threads,
)

__all__ = [
    "Array",
    "Attributes",
    "ChecksumError",
    "DecodeError",
    "Group",
    "MetadataError",
    "OwnedTensor",
    "Store",
    "Tensor",
    "UnconditionalWriteWarning",
    "UnsupportedError",
    "WriteConflictError",
    "ZarrpipeError",
    "__version__",
    "get_num_threads",
    "open",
    "set_num_threads",
]


def __getattr__(name: str) -> object:
    # zarr-python is optional: the pipeline (and zarr) load on first use.
    if name in ("CodecPipeline", "FallbackWarning"):
        from zarrpipe import pipeline

        return getattr(pipeline, name)
    if name == "NDBuffer":
        from zarrpipe import ndbuffer

        return ndbuffer.NDBuffer
    raise AttributeError(f"module 'zarrpipe' has no attribute {name!r}")
