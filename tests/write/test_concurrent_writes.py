"""Concurrent writers never lose each other's updates: N writers rewrite only their own rows
of one shard (or of one Zarr v2 chunk) many times at once, as threads, as spawned processes,
through zarr-python on zarrpipe's pipeline, mixed with each other and with TensorStore, on
local directories and on S3; afterwards every writer's last value is there.

The scenario is `benches/lost_updates.py` (which also counts what other writers lose:
BENCHMARKS.md). A writer that fails or hangs fails the test.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarrpipe
from support.remote_servers import http_server, moto_s3

# The scenario is a benchmark script, not library code: imported from benches/ (spawned
# writers find it there too: a spawned process starts with this one's sys.path).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
import lost_updates as lu

pytestmark = pytest.mark.timeout(600)

LAYOUTS = ["shard", "chunk"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_threads_lose_nothing(tmp_path, layout):
    assert lu.run("zarrpipe", str(tmp_path), layout, writers=8, rounds=20, threads=True) == []


def test_threads_on_a_one_thread_pool_lose_nothing(tmp_path):
    # Writers wait for each other's turns on the pool's only thread's jobs: no deadlock.
    before = zarrpipe.get_num_threads()
    zarrpipe.set_num_threads(1)
    try:
        assert lu.run("zarrpipe", str(tmp_path), "shard", writers=4, rounds=10, threads=True) == []
    finally:
        zarrpipe.set_num_threads(before)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_processes_lose_nothing(tmp_path, layout):
    assert lu.run("zarrpipe", str(tmp_path), layout, writers=6, rounds=15) == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_zarr_python_on_the_pipeline_loses_nothing(tmp_path, layout):
    pytest.importorskip("zarr")
    assert lu.run("zarr+zarrpipe", str(tmp_path), layout, writers=6, rounds=15) == []


def test_native_and_zarr_python_writers_lose_nothing_together(tmp_path):
    pytest.importorskip("zarr")
    kinds = ["zarrpipe", "zarr+zarrpipe"] * 3
    assert lu.run("mixed", str(tmp_path), "shard", writers=6, rounds=15, kinds=kinds) == []


def test_zarrpipe_and_tensorstore_exclude_each_other(tmp_path):
    # Both take the same lock file (TensorStore's file kvstore protocol).
    pytest.importorskip("tensorstore")
    kinds = ["zarrpipe", "tensorstore"] * 3
    assert lu.run("mixed", str(tmp_path), "shard", writers=6, rounds=15, kinds=kinds) == []


# ------------------------------------------------------------------ every selection kind


def _rows(w: int) -> np.ndarray:
    return np.arange(w * lu.ROWS, (w + 1) * lu.ROWS)


def _selection_writers(kind: str, arr):
    """A function (writer, block) that writes `block` into the writer's rows with `kind`."""
    width = lu.shape_of(8)[1]

    def write(w: int, block: np.ndarray) -> None:
        rows = _rows(w)
        if kind == "oindex":
            arr.oindex[list(rows), :] = block
        elif kind == "vindex":
            r, c = np.meshgrid(rows, np.arange(width), indexing="ij")
            arr.vindex[r.ravel(), c.ravel()] = block.ravel()
        elif kind == "mask":
            mask = np.zeros(lu.shape_of(8), dtype=bool)
            mask[rows] = True
            arr.vindex[mask] = block.ravel()
        elif kind == "step":
            arr[rows[0] : rows[-1] + 1 : 1, ::1] = block
            arr[rows[0] : rows[-1] + 1 : 2, ::2] = block[::2, ::2]
        elif kind == "async":
            asyncio.run(arr.write_async((slice(rows[0], rows[-1] + 1),), block))
        else:
            raise AssertionError(kind)

    return write


def _zarr_array(root: Path):
    return lu.open_zarr(str(root), "zarr+zarrpipe")


def _threads(n: int, body) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(w: int) -> None:
        try:
            barrier.wait()
            body(w)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a writer hangs"
    assert not errors, errors


@pytest.mark.parametrize("door", ["native", "zarr-python"])
@pytest.mark.parametrize("kind", ["oindex", "vindex", "mask", "step", "async"])
def test_writes_of_every_selection_kind_lose_nothing(tmp_path, door, kind):
    if door == "zarr-python":
        pytest.importorskip("zarr")
        if kind == "async":
            pytest.skip("zarr-python's Array has no write_async")
    lu.create(str(tmp_path), "shard", 8)
    rounds = 10

    def body(w: int) -> None:
        arr = (
            zarrpipe.Store(tmp_path).open_array("a") if door == "native" else _zarr_array(tmp_path)
        )
        write = _selection_writers(kind, arr)
        for r in range(rounds):
            write(w, np.full((lu.ROWS, 64), lu.value(w, r), dtype="int32"))

    with warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        _threads(8, body)
    assert lu.lost(str(tmp_path), 8, rounds) == []


@pytest.mark.parametrize("door", ["native", "zarr-python"])
def test_string_writers_lose_nothing(tmp_path, door):
    zarr = pytest.importorskip("zarr")
    shape = lu.shape_of(4)
    zarr.create_array(
        str(tmp_path), name="a", shape=shape, dtype=str, chunks=(lu.ROWS, 64), shards=shape
    )
    rounds = 8

    def body(w: int) -> None:
        arr = (
            zarrpipe.Store(tmp_path).open_array("a") if door == "native" else _zarr_array(tmp_path)
        )
        rows = slice(w * lu.ROWS, (w + 1) * lu.ROWS)
        for r in range(rounds):
            arr[rows] = np.full((lu.ROWS, 64), f"w{w}-r{r}", dtype=object)

    with warnings.catch_warnings():
        warnings.simplefilter("error", zarrpipe.FallbackWarning)
        _threads(4, body)
    got = np.asarray(zarr.open_array(str(tmp_path), path="a")[...])
    for w in range(4):
        assert (got[w * lu.ROWS : (w + 1) * lu.ROWS] == f"w{w}-r{rounds - 1}").all(), w


# ------------------------------------------------------------------ a killed holder

LOCK_AND_WAIT = """
import fcntl, sys, time
with open(sys.argv[1], "a+b") as f:
    fcntl.lockf(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(600)
"""


def test_a_killed_lock_holder_does_not_block_the_others(tmp_path):
    """A process holding a key's lock (as a writer killed mid-write does) is SIGKILLed:
    the writers waiting for that key then finish, and their values are stored."""
    lu.create(str(tmp_path), "shard", 4)
    shard = tmp_path / "a" / "c" / "0" / "0"
    lock = Path(f"{shard}.__lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(
        [sys.executable, "-c", LOCK_AND_WAIT, str(lock)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            arr = zarrpipe.Store(tmp_path).open_array("a")
            done = threading.Event()

            def write() -> None:
                arr[0 : lu.ROWS] = 7
                done.set()

            writer = threading.Thread(target=write)
            writer.start()
            # The write cannot finish while another process holds the key.
            assert not done.wait(1.0)
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(30)
    writer.join(60)
    assert done.is_set(), "the writer still waits after the holder was killed"
    got = zarrpipe.Store(tmp_path).open_array("a").read().to_numpy()
    assert (got[: lu.ROWS] == 7).all() and (got[lu.ROWS :] == 0).all()
    assert not lock.exists()


# ------------------------------------------------------------------ object stores

KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server answering one request at a time (conditional writes atomic, as on
    S3) with a bucket; yields the store options."""
    boto3 = pytest.importorskip("boto3")
    with moto_s3(one_request_at_a_time=True) as endpoint:
        boto3.client("s3", endpoint_url=endpoint, **_boto_keys()).create_bucket(Bucket="writes")
        yield {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}


def _boto_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "region_name": "us-east-1",
    }


@pytest.mark.parametrize("layout", LAYOUTS)
def test_s3_threads_lose_nothing(s3, layout):
    url = f"s3://writes/threads-{layout}"
    assert lu.run("zarrpipe", url, layout, writers=6, rounds=8, threads=True, options=s3) == []


def test_s3_processes_lose_nothing(s3):
    # Processes do not share turns: every conflict goes through If-Match and a retry.
    url = "s3://writes/processes"
    assert lu.run("zarrpipe", url, "shard", writers=4, rounds=8, options=s3) == []


def test_s3_zarr_python_on_the_pipeline_loses_nothing(s3):
    pytest.importorskip("zarr")
    pytest.importorskip("obstore")
    kinds = ["zarr+zarrpipe", "zarrpipe"] * 2
    url = "s3://writes/pipeline"
    assert lu.run("mixed", url, "shard", writers=4, rounds=8, kinds=kinds, options=s3) == []


HTTP = {"allow_http": "true"}


def test_stores_without_conditional_writes_refuse_or_warn(tmp_path):
    """Plain HTTP cannot write conditionally: a write of part of a chunk raises, unless the
    store was opened to write unconditionally, which warns and writes."""
    lu.create(str(tmp_path), "chunk", 2)
    with http_server(tmp_path) as (base, _):
        arr = zarrpipe.Store(f"{base}/", mode="a", options=HTTP).open_array("a")
        with pytest.raises(zarrpipe.UnsupportedError, match='conditional_writes="warn"'):
            arr[0:1] = 5
        assert (np.asarray(zarrpipe.Store(tmp_path).read("a")) == 0).all()
        arr = zarrpipe.Store(
            f"{base}/", mode="a", options=HTTP, conditional_writes="warn"
        ).open_array("a")
        with pytest.warns(zarrpipe.UnconditionalWriteWarning, match="went unconditionally"):
            arr[0:1] = 5
    got = np.asarray(zarrpipe.Store(tmp_path).read("a"))
    assert (got[0:1] == 5).all() and (got[1:] == 0).all()


def test_conditional_writes_option_is_checked():
    with pytest.raises(ValueError, match='"require" or "warn"'):
        zarrpipe.Store("s3://writes/x", conditional_writes="sometimes")


# ------------------------------------------------------------------ durability


def test_durable_writes_read_back_and_pickle_with_the_store(tmp_path):
    # What durability adds (surviving a power loss) cannot be observed without one; the
    # writes still read back, leave no lock files, and the option travels with the store.
    import pickle

    assert not zarrpipe.Store(tmp_path).durable
    store = zarrpipe.Store(tmp_path, durable=True)
    arr = store.create_array("x", shape=(10,), dtype="i4", chunks=(4,))
    arr[2:7] = np.arange(5)
    arr[0] = 9
    again = pickle.loads(pickle.dumps(store))
    assert again.durable
    assert np.array_equal(np.asarray(again.read("x")), [9, 0, 0, 1, 2, 3, 4, 0, 0, 0])
    assert not [p for p in Path(tmp_path).rglob("*") if p.name.endswith(".__lock")]
