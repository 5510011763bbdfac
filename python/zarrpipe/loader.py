"""Shuffled training batches over Zarr arrays, decoded ahead of the training loop.

`BatchLoader` cuts one or more arrays of equal length along a sample axis into batches of
`Tensor`s. It shuffles by chunk (see `zarrpipe._order`): each window of chunks is decoded
once, in parallel on zarrpipe's pool, and every batch is gathered from it into a fresh
buffer that nobody else holds, so `batch.into_dlpack()` hands it to PyTorch, JAX or NumPy
writable and without a copy. A reader thread keeps the next `prefetch` batches ready.
An array of variable-length elements (strings, bytes) gives NumPy arrays instead: their
windows are read with `Array.read` and batches taken from them with NumPy.
No framework is imported here: `zarrpipe.torch` and `zarrpipe.jax` wrap the loader.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from zarrpipe import _order
from zarrpipe._prefetch import Prefetcher
from zarrpipe._zarrpipe import Array, Tensor, _Rows

__all__ = ["BatchLoader"]

Batch = Tensor | np.ndarray | tuple[Tensor | np.ndarray, ...]
# Gives a C-contiguous buffer of (shape, dtype) and a handle that stands for the batch in
# it, or None to gather into a fresh Tensor.
Into = Callable[[tuple[int, ...], np.dtype[Any]], tuple[Any, np.ndarray] | None]


def move_batch(batch: Batch, move: Callable[[Any], Any]) -> Any:
    """A batch with each Tensor handed to `move` through its writable DLPack door (for
    example `torch.from_dlpack`); anything else (a variable-length array's NumPy batch: no
    framework has a string type) stays as it is. A tuple gives a tuple."""

    def one(t: Any) -> Any:
        return move(t.into_dlpack()) if isinstance(t, Tensor) else t

    return tuple(one(t) for t in batch) if isinstance(batch, tuple) else one(batch)


class _VariableRows:
    """A window of a variable-length array, as `_Rows` is for fixed-size ones: the rows
    `ranges` stacked along `axis`, a NumPy array (NumPy holds each element's own memory,
    so there is no buffer to decode into or hand over)."""

    def __init__(self, values: np.ndarray, axis: int) -> None:
        self.values = values
        self.axis = axis

    @staticmethod
    def read(
        array: Array, axis: int, ranges: list[tuple[int, int]], reuse: object = None
    ) -> _VariableRows:
        def rows(start: int, stop: int) -> np.ndarray:
            where = (slice(None),) * axis + (slice(start, stop),)
            return np.asarray(array.read(where))

        return _VariableRows(np.concatenate([rows(a, b) for a, b in ranges], axis=axis), axis)

    @staticmethod
    def gather(parts: list[tuple[_VariableRows, list[int]]]) -> np.ndarray:
        axis = parts[0][0].axis
        taken = [np.take(r.values, np.asarray(idx, dtype=np.intp), axis=axis) for r, idx in parts]
        return taken[0] if len(taken) == 1 else np.concatenate(taken, axis=axis)


def _count(name: str, value: Any, least: int) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if n < least:
        raise ValueError(f"{name} must be at least {least}, got {n}")
    return n


class BatchLoader:
    """Batches of samples from one or more Zarr arrays, shuffled by chunk, read ahead.

    Iterating gives one epoch: a `Tensor` per batch (a tuple of Tensors, one per array, when
    `arrays` is a sequence), each freshly allocated and held by nobody else, so
    `into_dlpack()` always succeeds on it; an array of variable-length strings or bytes
    gives a NumPy array (of NumPy's `StringDType`, or of objects) in its place. Each sample
    of the rank's share appears in exactly one batch. The order depends only on `seed`, the
    epoch (`set_epoch`) and the first array's chunking, so every rank computes the same
    epoch and takes its own part.

    Memory: besides the batch the caller holds, at most `prefetch` batches read ahead, the
    decoded windows that the batches being cut need (one, or two at a window's edge:
    `shuffle_window` chunks of the first array's rows, in every array), and one spare
    window buffer that the next window is decoded into.
    """

    def __init__(
        self,
        arrays: Array | Sequence[Array],
        batch_size: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        shuffle_window: int = 4,
        drop_last: bool = False,
        prefetch: int = 2,
        rank: int = 0,
        world_size: int = 1,
        sample_axis: int = 0,
    ) -> None:
        """Plans batches over `arrays`; nothing is read until iteration.

        Args:
            arrays: A `zarrpipe.Array`, or a sequence of them (for example inputs and
                labels, from one or several stores, with different chunk grids) of the
                same length along `sample_axis`.
            batch_size: Samples per batch.
            shuffle: Shuffle by chunk (the stored chunks or shards of the first array, then
                the samples within windows of `shuffle_window` chunks); False reads in
                order.
            seed: The seed of the shuffle (a non-negative integer).
            shuffle_window: How many read chunks (inner chunks of a shard) of the first
                array each window holds: samples are shuffled within a window, and a window
                is decoded once.
            drop_last: Drop a last batch smaller than `batch_size`, as
                `torch.utils.data.DataLoader` does.
            prefetch: Batches read ahead on a background thread (the GIL is released while
                decoding); 0 reads each batch when it is asked for.
            rank: This process's rank among `world_size`.
            world_size: The number of ranks splitting each epoch. Each takes a contiguous
                part of the epoch's order, padded as `DistributedSampler` pads (repeating
                samples from the start of the epoch) so that all ranks get as many samples.
            sample_axis: The axis whose positions are samples.

        Raises:
            TypeError: `arrays` is (or holds) something other than a `zarrpipe.Array`, or a
                count is not an integer.
            ValueError: No arrays; arrays of different lengths along `sample_axis`; a
                `sample_axis` an array does not have; a count out of range (`batch_size`,
                `shuffle_window` below 1, `prefetch` or `seed` below 0, `rank` outside
                `range(world_size)`).
        """
        self._single = isinstance(arrays, Array)
        if isinstance(arrays, Array):
            seq = [arrays]
        elif isinstance(arrays, Sequence) and not isinstance(arrays, str | bytes):
            seq = list(arrays)
        else:
            seq = [arrays]  # refused below, by its type
        if not seq:
            raise ValueError("BatchLoader needs at least one array")
        for a in seq:
            if not isinstance(a, Array):
                raise TypeError(
                    f"BatchLoader reads zarrpipe.Array objects, not {type(a).__name__} "
                    "(open one with zarrpipe.Store(...).open_array(path))"
                )
        self._axis = _count("sample_axis", sample_axis, 0)
        for a in seq:
            if self._axis >= a.ndim:
                raise ValueError(
                    f"sample_axis {self._axis} is out of range for array {a.path!r} "
                    f"of {a.ndim} dimensions"
                )
        lengths = {a.shape[self._axis] for a in seq}
        if len(lengths) > 1:
            sizes = ", ".join(f"{a.path!r}: {a.shape[self._axis]}" for a in seq)
            raise ValueError(f"arrays differ in length along axis {self._axis} ({sizes})")
        self._arrays = seq
        self._n = lengths.pop()
        self.batch_size = _count("batch_size", batch_size, 1)
        self.shuffle = bool(shuffle)
        self.seed = _count("seed", seed, 0)
        self.shuffle_window = _count("shuffle_window", shuffle_window, 1)
        self.drop_last = bool(drop_last)
        self.prefetch = _count("prefetch", prefetch, 0)
        self.world_size = _count("world_size", world_size, 1)
        self.rank = _count("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank must be in range(world_size={self.world_size}), got {rank}")
        first = seq[0]
        # The largest chunk (shard) along the sample axis: a rectilinear grid's windows
        # then straddle chunks, which costs decoding, never samples.
        self._unit = max(first.read_chunk_sizes[self._axis], default=1)
        self._stored = max(first.write_chunk_sizes[self._axis], default=1)
        self._epoch = 0

    @property
    def arrays(self) -> tuple[Array, ...]:
        """The arrays read, in order."""
        return tuple(self._arrays)

    @property
    def sample_axis(self) -> int:
        """The axis whose positions are samples."""
        return self._axis

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (see `set_epoch`)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch the next iteration reads; with the seed it fixes the shuffle.

        Args:
            epoch: A non-negative integer (call it with 0, 1, 2, ... as with
                `DistributedSampler.set_epoch`).

        Raises:
            TypeError: `epoch` is not an integer.
            ValueError: `epoch` is negative.
        """
        self._epoch = _count("epoch", epoch, 0)

    def __len__(self) -> int:
        """The number of batches in one epoch of this rank.

        Returns:
            `ceil(share / batch_size)`, or `share // batch_size` with `drop_last`, where
            `share` is `ceil(len / world_size)` samples.
        """
        return len(self._bounds())

    def __iter__(self) -> Iterator[Batch]:
        """One epoch of this rank's batches.

        Returns:
            An iterator of batches (a `Tensor`, or a tuple of Tensors for a sequence of
            arrays); closing it (or dropping it, or leaving the loop) stops the reader
            thread and frees the batches read ahead.

        Raises:
            zarrpipe.DecodeError: A chunk does not decode (raised by `next`, as every read
                error is, at the batch that needs it).
        """
        return self.iter_share(self._epoch, 0, 1)

    def indices(self, epoch: int | None = None) -> list[np.ndarray]:
        """The sample indices of each batch of an epoch, in order (nothing is read).

        Args:
            epoch: The epoch; None for the one the next iteration reads.

        Returns:
            One int64 array per batch: batch `i` holds these positions along `sample_axis`.
        """
        share = self._share(self._epoch if epoch is None else _count("epoch", epoch, 0))
        return [share[a:b] for a, b in self._bounds()]

    # -- internals ------------------------------------------------------------------------

    def _rows_of(self, k: int) -> Any:
        """How array `k`'s windows are read and its batches cut."""
        # Variable-length strings or bytes read as NumPy arrays, not Tensors.
        return _VariableRows if self._arrays[k].dtype.kind in "OT" else _Rows

    def _epoch_plan(self, epoch: int) -> _order.Epoch:
        return _order.epoch_order(
            self._n,
            self._unit,
            self._stored,
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            window=self.shuffle_window,
        )

    def _share(self, epoch: int) -> np.ndarray:
        return _order.rank_share(self._epoch_plan(epoch).order, self.rank, self.world_size)

    def _share_len(self) -> int:
        return -(-self._n // self.world_size)

    def _bounds(self) -> list[tuple[int, int]]:
        return _order.batch_bounds(self._share_len(), self.batch_size, self.drop_last)

    def _batches_of(self, worker: int, workers: int) -> int:
        return len(_order.worker_block(len(self._bounds()), worker, workers))

    def iter_share(
        self, epoch: int, worker: int, workers: int, into: Into | None = None
    ) -> Iterator[Batch]:
        """The batches one worker of a rank reads in an epoch (the torch and JAX loaders'
        workers call it; iterating the loader is `iter_share(epoch, 0, 1)`).

        Args:
            epoch: The epoch, which with the seed fixes the shuffle.
            worker: This worker's number, from 0.
            workers: How many workers share the rank's batches: each reads a contiguous block
                of them.
            into: Where fixed-size arrays' batches are gathered: called with a batch's shape
                and data type, it returns `(handle, buffer)` (a C-contiguous buffer of that
                shape and type) or None (a fresh Tensor), and the batch holds the handle in
                the array's place. None: every batch is a fresh Tensor.

        Returns:
            An iterator over the worker's batches, in order.
        """
        plan = self._epoch_plan(epoch)
        share = _order.rank_share(plan.order, self.rank, self.world_size)
        bounds = self._bounds()
        mine = [bounds[i] for i in _order.worker_block(len(bounds), worker, workers)]
        produce = self._produce(plan, share, mine, into)
        if self.prefetch == 0:
            return produce
        return Prefetcher(produce, self.prefetch)

    def _produce(
        self,
        plan: _order.Epoch,
        share: np.ndarray,
        bounds: list[tuple[int, int]],
        into: Into | None = None,
    ) -> Iterator[Batch]:
        """Reads windows as batches need them and cuts the batches; a window is dropped
        after the last batch that needs it."""
        batches = [share[a:b] for a, b in bounds]
        last_use: dict[int, int] = {}
        for i, b in enumerate(batches):
            for w in np.unique(plan.window_of[b]).tolist():
                last_use[w] = i
        loaded: dict[int, list[Any]] = {}
        # The last window done with: the next window is decoded into its buffers, whose
        # memory is already faulted in (on a virtual machine that costs as much as decoding).
        spare: list[list[Any]] = []
        for i, b in enumerate(batches):
            windows = plan.window_of[b]
            rows = plan.row_of[b]
            parts = []
            for start, stop in _order.runs(windows):
                w = int(windows[start])
                if w not in loaded:
                    reuse = spare.pop() if spare else [None] * len(self._arrays)
                    loaded[w] = [
                        self._rows_of(k).read(a, self._axis, plan.windows[w], r)
                        for k, (a, r) in enumerate(zip(self._arrays, reuse, strict=True))
                    ]
                    del reuse
                parts.append((w, rows[start:stop].tolist()))
            # Yielded as a call's value, never bound to a name here, so the paused frame
            # keeps no reference to a batch the caller holds.
            yield self._cut(loaded, parts, [w for w in loaded if last_use[w] <= i], spare, into)

    def _cut(
        self,
        loaded: dict[int, list[Any]],
        parts: list[tuple[int, list[int]]],
        done: list[int],
        spare: list[list[Any]],
        into: Into | None = None,
    ) -> Batch:
        """One batch: for each array, the rows `parts` names, gathered into a fresh Tensor
        (or into the buffer `into` gives); then the windows in `done` leave `loaded`, the
        last of them kept in `spare`."""

        def one(k: int) -> Any:
            rows_of = self._rows_of(k)
            mine = [(loaded[w][k], rows) for w, rows in parts]
            held = None
            if into is not None and rows_of is _Rows:
                shape = list(mine[0][0].shape)
                shape[self._axis] = sum(len(rows) for _, rows in mine)
                held = into(tuple(shape), self._arrays[k].dtype)
            if held is None:
                return rows_of.gather(mine)
            handle, buffer = held
            _Rows.gather_into(mine, buffer)
            return handle

        out = tuple(one(k) for k in range(len(self._arrays)))
        for w in done:
            spare[:] = [loaded.pop(w)]
        return out[0] if self._single else out
