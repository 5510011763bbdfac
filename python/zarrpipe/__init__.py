"""zarrpipe: fast, correct Zarr reads into Python tensors, on a Rust codec pipeline."""

from zarrpipe._zarrpipe import (
    Array,
    ChecksumError,
    DecodeError,
    MetadataError,
    OwnedTensor,
    Store,
    Tensor,
    UnsupportedError,
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
    "UnsupportedError",
    "ZarrpipeError",
    "__version__",
    "get_num_threads",
    "set_num_threads",
]
