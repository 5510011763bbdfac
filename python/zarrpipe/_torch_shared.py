"""Batches that cross from a DataLoader worker to the training process without a copy.

torch hands a worker's tensors to the main process through shared memory: a tensor whose
storage is not shared yet is copied into a fresh shared segment, whose file descriptor then
travels over a socket to the main process (a copy, a fresh segment's pages faulted in, and a
connection to the worker, for every batch). Here a worker gathers each batch straight into a
slot of its own pool of named shared-memory segments, reused from batch to batch, and sends
only the slot's name and the batch's shape and type: the main process maps a slot once and
keeps the mapping while it is in use.

A slot is reused only once the main process is done with the batch in it: the first byte of
the slot is its state, set to HELD by the worker before the batch leaves and back to FREE by
the main process when the last tensor (or view, or NumPy array) over the batch is gone. A
worker whose slots are all held (batches in flight, or kept by the training loop) makes a
new one, so the pool holds as many batches as are alive, and never overwrites one.

A worker unlinks its segments when it exits (a multiprocessing finalizer), and the main
process unlinks those it has mapped when it exits (persistent workers are terminated then,
before their finalizers run); a segment neither could unlink is left to multiprocessing's
resource tracker, which removes it when the program ends. The main process starts that
tracker before its workers (`share_tracker`), so they share it and a segment mapped on both
sides is tracked once. The main process drops a mapping that has held no batch for a while
(and so the memory of workers that are gone).
"""

from __future__ import annotations

import atexit
import weakref
from multiprocessing import resource_tracker, shared_memory, util
from typing import Any

import numpy as np
import torch

# Bytes before a slot's batch: the state byte, and the batch kept 64-byte aligned.
HEADER = 64
FREE, HELD = 0, 1
# The main process keeps an idle mapping for this many batches after its last one.
KEEP_IDLE = 64


class _Slot:
    """One shared segment (a worker's): the state byte, then room for `capacity` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.memory = shared_memory.SharedMemory(create=True, size=HEADER + capacity)
        self.bytes = np.ndarray(HEADER + capacity, dtype=np.uint8, buffer=self.memory.buf)
        self.bytes[0] = FREE
        util.Finalize(self, _unlink, args=(self.memory.name,), exitpriority=0)


def _unlink(name: str) -> None:
    try:
        memory = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    memory.close()
    memory.unlink()


def share_tracker() -> None:
    """Starts multiprocessing's resource tracker in this process, for the workers it starts
    to inherit."""
    resource_tracker.ensure_running()


def carries(dtype: np.dtype[Any]) -> bool:
    """Whether torch has a tensor type for `dtype` (it has none for strings, datetimes or
    records, nor for uint16-64 before 2.3)."""
    try:
        torch.from_numpy(np.empty(0, dtype=dtype))
    except TypeError:
        return False
    return True


class SharedBatch:
    """A batch in a worker's slot: pickles as the slot's name, the batch's shape and dtype,
    and becomes a `torch.Tensor` over the slot when unpickled."""

    def __init__(self, slot: _Slot, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.slot = slot
        self.shape = shape
        self.dtype = dtype

    def __reduce__(self) -> tuple[Any, ...]:
        return (_attach, (self.slot.memory.name, self.shape, self.dtype))


class _Mapped:
    """A slot as the main process maps it: its bytes, how many batches over it are alive,
    and when it was last used."""

    def __init__(self, name: str) -> None:
        self.memory = shared_memory.SharedMemory(name=name)
        self.bytes = np.ndarray(self.memory.size, dtype=np.uint8, buffer=self.memory.buf)
        self.alive = 0
        self.used = 0


_mapped: dict[str, _Mapped] = {}
_attached = 0
# Every slot this process has mapped: unlinked when it exits (workers that are still alive
# then, persistent ones, are terminated before their own finalizers run).
_seen: set[str] = set()


def _attach(name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> torch.Tensor:
    """The main process's side: a writable tensor over the slot's batch that frees the slot
    when the last view of it is gone."""
    global _attached
    _attached += 1
    slot = _mapped.get(name)
    if slot is None:
        _drop_idle()
        slot = _mapped[name] = _Mapped(name)
        if not _seen:
            atexit.register(_unlink_seen)
        _seen.add(name)
    slot.alive += 1
    slot.used = _attached
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    batch = slot.bytes[HEADER : HEADER + nbytes].view(dtype).reshape(shape)
    # torch.from_numpy keeps `batch` alive as long as any tensor over it; the finalizer runs
    # when the last one goes.
    weakref.finalize(batch, _release, slot)
    return torch.from_numpy(batch)


def _unlink_seen() -> None:
    for name in _seen:
        _unlink(name)


def _release(slot: _Mapped) -> None:
    slot.alive -= 1
    if slot.alive == 0:
        slot.bytes[0] = FREE


def _drop_idle() -> None:
    """Unmaps the slots that have held no batch for `KEEP_IDLE` batches (a worker that is
    gone sends none again; one that is alive has its slot mapped again by name)."""
    for name, slot in list(_mapped.items()):
        if slot.alive == 0 and _attached - slot.used > KEEP_IDLE:
            slot.bytes = np.empty(0, dtype=np.uint8)
            try:
                slot.memory.close()
            except BufferError:  # a view of it outlived its batch's finalizer: keep it
                slot.bytes = np.ndarray(slot.memory.size, np.uint8, buffer=slot.memory.buf)
                continue
            del _mapped[name]


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
        if dtype not in self._carries:
            self._carries[dtype] = carries(dtype)
        if not self._carries[dtype]:
            return None
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        slot = next((s for s in self._slots if s.bytes[0] == FREE and s.capacity >= nbytes), None)
        if slot is None:
            slot = _Slot(max(nbytes, 1))
            self._slots.append(slot)
        slot.bytes[0] = HELD
        out = slot.bytes[HEADER : HEADER + nbytes].view(dtype).reshape(shape)
        return SharedBatch(slot, shape, dtype), out
