"""DLPack with the real frameworks, and the loader in their data pipelines: torch's and JAX's
two doors (the shared one, which torch imports writable although it is read-only; the moving
one, writable and zero-copy), memory freed with the framework's tensor, and
`zarrpipe.torch.ZarrDataset` in `DataLoader`s with 0 and 2 workers, forked and spawned,
persistent or not. Skipped without torch (or JAX)."""

from __future__ import annotations

import gc
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import FORK_WARNING
from zarrpipe.loader import BatchLoader

N = 600


def data_pointer(t: zarrpipe.Tensor) -> int:
    """The address of a Tensor's memory (the view is dropped at once, so the Tensor stays
    uniquely held)."""
    view = np.asarray(t)
    address = view.ctypes.data
    del view
    return address


def rss() -> int:
    psutil = pytest.importorskip("psutil")
    return psutil.Process().memory_info().rss


@pytest.fixture
def arrays(tmp_path: Path) -> tuple[zarrpipe.Array, zarrpipe.Array]:
    store = zarrpipe.Store(tmp_path)
    x = store.create_array("x", shape=(N, 8, 8), dtype="float32", chunks=(32, 8, 8))
    x[...] = np.arange(N * 64, dtype=np.float32).reshape(N, 8, 8)
    y = store.create_array("y", shape=(N,), dtype="int64", chunks=(50,))
    y[...] = np.arange(N) * 3
    return x, y


# ---------------------------------------------------------------------------------------------
# torch


def test_torch_shared_door_is_zero_copy_and_torch_ignores_read_only(arrays):
    torch = pytest.importorskip("torch")
    x, _ = arrays
    t = x.read(np.s_[0:4])
    address = data_pointer(t)
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == address
    # The capsule says READ_ONLY; torch imports it writable anyway (documented in the
    # tensor guide): a write through it changes what every other view sees.
    tt[0, 0, 0] = -1.0
    assert t.to_numpy()[0, 0, 0] == -1.0
    with pytest.raises(BufferError, match="shared"):
        t.into_dlpack()  # torch's view still holds the buffer


def test_torch_moving_door_is_writable_and_zero_copy(arrays):
    torch = pytest.importorskip("torch")
    x, _ = arrays
    t = x.read(np.s_[2:6])
    address = data_pointer(t)
    tt = torch.from_dlpack(t.into_dlpack())
    assert tt.data_ptr() == address
    tt += 1
    assert tt[0, 0, 0].item() == 2 * 64 + 1
    with pytest.raises(BufferError, match="consumed"):
        t.to_numpy()


def test_loader_batches_reach_torch_without_a_copy(arrays):
    pytest.importorskip("torch")
    from zarrpipe.torch import to_torch

    x, y = arrays
    for bx, by in BatchLoader([x, y], 64, seed=1):
        addresses = data_pointer(bx), data_pointer(by)
        tx, ty = to_torch((bx, by))
        assert (tx.data_ptr(), ty.data_ptr()) == addresses
        np.testing.assert_array_equal(tx.numpy(), np.arange(N * 64).reshape(N, 8, 8)[ty // 3])


def test_torch_frees_a_batch_with_its_tensor(tmp_path):
    torch = pytest.importorskip("torch")
    store = zarrpipe.Store(tmp_path)
    big = store.create_array("big", shape=(64, 1024, 1024), dtype="float32", chunks=(8, 1024, 1024))
    big[...] = 1.0
    gc.collect()
    before = rss()
    tt = torch.from_dlpack(next(iter(BatchLoader(big, 64, prefetch=0))).into_dlpack())
    held = rss()
    assert held - before > 200 << 20  # the 256 MiB batch is resident ...
    del tt
    gc.collect()
    assert held - rss() > 200 << 20  # ... and returned when torch drops the tensor


def test_thousands_of_torch_batches_do_not_leak(arrays):
    pytest.importorskip("torch")
    from zarrpipe.torch import to_torch

    x, y = arrays
    loader = BatchLoader([x, y], 16, seed=2)

    def one_epoch() -> int:
        n = 0
        for batch in loader:
            tx, ty = to_torch(batch)
            n += int(ty.shape[0]) + int(tx.shape[0]) * 0
        return n

    for e in range(3):  # warm up the allocator and the pools
        loader.set_epoch(e)
        one_epoch()
    gc.collect()
    before = rss()
    batches = 0
    for e in range(3, 3 + 60):  # 60 epochs of 38 batches: 2,280 batches, ~35 MiB of data
        loader.set_epoch(e)
        assert one_epoch() == N
        batches += len(loader)
    gc.collect()
    assert batches > 2000
    growth = rss() - before
    assert growth < 16 << 20, f"RSS grew by {growth >> 20} MiB over {batches} batches"


# ---------------------------------------------------------------------------------------------
# torch DataLoader


def _epoch_via(dataset, **kwargs) -> list[tuple[int, ...]]:
    """An epoch through a DataLoader: the batches' samples (from the labels), each batch's
    inputs checked against NumPy."""
    import torch.utils.data

    want_x = np.arange(N * 64, dtype=np.float32).reshape(N, 8, 8)
    if kwargs.get("num_workers"):
        kwargs["timeout"] = 120  # a hung worker fails the test instead of hanging it
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, **kwargs)
    out = []
    for bx, by in loader:
        samples = (by.numpy() // 3).astype(np.int64)
        np.testing.assert_array_equal(bx.numpy(), want_x[samples])
        out.append(tuple(samples.tolist()))
    return out


def test_dataloader_in_process_batches(arrays):
    pytest.importorskip("torch")
    from zarrpipe.torch import ZarrDataset

    dataset = ZarrDataset(list(arrays), 64, seed=3)
    batches = _epoch_via(dataset, num_workers=0)
    assert len(batches) == len(dataset) == -(-N // 64)
    assert sorted(s for b in batches for s in b) == list(range(N))
    want = BatchLoader(list(arrays), 64, seed=3).indices()
    assert batches == [tuple(i.tolist()) for i in want]


def test_string_batches_pass_through_to_torch_and_jax(arrays, tmp_path):
    """A string array's batches stay NumPy arrays next to the torch (or JAX) tensors of the
    fixed-size arrays: neither framework has a string type."""
    torch = pytest.importorskip("torch")
    from zarrpipe.torch import ZarrDataset

    names = np.array([f"n{i}" for i in range(N)])
    s = zarrpipe.Store(tmp_path).create_array("s", shape=(N,), dtype=str, chunks=(40,))
    s[...] = names
    x, _ = arrays
    dataset = ZarrDataset([x, s], 50, seed=1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0)
    for (bx, bs), idx in zip(loader, BatchLoader([x, s], 50, seed=1).indices(), strict=True):
        assert isinstance(bx, torch.Tensor) and isinstance(bs, np.ndarray)
        np.testing.assert_array_equal(bx.numpy(), np.asarray(x[...])[idx])
        assert bs.tolist() == names[idx].tolist()
    jax_mod = pytest.importorskip("zarrpipe.jax")
    bx, bs = jax_mod.to_jax(next(iter(BatchLoader([x, s], 50, seed=1))))
    assert isinstance(bs, np.ndarray) and not isinstance(bx, np.ndarray)


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings(FORK_WARNING)
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_after_the_parent_has_read(arrays, method):
    pytest.importorskip("torch")
    from zarrpipe.torch import ZarrDataset

    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    dataset = ZarrDataset(list(arrays), 50, seed=4, drop_last=True)
    in_process = _epoch_via(dataset, num_workers=0)  # the parent reads first
    dataset.set_epoch(0)
    workers = _epoch_via(dataset, num_workers=2, multiprocessing_context=method)
    # The workers split the same batches between them: none lost, none repeated.
    assert sorted(workers) == sorted(in_process)
    assert len(workers) == len(dataset) == N // 50


@pytest.mark.timeout(600)
@pytest.mark.filterwarnings(FORK_WARNING)
def test_persistent_workers_advance_the_epoch(arrays):
    pytest.importorskip("torch")
    import torch.utils.data
    from zarrpipe.torch import ZarrDataset

    dataset = ZarrDataset(list(arrays), 40, seed=5)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=2, persistent_workers=True, timeout=120
    )
    epochs = []
    for e in range(2):
        dataset.set_epoch(e)  # not seen by persistent workers; they advance by themselves
        epochs.append(sorted(tuple((by.numpy() // 3).tolist()) for _, by in loader))
    for e in range(2):
        want = BatchLoader(list(arrays), 40, seed=5)
        want.set_epoch(e)
        assert epochs[e] == sorted(tuple(i.tolist()) for i in want.indices())
    assert epochs[0] != epochs[1]


def test_dataset_ranks_split_like_distributed_sampler(arrays):
    pytest.importorskip("torch")
    from zarrpipe.torch import ZarrDataset

    seen = []
    for rank in range(4):
        seen += [s for b in _epoch_via(ZarrDataset(list(arrays), 64, rank=rank, world_size=4),
                                       num_workers=0) for s in b]  # fmt: skip
    assert sorted(seen) == list(range(N))  # 600 = 4 x 150: no padding needed


# ---------------------------------------------------------------------------------------------
# JAX and NumPy


def test_jax_doors(arrays):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x, _ = arrays
    shared = x.read(np.s_[0:4])
    j = jnp.from_dlpack(shared)
    np.testing.assert_array_equal(np.asarray(j), shared.to_numpy())
    assert j.devices() == {jax.devices("cpu")[0]}
    # JAX does not alias memory flagged READ_ONLY: the shared door is a copy (documented in
    # the training guide; if this starts to fail, JAX learned to share and the guide is stale).
    assert j.unsafe_buffer_pointer() != data_pointer(shared)
    # XLA's CPU client adopts a DLPack buffer only at 64-byte alignment and copies any
    # other. A loader batch starts at a multiple of 64, so JAX keeps it as it is ...
    batch = next(iter(BatchLoader(x, 8, shuffle=False, prefetch=0)))
    address = data_pointer(batch)
    assert address % 64 == 0
    k = jnp.from_dlpack(batch.into_dlpack())
    assert k.unsafe_buffer_pointer() == address
    np.testing.assert_array_equal(np.asarray(k), np.arange(8 * 64).reshape(8, 8, 8))
    # ... and so does every other fresh read.
    read = x.read(np.s_[4:8])
    address = data_pointer(read)
    assert address % 64 == 0
    moved = jnp.from_dlpack(read.into_dlpack())
    assert moved.unsafe_buffer_pointer() == address
    np.testing.assert_array_equal(np.asarray(moved), np.arange(4 * 64, 8 * 64).reshape(4, 8, 8))


def test_jax_batches_from_the_loader(arrays):
    pytest.importorskip("jax")
    from zarrpipe.jax import batches

    x, y = arrays
    loader = BatchLoader([x, y], 64, seed=6)
    seen = []
    for (jx, jy), idx in zip(batches(loader), loader.indices(), strict=True):
        np.testing.assert_array_equal(np.asarray(jy), np.arange(N)[idx] * 3)
        np.testing.assert_array_equal(
            np.asarray(jx), np.arange(N * 64, dtype=np.float32).reshape(N, 8, 8)[idx]
        )
        seen += idx.tolist()
    assert sorted(seen) == list(range(N))


def test_numpy_doors(arrays):
    x, _ = arrays
    t = x.read(np.s_[0:2])
    address = data_pointer(t)
    view = np.from_dlpack(t)
    assert view.ctypes.data == address
    honours_read_only = np.lib.NumpyVersion(np.__version__) >= "2.2.5"
    if honours_read_only:
        assert not view.flags.writeable
    del view
    owned = np.from_dlpack(t.into_dlpack())
    assert owned.ctypes.data == address
    if honours_read_only:
        assert owned.flags.writeable
