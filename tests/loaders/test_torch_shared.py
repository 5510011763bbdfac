"""DataLoader workers gather batches into a pool of shared memory that the training process
maps (`zarrpipe._torch_shared`): a slot is reused only after every tensor over its batch is
gone, so batches the training loop keeps never change; the pool grows only while batches are
alive; values equal the in-process loader's."""

from __future__ import annotations

import gc
import multiprocessing
import pickle
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import FORK_WARNING

torch = pytest.importorskip("torch")
from zarrpipe._torch_shared import FREE, HELD, SlotPool  # noqa: E402
from zarrpipe.loader import BatchLoader  # noqa: E402
from zarrpipe.torch import ZarrDataset  # noqa: E402

N = 600


@pytest.fixture
def arrays(tmp_path: Path) -> tuple[zarrpipe.Array, zarrpipe.Array]:
    store = zarrpipe.Store(tmp_path)
    x = store.create_array("x", shape=(N, 8, 8), dtype="uint16", chunks=(32, 8, 8))
    x[...] = np.arange(N * 64).reshape(N, 8, 8).astype(np.uint16)
    y = store.create_array("y", shape=(N,), dtype="int64", chunks=(50,))
    y[...] = np.arange(N) * 3
    return x, y


def passed(handle) -> torch.Tensor:
    """The handle as the training process gets it: through torch's sharing pickler."""
    return pickle.loads(ForkingPickler.dumps(handle))


def test_a_slot_is_reused_only_after_its_last_view_is_gone():
    pool = SlotPool()
    first, out = pool.take((4, 3), np.dtype("uint16"))
    out[...] = np.arange(12).reshape(4, 3)
    t = passed(first)
    assert t.dtype == torch.uint16 and t.tolist() == np.arange(12).reshape(4, 3).tolist()
    assert first.slot.bytes[0] == HELD
    # While a view of the batch lives, the slot is held: the next batch takes a new one.
    view = t[1:3]
    del t
    gc.collect()
    assert first.slot.bytes[0] == HELD
    second, _ = pool.take((4, 3), np.dtype("uint16"))
    assert second.slot is not first.slot and len(pool) == 2
    assert view.tolist() == [[3, 4, 5], [6, 7, 8]]
    # Writes through the tensor reach the slot (it is the same memory, writable).
    view[0, 0] = 99
    assert int(first.slot.bytes[64 + 6]) == 99
    del view
    gc.collect()
    assert first.slot.bytes[0] == FREE
    # A smaller batch fits the freed slot; a larger one needs a new slot.
    third, small = pool.take((2, 3), np.dtype("uint16"))
    assert third.slot is first.slot and small.shape == (2, 3)
    fourth, _ = pool.take((40, 3), np.dtype("uint16"))
    assert fourth.slot not in (first.slot, second.slot) and len(pool) == 3


def test_types_torch_lacks_are_left_to_a_fresh_tensor():
    assert SlotPool().take((2,), np.dtype("M8[s]")) is None
    assert SlotPool().take((2,), np.dtype("U3")) is None


def _epoch(dataset, **kwargs) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if kwargs.get("num_workers"):
        kwargs["timeout"] = 120  # a hung worker fails the test instead of hanging it
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, **kwargs)
    return list(loader)


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings(FORK_WARNING)
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_batches_kept_by_the_training_loop_never_change(arrays, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    want = np.arange(N * 64).reshape(N, 8, 8).astype(np.uint16)
    dataset = ZarrDataset(list(arrays), 40, seed=2)
    # Every batch of the epoch kept (and some only as views): had a worker reused a slot
    # still in use, earlier batches would now hold later ones' samples.
    kept = _epoch(dataset, num_workers=2, multiprocessing_context=method)
    views = [(bx[::2], by[::2]) for bx, by in kept[::3]]
    del kept[::3]
    gc.collect()
    for bx, by in kept + views:
        samples = by.numpy() // 3
        np.testing.assert_array_equal(bx.numpy(), want[samples])
    seen = sorted(int(s) for _, by in kept for s in by.numpy() // 3)
    assert len(seen) == len(set(seen))
    # The same batches as the training process reading by itself.
    dataset.set_epoch(0)
    alone = sorted(tuple(by.tolist()) for _, by in _epoch(dataset, num_workers=0))
    dataset.set_epoch(0)
    shared = sorted(tuple(by.tolist()) for _, by in _epoch(dataset, num_workers=2))
    assert shared == alone
    assert sorted(s for b in shared for s in b) == (np.arange(N) * 3).tolist()


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_batches_are_writable_and_equal_without_shared_memory(arrays):
    dataset = ZarrDataset(list(arrays), 64, seed=7, shared_memory=False)
    plain = {tuple(by.tolist()): bx.numpy().copy() for bx, by in _epoch(dataset, num_workers=2)}
    dataset = ZarrDataset(list(arrays), 64, seed=7)
    for bx, by in _epoch(dataset, num_workers=2):
        np.testing.assert_array_equal(bx.numpy(), plain[tuple(by.tolist())])
        bx[0] = 1  # a writable tensor, as the in-process loader gives
    assert len(dataset) == len(plain) == len(BatchLoader(list(arrays), 64).indices())


def test_a_worker_decodes_on_its_share_of_the_cores(monkeypatch):
    """As torch gives each DataLoader worker one thread, a worker's pool gets the cores
    divided by the workers; ZARRPIPE_NUM_THREADS, when the user set it, wins."""
    import os

    from zarrpipe.torch import _share_cores

    before = zarrpipe.get_num_threads()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        monkeypatch.delenv("ZARRPIPE_NUM_THREADS", raising=False)
        _share_cores(2)
        assert zarrpipe.get_num_threads() == max(1, cores // 2)
        _share_cores(4 * cores)
        assert zarrpipe.get_num_threads() == 1
        monkeypatch.setenv("ZARRPIPE_NUM_THREADS", "3")
        zarrpipe.set_num_threads(before)
        _share_cores(2)
        assert zarrpipe.get_num_threads() == before
    finally:
        zarrpipe.set_num_threads(before)


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="lists POSIX shared memory in /dev/shm")
def test_no_segment_outlives_the_program(tmp_path):
    """Persistent workers are terminated at exit before their own finalizers run: the main
    process unlinks the slots it mapped, so nothing is left in /dev/shm and multiprocessing's
    resource tracker has nothing to warn about."""
    import subprocess
    import sys
    import textwrap

    store = zarrpipe.Store(tmp_path)
    x = store.create_array("x", shape=(256, 16), dtype="float32", chunks=(32, 16))
    x[...] = np.arange(256 * 16, dtype="float32").reshape(256, 16)
    before = {p.name for p in Path("/dev/shm").iterdir()}
    code = textwrap.dedent(f"""
        import torch.utils.data, zarrpipe
        from zarrpipe.torch import ZarrDataset
        ds = ZarrDataset(zarrpipe.Store({str(tmp_path)!r}).open_array("x"), 32, seed=1)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=2, persistent_workers=True, timeout=120
        )
        for epoch in range(2):
            ds.set_epoch(epoch)
            kept = [b for b in loader]
        print(sum(int(b.shape[0]) for b in kept))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "256"
    assert "leaked" not in done.stderr, done.stderr
    assert {p.name for p in Path("/dev/shm").iterdir()} - before == set()
