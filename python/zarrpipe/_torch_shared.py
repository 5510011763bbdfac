"""Batches that cross from a DataLoader worker to the training process without a copy.

torch hands a worker's tensors to the main process through shared memory: a tensor whose
storage is not shared yet is copied into a fresh shared segment first (a copy, and a fresh
segment's pages faulted in, for every batch). Here a worker gathers each batch straight into
a slot of its own pool of shared storages, reused from batch to batch, and sends the slot:
torch passes the storage's file descriptor (or name), and the main process maps it once
while it keeps it.

A slot is reused only once the main process is done with the batch in it: the first byte of
the slot is its state, set to HELD by the worker before the batch leaves and back to FREE by
the main process when the last tensor (or view, or NumPy array) over the batch is gone. A
worker whose slots are all held (batches in flight, or kept by the training loop) makes a
new one, so the pool holds as many batches as are alive, and never overwrites one.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import torch

# Bytes before a slot's batch: the state byte, and the batch kept 64-byte aligned.
HEADER = 64
FREE, HELD = 0, 1


class _Slot:
    """One shared storage: the state byte, then room for `capacity` bytes of batch."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.storage = torch.UntypedStorage._new_shared(HEADER + capacity)
        self.bytes = _uint8_view(self.storage)
        self.bytes[0] = FREE


def _uint8_view(storage: torch.UntypedStorage) -> np.ndarray:
    """The whole storage as a writable NumPy uint8 array (which keeps it alive)."""
    return torch.empty(0, dtype=torch.uint8).set_(storage).numpy()


def carries(dtype: np.dtype[Any]) -> bool:
    """Whether torch has a tensor type for `dtype` (it has none for uint64 before 2.3,
    strings, datetimes or records)."""
    try:
        torch.from_numpy(np.empty(0, dtype=dtype))
    except TypeError:
        return False
    return True


class SharedBatch:
    """A batch in a worker's slot: pickles as the slot's storage (shared, so torch sends
    its handle, not its bytes) and becomes a `torch.Tensor` over it when unpickled."""

    def __init__(self, slot: _Slot, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.slot = slot
        self.shape = shape
        self.dtype = dtype

    def __reduce__(self) -> tuple[Any, ...]:
        return (_attach, (self.slot.storage, self.shape, self.dtype))

    def tensor(self) -> torch.Tensor:
        """The batch as a tensor in this process (a worker yielding in-process)."""
        return _attach(self.slot.storage, self.shape, self.dtype)


def _attach(storage: torch.UntypedStorage, shape: tuple[int, ...], dtype: np.dtype[Any]):
    """The main process's side: a writable tensor over the slot's batch that frees the slot
    when the last view of it is gone."""
    whole = _uint8_view(storage)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    batch = whole[HEADER : HEADER + nbytes].view(dtype).reshape(shape)
    # torch.from_numpy keeps `batch` alive as long as any tensor over it; the finalizer runs
    # when the last one goes, and holds `whole` (so the storage) until then.
    weakref.finalize(batch, _release, whole)
    return torch.from_numpy(batch)


def _release(whole: np.ndarray) -> None:
    whole[0] = FREE


class SlotPool:
    """A worker's slots: `take` gives a free one big enough (or a new one)."""

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._carries: dict[np.dtype[Any], bool] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def take(
        self, shape: tuple[int, ...], dtype: np.dtype[Any]
    ) -> tuple[SharedBatch, np.ndarray] | None:
        """A held slot's batch handle and the C-order NumPy array of `shape` and `dtype` to
        fill in it; None when torch has no type for `dtype`."""
        if self._carries.setdefault(dtype, carries(dtype)) is False:
            return None
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        slot = next((s for s in self._slots if s.bytes[0] == FREE and s.capacity >= nbytes), None)
        if slot is None:
            slot = _Slot(max(nbytes, 1))
            self._slots.append(slot)
        slot.bytes[0] = HELD
        out = slot.bytes[HEADER : HEADER + nbytes].view(dtype).reshape(shape)
        return SharedBatch(slot, shape, dtype), out
