"""Read-ahead for the batch loader: a thread runs the batch generator at most `depth` items
ahead of the consumer (the reads inside release the GIL, so decoding overlaps the training
step). Stopping early, dropping the iterator or an error on either side stops the thread and
drops what it read ahead; an error in the reader is raised by the consumer's `next`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_END = object()


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _State:
    """What the reader thread and the consumer share (the thread never holds the
    `Prefetcher`, so dropping the iterator finalises it and stops the thread)."""

    def __init__(self, depth: int) -> None:
        self.items: queue.SimpleQueue[object] = queue.SimpleQueue()
        # One slot per item produced and not yet taken: the memory bound.
        self.slots = threading.Semaphore(depth)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ahead = 0


def _run(state: _State, source: Iterator[object]) -> None:
    try:
        while True:
            state.slots.acquire()
            if state.stop.is_set():
                return
            try:
                item = next(source)
            except StopIteration:
                state.items.put(_END)
                return
            with state.lock:
                state.ahead += 1
            state.items.put(item)
            del item
    except BaseException as error:  # handed to the consumer, which raises it
        state.items.put(_Failure(error))
    finally:
        # The generator (and the windows it holds) is finished on this thread.
        close = getattr(source, "close", None)
        if close is not None:
            close()


class Prefetcher(Generic[T]):
    """Iterates `source` on a daemon thread, at most `depth` items ahead."""

    def __init__(self, source: Iterator[T], depth: int) -> None:
        self._state = _State(depth)
        self._done = False
        self._thread = threading.Thread(
            target=_run, args=(self._state, source), name="zarrpipe-prefetch", daemon=True
        )
        self._thread.start()

    @property
    def read_ahead(self) -> int:
        """Items produced and not yet taken by the consumer."""
        with self._state.lock:
            return self._state.ahead

    def __iter__(self) -> Prefetcher[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        state = self._state
        item = state.items.get()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        with state.lock:
            state.ahead -= 1
        state.slots.release()
        return item  # type: ignore[return-value]

    def close(self) -> None:
        """Stops the reader thread and drops the items it read ahead."""
        if self._done:
            return
        self._done = True
        state = self._state
        state.stop.set()
        state.slots.release()  # wake the thread if it waits for a slot
        self._thread.join()
        while True:
            try:
                state.items.get_nowait()
            except queue.Empty:
                break
        with state.lock:
            state.ahead = 0

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, "_thread"):
            self.close()
