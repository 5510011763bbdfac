"""zarrpipe: fast, correct Zarr reads into Python tensors, on a Rust codec pipeline."""

from zarrpipe._zarrpipe import (
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
    "ChecksumError",
    "DecodeError",
    "MetadataError",
    "OwnedTensor",
    "Tensor",
    "UnsupportedError",
    "ZarrpipeError",
    "__version__",
]
