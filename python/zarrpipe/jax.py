"""JAX: zarrpipe batches as `jax.Array`s on the CPU, through DLPack.

`to_jax` moves a batch in with `jax.numpy.from_dlpack(t.into_dlpack())`. JAX keeps the memory
without a copy when XLA accepts the buffer as it is: XLA's CPU client copies a buffer that
does not start at a 64-byte boundary, and zarrpipe's batches and fresh reads all do (see
the training guide for what was measured). JAX arrays are immutable, so nothing is gained
by writing: the point of the moving door here is that the batch's memory belongs to the JAX
array alone and is freed with it. Importing this module imports JAX.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from zarrpipe._zarrpipe import Tensor
from zarrpipe.loader import move_batch

__all__ = ["batches", "to_jax"]


def to_jax(
    batch: Tensor | np.ndarray | tuple[Tensor | np.ndarray, ...],
) -> jax.Array | np.ndarray | tuple[jax.Array | np.ndarray, ...]:
    """Moves a batch into JAX on the CPU, without a copy where XLA allows it.

    Args:
        batch: A Tensor (or a tuple of them) that nobody else holds, as `BatchLoader`
            yields; it is consumed.

    Returns:
        A `jax.Array` on the CPU (a tuple for a tuple); a variable-length array's NumPy
        batch is passed through as it is.

    Raises:
        BufferError: The Tensor's buffer is shared (a view of it is alive) or consumed.
    """
    return move_batch(batch, jnp.from_dlpack)


def batches(
    loader: Iterable[Tensor | tuple[Tensor, ...]],
) -> Iterator[jax.Array | np.ndarray | tuple[jax.Array | np.ndarray, ...]]:
    """Iterates a `BatchLoader` (one epoch) as JAX arrays.

    Args:
        loader: A `zarrpipe.loader.BatchLoader` (or any iterable of uniquely held
            Tensors).

    Returns:
        An iterator of `jax.Array` batches (tuples for several arrays), read ahead as the
        loader reads ahead.

    Raises:
        BufferError: A batch's buffer is shared.
    """
    it = iter(loader)
    try:
        for batch in it:
            yield to_jax(batch)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
