"""zarrpipe.loader.BatchLoader: every sample once per epoch (per rank, with padding across
ranks), batches equal to NumPy's gather of their indices, deterministic per seed and epoch,
each chunk decoded once per epoch, read-ahead bounded and stopped on early exit or error,
and loaders, arrays and stores that pickle into forked and spawned processes."""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarrpipe
from support.zarr_stores import FORK_WARNING
from zarrpipe.loader import BatchLoader

N = 1000  # not a multiple of the chunk length: the last chunk is partial


def x_values() -> np.ndarray:
    return np.arange(N * 12, dtype=np.uint16).reshape(N, 3, 4)


def y_values() -> np.ndarray:
    return np.arange(N, dtype=np.int64) * 7


@pytest.fixture(params=["chunked", "sharded"])
def data(request, tmp_path: Path) -> Path:
    """x (N, 3, 4) uint16 in chunks of 64 samples (or inner chunks of 64 in shards of 256),
    y (N,) int64 in chunks of 100, in one store."""
    (tmp_path / "d.zarr").mkdir()
    store = zarrpipe.Store(tmp_path / "d.zarr")
    shards = (256, 3, 4) if request.param == "sharded" else None
    x = store.create_array("x", shape=x_values().shape, dtype="uint16", chunks=(64, 3, 4),
                           shards=shards)  # fmt: skip
    x[...] = x_values()
    y = store.create_array("y", shape=(N,), dtype="int64", chunks=(100,))
    y[...] = y_values()
    return tmp_path / "d.zarr"


def open_xy(path: Path, **kwargs: Any) -> tuple[zarrpipe.Array, zarrpipe.Array]:
    store = zarrpipe.Store(path, **kwargs)
    return store.open_array("x"), store.open_array("y")


def epoch(loader: BatchLoader) -> list[tuple[np.ndarray, np.ndarray]]:
    """One epoch as NumPy arrays (each batch moved out with the writable door)."""
    out = []
    for x, y in loader:
        out.append((np.from_dlpack(x.into_dlpack()), np.from_dlpack(y.into_dlpack())))
    return out


def samples_of(batches: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The sample numbers, recovered from the data (y = 7 * sample)."""
    return np.concatenate([y // 7 for _, y in batches]) if batches else np.arange(0)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_sample_once_and_batches_equal_numpy(data, shuffle, drop_last):
    x, y = open_xy(data)
    loader = BatchLoader([x, y], 48, shuffle=shuffle, seed=3, drop_last=drop_last)
    batches = epoch(loader)
    assert len(batches) == len(loader) == (N // 48 if drop_last else -(-N // 48))
    assert all(len(b[1]) == 48 for b in batches[:-1])
    got = samples_of(batches)
    if drop_last:
        assert len(got) == N - N % 48 and len(np.unique(got)) == len(got)
    else:
        assert np.array_equal(np.sort(got), np.arange(N))
    if not shuffle:
        assert np.array_equal(got, np.arange(len(got)))
    else:
        assert not np.array_equal(got, np.sort(got)), "a shuffled epoch came out in order"
    for (bx, by), idx in zip(batches, loader.indices(), strict=True):
        np.testing.assert_array_equal(bx, x_values()[idx])
        np.testing.assert_array_equal(by, y_values()[idx])


def test_ranks_are_disjoint_and_cover_with_distributed_sampler_padding(data):
    x, y = open_xy(data)
    world = 3
    per_rank = []
    for rank in range(world):
        loader = BatchLoader([x, y], 50, seed=1, rank=rank, world_size=world)
        batches = epoch(loader)
        assert len(batches) == len(loader) == -(-334 // 50)
        per_rank.append(samples_of(batches))
    assert [len(s) for s in per_rank] == [334] * world  # ceil(1000 / 3), as DistributedSampler
    everything = np.concatenate(per_rank)
    assert np.array_equal(np.unique(everything), np.arange(N))
    # DistributedSampler pads 1002 - 1000 = 2 samples, repeated from the start of the epoch.
    values, counts = np.unique(everything, return_counts=True)
    assert sorted(values[counts > 1].tolist()) == sorted(per_rank[0][:2].tolist())
    assert counts.max() == 2


def test_same_seed_and_epoch_same_batches_and_epochs_differ(data):
    x, y = open_xy(data)
    a = samples_of(epoch(BatchLoader([x, y], 32, seed=5)))
    b = samples_of(epoch(BatchLoader([x, y], 32, seed=5)))
    assert np.array_equal(a, b)
    loader = BatchLoader([x, y], 32, seed=5)
    loader.set_epoch(1)
    assert loader.epoch == 1
    one = samples_of(epoch(loader))
    assert not np.array_equal(a, one)
    assert np.array_equal(np.sort(one), np.arange(N))
    loader.set_epoch(0)
    assert np.array_equal(samples_of(epoch(loader)), a)
    other_seed = samples_of(epoch(BatchLoader([x, y], 32, seed=6)))
    assert not np.array_equal(a, other_seed)


def test_the_shuffle_stays_within_windows_of_chunks(data):
    """Each batch of 64 draws from at most two windows of 4 chunks of 64: 512 samples."""
    x, _ = open_xy(data)
    loader = BatchLoader(x, 64, seed=2, shuffle_window=4)
    for idx in loader.indices():
        chunks = np.unique(idx // 64)
        assert len(chunks) <= 8, chunks


@pytest.mark.parametrize("window", [1, 4, 100])
def test_each_chunk_is_decoded_once_per_epoch(data, window):
    store = zarrpipe.Store(data, cache_bytes=1 << 30)  # the cache counts every decode
    x = store.open_array("x")
    for _ in BatchLoader(x, 48, seed=9, shuffle_window=window):
        pass
    info = store.cache_info()
    chunks = int(np.prod(x.chunk_grid_shape))
    assert info["misses"] == chunks, info  # every chunk decoded ...
    assert info["hits"] == 0, info  # ... and never asked for again


def test_sample_axis_other_than_zero(tmp_path):
    store = zarrpipe.Store(tmp_path)
    values = np.arange(3 * 250, dtype=np.float32).reshape(3, 250)
    z = store.create_array("z", shape=values.shape, dtype="float32", chunks=(2, 40))
    z[...] = values
    loader = BatchLoader(z, 30, seed=4, sample_axis=1)
    got = [np.from_dlpack(t.into_dlpack()) for t in loader]
    assert [g.shape for g in got] == [(3, 30)] * 8 + [(3, 10)]
    for g, idx in zip(got, loader.indices(), strict=True):
        np.testing.assert_array_equal(g, values[:, idx])


def test_arrays_from_two_stores_with_different_grids(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = zarrpipe.Store(tmp_path / "a").create_array("a", shape=(300, 2), dtype="int32",
                                                    chunks=(7, 1))  # fmt: skip
    b = zarrpipe.Store(tmp_path / "b").create_array("b", shape=(300,), dtype="float64",
                                                    chunks=(300,))  # fmt: skip
    av = np.arange(600, dtype=np.int32).reshape(300, 2)
    bv = np.arange(300) / 4
    a[...], b[...] = av, bv
    loader = BatchLoader((a, b), 25, seed=8, shuffle_window=3)
    for (ta, tb), idx in zip(loader, loader.indices(), strict=True):
        np.testing.assert_array_equal(ta.to_numpy(), av[idx])
        np.testing.assert_array_equal(tb.to_numpy(), bv[idx])


def test_batches_are_unique_tensors(data):
    x, y = open_xy(data)
    for bx, by in BatchLoader([x, y], 100, prefetch=3):
        assert isinstance(bx, zarrpipe.Tensor) and isinstance(by, zarrpipe.Tensor)
        arr = np.from_dlpack(bx.into_dlpack())
        assert arr.flags.writeable
        arr += 1  # ours alone
        np.from_dlpack(by.into_dlpack())


def test_a_single_array_gives_tensors_not_tuples(data):
    x, _ = open_xy(data)
    first = next(iter(BatchLoader(x, 10, prefetch=0)))
    assert isinstance(first, zarrpipe.Tensor) and first.shape == (10, 3, 4)


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "zarrpipe-prefetch"]


def test_read_ahead_is_bounded_and_fills_up(data):
    x, y = open_xy(data)
    it = iter(BatchLoader([x, y], 20, prefetch=3))
    assert it.read_ahead <= 3
    next(it)
    # Wait for the reader to fill its slots (it has 49 batches to go): it must stop at 3.
    for _ in range(6000):
        if it.read_ahead == 3:
            break
        threading.Event().wait(0.01)
    assert it.read_ahead == 3
    for _ in range(10):
        next(it)
        assert it.read_ahead <= 3
    it.close()


def test_stopping_early_stops_the_reader_and_frees_its_batches(data):
    x, y = open_xy(data)
    before = len(_prefetch_threads())
    it = iter(BatchLoader([x, y], 20, prefetch=4))
    next(it)
    it.close()
    assert it.read_ahead == 0
    assert len(_prefetch_threads()) == before
    with pytest.raises(StopIteration):
        next(it)
    for _ in BatchLoader([x, y], 20, prefetch=4):
        break  # leaving the loop drops the iterator, which stops its thread
    assert len(_prefetch_threads()) == before


def test_an_error_in_the_training_loop_stops_the_reader(data):
    x, y = open_xy(data)
    before = len(_prefetch_threads())
    with pytest.raises(RuntimeError, match="the model failed"):
        for _ in BatchLoader([x, y], 20, prefetch=4):
            raise RuntimeError("the model failed")
    assert len(_prefetch_threads()) == before


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_corrupt_chunk_raises_decode_error_from_next(tmp_path, prefetch):
    store = zarrpipe.Store(tmp_path)
    x = store.create_array("x", shape=(200, 4), dtype="uint16", chunks=(50, 4))
    x[...] = np.ones((200, 4), dtype=np.uint16)
    (tmp_path / "x" / "c" / "2" / "0").write_bytes(b"not zstd at all")
    before = len(_prefetch_threads())
    with pytest.raises(zarrpipe.DecodeError, match="x/c/2/0"):
        for _ in BatchLoader(x, 10, shuffle=False, prefetch=prefetch):
            pass
    assert len(_prefetch_threads()) == before


def test_bad_arguments_are_clear_errors(data):
    x, y = open_xy(data)
    with pytest.raises(TypeError, match=r"BatchLoader reads zarrpipe\.Array objects, not ndarray"):
        BatchLoader(np.zeros(3), 2)
    with pytest.raises(ValueError, match="at least one array"):
        BatchLoader([], 2)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        BatchLoader(x, 0)
    with pytest.raises(TypeError, match="batch_size must be an integer, not float"):
        BatchLoader(x, 2.5)
    with pytest.raises(ValueError, match=r"rank must be in range\(world_size=2\), got 2"):
        BatchLoader(x, 2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="sample_axis 1 is out of range for array 'y'"):
        BatchLoader([x, y], 2, sample_axis=1)
    z = zarrpipe.Store(data).create_array("z", shape=(5,), dtype="int8", chunks=(5,))
    with pytest.raises(ValueError, match=r"arrays differ in length along axis 0 \('x': 1000"):
        BatchLoader([x, z], 2)
    loader = BatchLoader(x, 2)
    with pytest.raises(ValueError, match="epoch must be at least 0, got -1"):
        loader.set_epoch(-1)


# ---------------------------------------------------------------------------------------------
# pickling


def test_store_and_array_pickle(data, tmp_path, monkeypatch):
    monkeypatch.chdir(data.parent)
    store = zarrpipe.Store("d.zarr", mode="r", cache_bytes=1 << 20)  # a relative path
    x, y = store.open_array("x"), store.open_array("y")
    monkeypatch.chdir(tmp_path.parent)  # unpickling elsewhere still finds the store
    x2, y2 = pickle.loads(pickle.dumps((x, y)))
    assert isinstance(x2, zarrpipe.Array) and x2.path == "x" and x2.shape == x.shape
    np.testing.assert_array_equal(x2[...], x_values())
    np.testing.assert_array_equal(y2[...], y_values())
    store2 = pickle.loads(pickle.dumps(store))
    assert store2.read_only and store2.cache_info()["capacity"] == 1 << 20
    with pytest.raises(PermissionError):
        store2.write("y", np.s_[0:1], [1])


def test_an_array_opened_with_given_metadata_pickles_with_it(data):
    store = zarrpipe.Store(data)
    meta = (data / "y" / "zarr.json").read_text()
    y = store.open_array("y", metadata=meta, write_empty_chunks=True)
    y2 = pickle.loads(pickle.dumps(y))
    assert y2.write_empty_chunks
    np.testing.assert_array_equal(y2[:5], y_values()[:5])


def test_a_loader_pickles_with_its_settings(data):
    x, y = open_xy(data)
    loader = BatchLoader([x, y], 64, seed=11, rank=1, world_size=2, prefetch=1)
    loader.set_epoch(3)
    copy = pickle.loads(pickle.dumps(loader))
    assert copy.epoch == 3 and len(copy) == len(loader)
    assert np.array_equal(samples_of(epoch(copy)), samples_of(epoch(loader)))


# ---------------------------------------------------------------------------------------------
# forked and spawned processes (DataLoader workers), after the parent has read


def _child_epoch(loader: BatchLoader, out: Any) -> None:
    try:
        out.put(("ok", samples_of(epoch(loader)).tolist()))
    except BaseException as e:
        out.put(("error", repr(e)))


@pytest.mark.timeout(180)
@pytest.mark.filterwarnings(FORK_WARNING)
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_process_reads_after_the_parent_has_read(data, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} here")
    x, y = open_xy(data, cache_bytes=1 << 20)
    loader = BatchLoader([x, y], 40, seed=12, prefetch=2)
    want = samples_of(epoch(loader))  # the decoding threads and the cache exist now
    it = iter(loader)
    next(it)  # and a reader thread is running in the parent
    ctx = multiprocessing.get_context(method)
    out = ctx.Queue()
    proc = ctx.Process(target=_child_epoch, args=(loader, out))
    proc.start()
    try:
        result = out.get(timeout=120)
    except queue.Empty:
        proc.kill()
        pytest.fail(f"{method}ed child did not report (deadlocked?)")
    finally:
        it.close()
    proc.join(timeout=60)
    assert result[0] == "ok", result
    assert np.array_equal(np.array(result[1]), want)
    assert proc.exitcode == 0
    assert np.array_equal(samples_of(epoch(loader)), want)  # the parent still reads


# ---------------------------------------------------------------------------------------------
# variable-length arrays, and arrays in an object store


def test_variable_length_arrays_give_numpy_batches(tmp_path):
    """Strings (v3 `string`, v2 `|O` with vlen-utf8, both written by zarr-python) and bytes
    next to a fixed-size array: each batch holds NumPy arrays of the batch's samples."""
    import zarr
    from support.zarr_stores import quiet_zarr_writes
    from zarr.core.dtype import VariableLengthBytes

    n = 230
    words = np.array([f"sample-{i}-" + "é" * (i % 7) for i in range(n)], dtype=object)
    blobs = np.array([bytes(range(i % 11)) * 3 for i in range(n)], dtype=object)
    with quiet_zarr_writes():
        g = zarr.open_group(tmp_path / "v.zarr", mode="w")
        g.create_array("s3", shape=(n,), chunks=(32,), dtype=str)[:] = words
        g.create_array("b3", shape=(n,), chunks=(50,), dtype=VariableLengthBytes())[:] = blobs
        zarr.create_array(tmp_path / "v2.zarr", shape=(n,), chunks=(17,), dtype=str,
                          zarr_format=2)[:] = words  # fmt: skip
    store = zarrpipe.Store(tmp_path / "v.zarr")
    x = store.create_array("x", shape=(n, 2), dtype="int32", chunks=(40, 2))
    x[...] = np.arange(n * 2, dtype=np.int32).reshape(n, 2)
    arrays = [x, store.open_array("s3"), store.open_array("b3"),
              zarrpipe.Store(tmp_path / "v2.zarr").open_array("")]  # fmt: skip
    loader = BatchLoader(arrays, 24, seed=3)
    seen = []
    for (bx, bs, bb, bv2), idx in zip(loader, loader.indices(), strict=True):
        assert isinstance(bx, zarrpipe.Tensor)
        assert all(isinstance(b, np.ndarray) for b in (bs, bb, bv2))
        np.testing.assert_array_equal(np.asarray(bx)[:, 0] // 2, idx)
        assert bs.tolist() == words[idx].tolist()
        assert bb.tolist() == blobs[idx].tolist()
        assert bv2.tolist() == words[idx].tolist()
        seen.append(idx)
    assert sorted(np.concatenate(seen).tolist()) == list(range(n))


def test_a_loader_over_an_object_store(data):
    """Windows are read through an S3 store (moto) as through a local one."""
    pytest.importorskip("boto3")
    from support.remote_servers import moto_s3, upload_dir

    keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    with moto_s3() as endpoint:
        upload_dir(endpoint, "loader", data, "d.zarr")
        options = {"aws_endpoint": endpoint, "allow_http": "true", "aws_region": "us-east-1",
                   **keys}  # fmt: skip
        store = zarrpipe.Store("s3://loader/d.zarr", options=options)
        loader = BatchLoader([store.open_array("x"), store.open_array("y")], 48, seed=5)
        batches = epoch(loader)
        gets = store.request_counts()["gets"]
    assert np.array_equal(np.sort(samples_of(batches)), np.arange(N))
    for (bx, by), idx in zip(batches, loader.indices(), strict=True):
        np.testing.assert_array_equal(bx, x_values()[idx])
        np.testing.assert_array_equal(by, y_values()[idx])
    # Objects are fetched per window, not per batch: x's 16 chunks once each (or its 4
    # shards' index and inner chunks), y's 10 chunks once or twice (one that straddles two
    # windows is read by both), and the metadata (measured: 43 chunked, 35 sharded). Reading
    # a window of 4 x chunks again for each of the 21 batches would take at least 84.
    assert gets <= 2 * (16 + 10)
