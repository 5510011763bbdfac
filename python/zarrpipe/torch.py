"""PyTorch: `ZarrDataset`, an `IterableDataset` of zarrpipe batches as `torch.Tensor`s, for
`torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=...)`.

In the training process (`num_workers=0`) each batch moves into torch through
`torch.from_dlpack(t.into_dlpack())`: writable, and never copied. A DataLoader worker
gathers each batch straight into shared memory of its own, reused from batch to batch, and
the training process maps it: no copy on the way either, where torch would copy every
batch into a fresh shared segment (see `zarrpipe._torch_shared`). Each worker reads its own
contiguous block of the rank's batches (and so its own chunks); the dataset, its arrays
and their stores pickle, so workers may be forked or spawned. Importing this module imports
torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data

from zarrpipe._torch_shared import SlotPool, share_tracker
from zarrpipe._zarrpipe import Array, Tensor, set_num_threads
from zarrpipe.loader import BatchLoader, move_batch

__all__ = ["ZarrDataset", "to_torch"]


def to_torch(
    batch: Tensor | np.ndarray | tuple[Tensor | np.ndarray, ...],
) -> torch.Tensor | np.ndarray | tuple[torch.Tensor | np.ndarray, ...]:
    """Moves a batch into torch without a copy.

    Args:
        batch: A Tensor (or a tuple of them) that nobody else holds, as `BatchLoader`
            yields; it is consumed.

    Returns:
        A writable CPU `torch.Tensor` over the same memory (a tuple for a tuple); a
        variable-length array's NumPy batch is passed through as it is.

    Raises:
        BufferError: The Tensor's buffer is shared (a view of it is alive) or consumed.
    """
    return move_batch(batch, torch.from_dlpack)


def _share_cores(workers: int) -> None:
    """In a DataLoader worker: decode on this worker's share of the cores, as torch gives each
    worker one thread of its own (`workers` pools of all the cores would fight over them).
    `ZARRPIPE_NUM_THREADS` set by the user wins."""
    if "ZARRPIPE_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    set_num_threads(max(1, (cores or 1) // max(1, workers)))


class ZarrDataset(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """Batches of Zarr arrays for a `DataLoader` with `batch_size=None`.

    Iterating yields `torch.Tensor` batches (a tuple for several arrays) of one epoch of
    this rank, split between the DataLoader's workers. Call `set_epoch(n)` before each
    epoch for a new shuffle; with `persistent_workers=True`, workers do not see the call,
    so each iteration in a worker advances the epoch by one from the last `set_epoch`
    before the workers started (the same order as calling `set_epoch(0)`, `set_epoch(1)`,
    ... in turn).
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
        shared_memory: bool = True,
    ) -> None:
        """A dataset over `arrays`; the arguments are `zarrpipe.loader.BatchLoader`'s.

        Args:
            arrays: A `zarrpipe.Array` or a sequence of them, of equal length along
                `sample_axis`.
            batch_size: Samples per batch (give the DataLoader `batch_size=None`).
            shuffle: Shuffle by chunk.
            seed: The shuffle's seed.
            shuffle_window: Read chunks per shuffling window.
            drop_last: Drop a last partial batch.
            prefetch: Batches each process reads ahead.
            rank: This process's rank (distributed training).
            world_size: The number of ranks.
            sample_axis: The axis whose positions are samples.
            shared_memory: In DataLoader workers, gather batches into a pool of shared
                memory that the training process maps (no copy on the way); False leaves
                them to torch, which copies each into fresh shared memory.

        Raises:
            TypeError: See `BatchLoader`, which raises the same exceptions.
            ValueError: See `BatchLoader`.
        """
        super().__init__()
        self.loader = BatchLoader(
            arrays,
            batch_size,
            shuffle=shuffle,
            seed=seed,
            shuffle_window=shuffle_window,
            drop_last=drop_last,
            prefetch=prefetch,
            rank=rank,
            world_size=world_size,
            sample_axis=sample_axis,
        )
        self._iterations = 0
        self.shared_memory = shared_memory
        self._pool: SlotPool | None = None
        self._in_worker = False
        if shared_memory:
            # One resource tracker for this process and the workers it starts, so the
            # segments a worker makes are tracked once (see zarrpipe._torch_shared).
            share_tracker()

    def __getstate__(self) -> dict[str, Any]:
        """The dataset without its slot pool (each worker process makes its own)."""
        return {**self.__dict__, "_pool": None, "_in_worker": False}

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch of the next iteration.

        Args:
            epoch: A non-negative integer.

        Raises:
            ValueError: `epoch` is negative.
        """
        self.loader.set_epoch(epoch)
        self._iterations = 0

    def __len__(self) -> int:
        """The number of batches per epoch of this rank, across all workers.

        Returns:
            `len(loader)`: the workers split the batches, they do not add any.
        """
        return len(self.loader)

    def __iter__(
        self,
    ) -> Iterator[torch.Tensor | np.ndarray | tuple[torch.Tensor | np.ndarray, ...]]:
        """This worker's batches of the epoch, as torch tensors.

        Returns:
            An iterator of writable CPU tensors (tuples for several arrays).
        """
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        epoch = self.loader.epoch + self._iterations
        self._iterations += 1
        into = None
        if info is not None and not self._in_worker:
            self._in_worker = True
            _share_cores(workers)
        if info is not None and self.shared_memory:
            if self._pool is None:
                self._pool = SlotPool()
            into = self._pool.take
        batches = self.loader.iter_share(epoch, worker, workers, into)
        try:
            for batch in batches:
                yield to_torch(batch)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
