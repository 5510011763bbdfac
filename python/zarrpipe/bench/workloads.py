"""The read patterns measured: the runner enumerates rows from them, the worker runs them."""

from __future__ import annotations

from dataclasses import dataclass

from zarrpipe.bench.datasets import Dataset

THREADS = 2  # Python threads in the "-2t" workloads


@dataclass(frozen=True)
class Workload:
    name: str
    level: str  # "all": one call; "outer": chunks (shards when sharded); "inner": inner chunks
    mode: str  # "call": one call per piece; "threads": THREADS Python threads; "batch": batch API
    description: str

    def applies(self, dataset: Dataset) -> bool:
        return self.level != "inner" or dataset.inner is not None


WORKLOADS = {
    w.name: w
    for w in [
        Workload("all", "all", "call", "the whole array in one read call"),
        Workload(
            "chunks",
            "outer",
            "call",
            "chunk by chunk (shard by shard when sharded), one read call each, 1 thread",
        ),
        Workload(
            "chunks-2t",
            "outer",
            "threads",
            f"{THREADS} Python threads, each reading a contiguous half of the chunks "
            "(shards), one read call each",
        ),
        Workload(
            "chunks-batch",
            "outer",
            "batch",
            "all chunks in one call of the implementation's own batch API "
            "(skipped where it has none)",
        ),
        Workload(
            "inner",
            "inner",
            "call",
            "sharded only: inner chunk by inner chunk (64^3), one read call each, 1 thread",
        ),
        Workload(
            "inner-2t",
            "inner",
            "threads",
            f"sharded only: {THREADS} Python threads, each reading half of the inner chunks",
        ),
        Workload(
            "inner-batch",
            "inner",
            "batch",
            "sharded only: all inner chunks in one call of the batch API (where it has one)",
        ),
    ]
}
