"""The order of an epoch for `BatchLoader`: which samples each batch holds, and from which
window of chunks each sample is read. Pure NumPy, no I/O, deterministic for a seed and an
epoch.

Chunk-aware shuffling: the *units* are the read chunks of the first array along the sample
axis (inner chunks of a shard). The stored chunks (shards) are shuffled, then the units
within each shard, and consecutive units form windows of ``shuffle_window`` units; the
samples of a window are shuffled among themselves. A window is decoded once and every batch
is cut from the (at most two, at a window's edge) windows it overlaps, so each chunk is
decoded once per epoch however the samples are shuffled.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Epoch:
    """One epoch's order over all ranks (before the split).

    ``order`` lists the samples in epoch order; ``windows[w]`` are the ``(start, stop)``
    ranges window ``w`` reads (stacked in that order); sample ``s`` is row ``row_of[s]`` of
    window ``window_of[s]``.
    """

    order: np.ndarray
    windows: list[list[tuple[int, int]]]
    window_of: np.ndarray
    row_of: np.ndarray


def epoch_order(
    n: int, unit: int, stored: int, *, shuffle: bool, seed: int, epoch: int, window: int
) -> Epoch:
    """The order of one epoch of ``n`` samples read in units of ``unit`` samples, stored in
    groups (shards) of ``stored`` samples (a multiple of ``unit``)."""
    n_units = -(-n // unit)
    rng = np.random.default_rng([seed, epoch]) if shuffle else None
    if rng is None:
        units = np.arange(n_units)
    else:
        per_shard = max(stored // unit, 1)
        n_shards = -(-n_units // per_shard)
        parts = []
        for s in rng.permutation(n_shards):
            first = int(s) * per_shard
            count = min(per_shard, n_units - first)
            parts.append(first + rng.permutation(count))
        units = np.concatenate(parts) if parts else np.arange(0)
    windows: list[list[tuple[int, int]]] = []
    window_of = np.empty(n, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    pieces = []
    for w, start in enumerate(range(0, n_units, window)):
        group = units[start : start + window]
        ranges = [(int(u) * unit, min(n, (int(u) + 1) * unit)) for u in group]
        samples = np.concatenate([np.arange(a, b) for a, b in ranges])
        window_of[samples] = w
        row_of[samples] = np.arange(samples.size)
        pieces.append(samples if rng is None else samples[rng.permutation(samples.size)])
        windows.append(ranges)
    order = np.concatenate(pieces) if pieces else np.arange(0)
    return Epoch(order, windows, window_of, row_of)


def rank_share(order: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Rank ``rank``'s samples: the epoch order padded, as PyTorch's ``DistributedSampler``
    pads it (repeating from its start), to a multiple of ``world_size``, then cut into
    ``world_size`` contiguous parts. Contiguous, not interleaved as ``DistributedSampler``
    does, so that each rank reads its own windows and a chunk is decoded by one rank."""
    if world_size == 1:
        return order
    per = -(-order.size // world_size)
    padded = np.resize(order, per * world_size)
    return padded[rank * per : (rank + 1) * per]


def batch_bounds(count: int, batch_size: int, drop_last: bool) -> list[tuple[int, int]]:
    """``(start, stop)`` of each batch of ``count`` samples; ``drop_last`` drops a last
    partial batch."""
    stop = count - count % batch_size if drop_last else count
    return [(a, min(a + batch_size, stop)) for a in range(0, stop, batch_size)]


def worker_block(n_batches: int, worker: int, workers: int) -> range:
    """Worker ``worker``'s contiguous block of ``n_batches`` batches (blocks keep each worker
    on its own windows)."""
    per = -(-n_batches // workers) if n_batches else 0
    return range(min(worker * per, n_batches), min((worker + 1) * per, n_batches))


def runs(windows: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``(start, stop)`` of equal consecutive values."""
    if windows.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(windows)) + 1
    edges = [0, *cuts.tolist(), int(windows.size)]
    return list(itertools.pairwise(edges))
