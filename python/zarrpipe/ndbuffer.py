"""`zarrpipe.NDBuffer`: zarr-python's NumPy output buffers, in memory zarrpipe keeps between
reads.

zarr-python allocates a new output array for every read (``np.empty``); for a read of tens
of MiB the process then faults in every page of it again, which can cost as much as a
quarter of the read on virtual machines. zarrpipe's own reads keep the previous read's
output for the next read of its size; selecting this class with
``zarr.config.set({"ndbuffer": "zarrpipe.NDBuffer"})`` gives zarr-python's reads the same:
outputs of 32 MiB and more come from zarrpipe's kept memory (zeroed first, so they never
show an earlier read's values) and go back to it when the array is freed.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from zarr.core.buffer import cpu

from zarrpipe._zarrpipe import _output_array

if TYPE_CHECKING:
    from typing import Self

    import numpy.typing as npt

__all__ = ["NDBuffer"]

# Element kinds whose values are plain bytes in the array's memory (no Python objects,
# no StringDType arena), so that a byte buffer can be viewed as them.
_PLAIN_KINDS = frozenset("biufcmMSUV")


class NDBuffer(cpu.NDBuffer):
    """zarr-python's CPU `NDBuffer`, whose `empty` outputs of 32 MiB and more are made in
    memory zarrpipe keeps between reads (see the module). Select it with
    `zarr.config.set({"ndbuffer": "zarrpipe.NDBuffer"})`, beside
    `"codec_pipeline.path": "zarrpipe.CodecPipeline"`; everything else is zarr-python's."""

    @classmethod
    def empty(
        cls, shape: tuple[int, ...], dtype: npt.DTypeLike, order: Literal["C", "F"] = "C"
    ) -> Self:
        data = _kept_array(tuple(shape), np.dtype(dtype), order)
        if data is None:
            return super().empty(shape=shape, dtype=dtype, order=order)
        return cls(data)


def _kept_array(shape: tuple[int, ...], dtype: np.dtype[Any], order: Literal["C", "F"]) -> Any:
    """A zeroed array of `shape` and `dtype` over zarrpipe's kept memory; None where zarrpipe
    does not make it (small, object or StringDType elements, or kept memory turned off)."""
    plain = dtype.kind in _PLAIN_KINDS and not dtype.hasobject and dtype.subdtype is None
    if not plain or order not in ("C", "F") or any(n < 0 for n in shape):
        return None  # (NumPy says what is wrong with a negative dimension)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > sys.maxsize:
        return None  # (NumPy says it is too big)
    raw = _output_array(nbytes)
    if raw is None:
        return None
    return raw.view(dtype).reshape(shape, order=order)


# zarr-python finds buffer classes by module + name: "zarrpipe.NDBuffer".
NDBuffer.__module__ = "zarrpipe"
