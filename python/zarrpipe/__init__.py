"""zarrpipe: fast, correct Zarr reads into Python tensors, on a Rust codec pipeline."""

from zarrpipe._zarrpipe import (
    Array,
    ChecksumError,
    DecodeError,
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
    set_num_threads,
)

__all__ = [
    "Array",
    "ChecksumError",
    "DecodeError",
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
    "set_num_threads",
]


def __getattr__(name: str) -> object:
    # zarr-python is optional: the pipeline (and zarr) load on first use.
    if name in ("CodecPipeline", "FallbackWarning"):
        from zarrpipe import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'zarrpipe' has no attribute {name!r}")
