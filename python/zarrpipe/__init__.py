"""zarrpipe: fast, correct Zarr reads into Python tensors, on a Rust codec pipeline."""

from zarrpipe._zarrpipe import (
    Array,
    Store,
    get_num_threads,
    set_num_threads,
    ChecksumError,
    DecodeError,
    MetadataError,
    OwnedTensor,
    Tensor,
    UnsupportedError,
    ZarrpipeError,
    __version__,
)

__all__ = [
    "Array",
    "Store",
    "get_num_threads",
    "set_num_threads",
    "ChecksumError",
    "DecodeError",
    "MetadataError",
    "OwnedTensor",
    "Tensor",
    "UnsupportedError",
    "ZarrpipeError",
    "__version__",
]
