"""Object stores: zarrpipe.Store over S3 (moto's server on 127.0.0.1) and plain HTTP (a
local range server that injects faults) reads what zarr-python reads, fetches only what a
read needs, and turns server faults into exceptions, never wrong data or a hang."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr
import zarrpipe
from support.remote_servers import http_server, moto_s3, upload_dir
from support.zarr_stores import quiet_zarr_writes

pytest.importorskip("boto3")
pytest.importorskip("moto")

BUCKET = "zarrpipe-test"
KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "aws_region": "us-east-1"}
SHAPE = (37, 50)


def data_for(seed: int, dtype: str = "uint16") -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 60000, size=SHAPE).astype(dtype)


@pytest.fixture(scope="module")
def local_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("remote") / "data.zarr"
    with quiet_zarr_writes():
        g = zarr.open_group(root, mode="w")
        g.attrs["kind"] = "remote-test"
        plain = g.create_array(
            "plain",
            shape=SHAPE,
            chunks=(8, 16),
            dtype="uint16",
            compressors=zarr.codecs.ZstdCodec(),
        )
        plain[:] = data_for(1)
        sharded = g.create_array(
            "sharded", shape=SHAPE, chunks=(4, 8), shards=(16, 32), dtype="uint16", fill_value=7
        )
        sharded[:30] = data_for(2)[:30]  # rows 30.. stay fill value (missing inner chunks)
        v2 = zarr.create_array(
            root / "v2", shape=SHAPE, chunks=(10, 10), dtype=">i4", zarr_format=2,
            compressors=numcodecs.Blosc(),
        )  # fmt: skip
        v2[:] = data_for(3, "int32")
    return root


def expected(root: Path, path: str) -> np.ndarray:
    with quiet_zarr_writes():
        return np.asarray(zarr.open_array(root / path, mode="r")[...])


@pytest.fixture(scope="module")
def s3(local_store):
    with moto_s3() as endpoint:
        upload_dir(endpoint, BUCKET, local_store, "data.zarr")
        yield endpoint


def s3_store(endpoint: str, **kwargs) -> zarrpipe.Store:
    options = {"aws_endpoint": endpoint, "allow_http": "true", **KEYS}
    return zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options=options, **kwargs)


@pytest.mark.parametrize("path", ["plain", "sharded", "v2"])
def test_s3_reads_equal_zarr_python(s3, local_store, path):
    want = expected(local_store, path)
    store = s3_store(s3)
    np.testing.assert_array_equal(np.asarray(store.read(path)), want)
    for sel in [(slice(3, 29), slice(5, 44)), (17, slice(None)), (Ellipsis, 49), (slice(36, 37),)]:
        np.testing.assert_array_equal(np.asarray(store.read(path, sel)), want[sel], str(sel))
    arr = store.open_array(path)
    grid = arr.chunk_grid_shape
    chunks = arr.read_chunks([(0, 0), (grid[0] - 1, grid[1] - 1)])
    c = arr.chunks
    np.testing.assert_array_equal(np.asarray(chunks[0]), want[: c[0], : c[1]])
    last = want[(grid[0] - 1) * c[0] :, (grid[1] - 1) * c[1] :]
    np.testing.assert_array_equal(np.asarray(chunks[1]), last)
    # A fresh read over the network is still the caller's alone: writable, no copy.
    moved = np.from_dlpack(store.read(path, (slice(0, 5),)).into_dlpack())
    assert moved.flags.writeable


def test_s3_lists_and_opens_metadata(s3):
    store = s3_store(s3)
    assert store.list() == [
        ("", "group"),
        ("plain", "array"),
        ("sharded", "array"),
        ("v2", "array"),
    ]
    arr = store.open_array("sharded")
    assert arr.shards == (16, 32) and arr.chunks == (4, 8) and arr.fill_value == 7
    with pytest.raises(FileNotFoundError):
        store.open_array("missing")


def test_s3_partial_shard_reads_fetch_only_what_they_need(s3, local_store):
    store = s3_store(s3)
    arr = store.open_array("sharded")
    before = store.request_counts()
    # One element: the shard's index, then one inner chunk.
    assert int(np.asarray(arr[5, 9])) == int(expected(local_store, "sharded")[5, 9])
    after = store.request_counts()
    assert after["gets"] - before["gets"] == 2
    shard_file = local_store / "sharded" / "c" / "0" / "0"
    assert after["bytes"] - before["bytes"] < shard_file.stat().st_size / 2
    # Missing inner chunks (rows 30..) read as the fill value without fetching data.
    np.testing.assert_array_equal(np.asarray(arr[32:37, :8]), 7)
    # A whole shard is one request (no index request).
    before = store.request_counts()
    np.testing.assert_array_equal(
        np.asarray(arr[0:16, 0:32]), expected(local_store, "sharded")[0:16, 0:32]
    )
    assert store.request_counts()["gets"] - before["gets"] == 1
    # Part of each shard: its index, then one request for its nearby inner chunks.
    stored = [p for p in (local_store / "sharded" / "c").rglob("*") if p.is_file()]
    before = store.request_counts()
    np.testing.assert_array_equal(
        np.asarray(arr[1:36, 1:49]), expected(local_store, "sharded")[1:36, 1:49]
    )
    assert store.request_counts()["gets"] - before["gets"] == 6 + len(stored)
    # Scattered points in three inner chunks of one shard: its index is fetched once for
    # all of them (one box per inner chunk is read), then at most one request per chunk.
    rows, cols = np.array([0, 5, 13]), np.array([1, 20, 30])
    before = store.request_counts()
    np.testing.assert_array_equal(
        np.asarray(arr.vindex[rows, cols]), expected(local_store, "sharded")[rows, cols]
    )
    assert store.request_counts()["gets"] - before["gets"] <= 1 + 3


def test_s3_opening_an_array_asks_for_no_sizes(s3, local_store):
    """Metadata is fetched whole, one GET per document: no HEAD for its size first, which
    would cost every open a second round trip."""
    store = s3_store(s3)
    store.open_array("plain")
    counts = store.request_counts()
    assert (counts["gets"], counts["heads"]) == (1, 0)
    # v2: zarr.json is looked for first (missing), then .zarray and .zattrs.
    store = s3_store(s3)
    arr = store.open_array("v2")
    counts = store.request_counts()
    assert counts["heads"] == 0 and counts["gets"] <= 3
    np.testing.assert_array_equal(np.asarray(arr[...]), expected(local_store, "v2"))


def test_s3_credentials_from_the_environment(s3, local_store, monkeypatch):
    for key, value in {
        "AWS_ENDPOINT": s3,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    # Credentials and endpoint from the environment; plain HTTP only for this local server.
    store = zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options={"allow_http": "true"})
    np.testing.assert_array_equal(np.asarray(store.read("plain")), expected(local_store, "plain"))


def test_s3_anonymous_access(s3, local_store):
    options = {"aws_endpoint": s3, "allow_http": "true", "aws_skip_signature": "true"}
    store = zarrpipe.Store(f"s3://{BUCKET}/data.zarr", options=options)
    np.testing.assert_array_equal(np.asarray(store.read("v2")), expected(local_store, "v2"))


def test_s3_from_obstore(s3, local_store):
    obstore = pytest.importorskip("obstore.store")
    obs = obstore.S3Store(
        BUCKET, prefix="data.zarr", endpoint=s3, region="us-east-1",
        access_key_id="test", secret_access_key="test", client_options={"allow_http": True},
    )  # fmt: skip
    store = zarrpipe.Store.from_obstore(obs)
    np.testing.assert_array_equal(
        np.asarray(store.read("sharded")), expected(local_store, "sharded")
    )


def test_read_async_keeps_the_event_loop_running(s3, local_store):
    store = s3_store(s3)
    arr = store.open_array("plain")
    ticks = 0

    async def ticker(done: asyncio.Event) -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async def main() -> tuple[np.ndarray, np.ndarray]:
        done = asyncio.Event()
        tick = asyncio.create_task(ticker(done))
        a = await store.read_async("plain")
        b = await arr.read_async((slice(0, 9),))
        done.set()
        await tick
        return np.asarray(a), np.asarray(b)

    a, b = asyncio.run(main())
    want = expected(local_store, "plain")
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want[:9])
    assert ticks > 0


@pytest.mark.parametrize("path", ["plain", "sharded"])
def test_zarr_python_pipeline_over_an_object_store(s3, local_store, path):
    from zarrpipe import pipeline

    obstore = pytest.importorskip("obstore.store")
    obs = obstore.S3Store(
        BUCKET, prefix="data.zarr", endpoint=s3, region="us-east-1",
        access_key_id="test", secret_access_key="test", client_options={"allow_http": True},
    )  # fmt: skip
    want = expected(local_store, path)
    pipeline.ENGINE_STORES.clear()
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}), quiet_zarr_writes():
        z = zarr.open_array(zarr.storage.ObjectStore(obs, read_only=True), path=path, mode="r")
        assert type(z._async_array.codec_pipeline).__module__ == "zarrpipe"
        np.testing.assert_array_equal(z[...], want)
        np.testing.assert_array_equal(z[3:29, 5:44], want[3:29, 5:44])
        # The chunks were fetched by zarrpipe's Rust side, not through zarr-python's store.
        (ours,) = pipeline.ENGINE_STORES.values()
        before = ours.request_counts()["gets"]
        assert before > 0
        assert int(z[5, 9]) == int(want[5, 9])
        # One element: one chunk, or a shard's index and one inner chunk.
        assert ours.request_counts()["gets"] - before == (2 if path == "sharded" else 1)


# ----------------------------------------------------------------------------- HTTP


@pytest.fixture
def http(local_store):
    with http_server(local_store.parent) as (url, faults):
        yield f"{url}/data.zarr", faults


@pytest.mark.parametrize("path", ["plain", "sharded", "v2"])
def test_http_reads_equal_zarr_python(http, local_store, path):
    url, _ = http
    store = zarrpipe.Store(url, options={"allow_http": "true"})
    want = expected(local_store, path)
    np.testing.assert_array_equal(np.asarray(store.read(path)), want)
    np.testing.assert_array_equal(np.asarray(store.read(path, (slice(9, 30), 3))), want[9:30, 3])


@pytest.mark.timeout(120)
def test_http_server_errors_are_exceptions(http):
    url, faults = http
    store = zarrpipe.Store(url, options={"allow_http": "true"}, retries=1, timeout=5)
    arr = store.open_array("plain")
    faults.fail_next = 10_000
    with pytest.raises(OSError, match="500"):
        arr.read()
    faults.fail_next = 0
    assert np.asarray(arr.read()).shape == SHAPE  # healthy again


@pytest.mark.timeout(120)
def test_http_transient_errors_are_retried(http, local_store):
    url, faults = http
    store = zarrpipe.Store(url, options={"allow_http": "true"}, retries=3, timeout=5)
    arr = store.open_array("plain")
    faults.fail_next = 2
    np.testing.assert_array_equal(np.asarray(arr.read()), expected(local_store, "plain"))


@pytest.mark.timeout(120)
def test_http_responses_cut_short_are_never_decoded(http, local_store):
    url, faults = http
    store = zarrpipe.Store(url, options={"allow_http": "true"}, retries=0, timeout=5)
    arr = store.open_array("sharded")
    want = expected(local_store, "sharded")
    faults.drop_next = 10_000
    with pytest.raises(OSError):
        arr.read()
    # With retries, a dropped connection is retried: the right values, or (when the cut
    # falls inside a body object_store has started streaming) an error, never wrong data.
    faults.drop_next = 1
    retrying = zarrpipe.Store(url, options={"allow_http": "true"}, retries=3, timeout=5)
    try:
        got = np.asarray(retrying.read("sharded"))
    except OSError:
        pass
    else:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(retrying.read("sharded")), want)


@pytest.mark.timeout(60)
def test_http_slow_server_times_out(http):
    url, faults = http
    store = zarrpipe.Store(url, options={"allow_http": "true"}, retries=0, timeout=0.5)
    arr = store.open_array("plain")
    faults.delay = 3.0
    with pytest.raises(TimeoutError, match="timed out"):
        arr.read()


def test_bad_urls_and_options_are_value_errors():
    with pytest.raises(ValueError):
        zarrpipe.Store("s3://bucket/x", options={"not_an_option": "1"})
    with pytest.raises(ValueError):
        zarrpipe.Store("ftp://example.com/x")
    with pytest.raises(ValueError):
        zarrpipe.Store("s3://bucket/x", timeout=0)


# ------------------------------------------------------------ large shards, in ranges

MIB = 2**20


@pytest.fixture(scope="module")
def large_shards(tmp_path_factory):
    """Arrays with one 40 MiB shard (uint16 noise, no compressor: as large stored), and a
    copy whose shard file is longer than any encoding of it."""
    from zarr.codecs import BytesCodec, ShardingCodec

    root = tmp_path_factory.mktemp("large") / "data.zarr"
    data = np.random.default_rng(5).integers(0, 2**16, size=(160, 512, 256), dtype=np.uint16)
    inner = (32, 128, 128)
    with quiet_zarr_writes():
        for name in ("big", "padded"):
            a = zarr.create_array(
                root / name, shape=data.shape, chunks=inner, shards=data.shape,
                dtype="uint16", compressors=None,
            )  # fmt: skip
            a[:] = data
        a = zarr.create_array(
            root / "big-index-first", shape=data.shape, chunks=data.shape, dtype="uint16",
            serializer=ShardingCodec(chunk_shape=inner, codecs=[BytesCodec()],
                                     index_location="start"),
            compressors=None,
        )  # fmt: skip
        a[:] = data
    index_len = 40 * 16 + 4  # 5 x 4 x 2 inner chunks, crc32c
    shard = root / "padded" / "c" / "0" / "0" / "0"
    with open(shard, "r+b") as f:  # 8 MiB of zeros before the index: past the size limit
        body = f.read()
        f.seek(0)
        f.write(body[:-index_len] + bytes(8 * MIB) + body[-index_len:])
    return root, data


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", ["big", "big-index-first"])
def test_a_large_shard_read_whole_is_fetched_as_parallel_ranges(large_shards, path):
    root, data = large_shards
    stored = (root / path / "c" / "0" / "0" / "0").stat().st_size
    with http_server(root.parent) as (url, _):
        url = f"{url}/data.zarr"
        store = zarrpipe.Store(url, options={"allow_http": "true"})
        arr = store.open_array(path)
        before = store.request_counts()
        np.testing.assert_array_equal(np.asarray(arr.read()), data)
        after = store.request_counts()
        # The index, then the inner chunks (uncompressed: data.nbytes in all) in ranges of
        # at most 8 MiB.
        assert after["gets"] - before["gets"] == 1 + -(-data.nbytes // (8 * MIB))
        assert after["bytes"] - before["bytes"] < stored + 64 * 1024
        # Most of the shard, but not all of it: ranges of at most 8 MiB too.
        before = store.request_counts()
        np.testing.assert_array_equal(np.asarray(arr[:150, 1:]), data[:150, 1:])
        assert store.request_counts()["gets"] - before["gets"] >= 1 + 4
        # One request slot: the shard is one request, as with small shards.
        one = zarrpipe.Store(url, options={"allow_http": "true"}, concurrency=1)
        arr = one.open_array(path)
        before = one.request_counts()
        np.testing.assert_array_equal(np.asarray(arr.read()), data)
        assert one.request_counts()["gets"] - before["gets"] == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("concurrency", [1, 32], ids=["one-request", "ranges"])
def test_a_shard_longer_than_any_encoding_is_refused_either_way(large_shards, concurrency):
    root, _ = large_shards
    with http_server(root.parent) as (url, _):
        store = zarrpipe.Store(
            f"{url}/data.zarr", options={"allow_http": "true"}, concurrency=concurrency
        )
        with pytest.raises(zarrpipe.DecodeError, match="more than any encoding"):
            store.read("padded")


@pytest.mark.timeout(120)
def test_a_range_cut_short_fails_the_read_and_never_decodes(large_shards):
    root, data = large_shards
    with http_server(root.parent) as (url, faults):
        store = zarrpipe.Store(f"{url}/data.zarr", options={"allow_http": "true"}, retries=0)
        arr = store.open_array("big")
        faults.drop_from, faults.drop_next = MIB, 1  # the index comes whole, a range is cut
        with pytest.raises(OSError):
            arr.read()
        assert faults.drop_next == 0
        np.testing.assert_array_equal(np.asarray(arr.read()), data)


def test_file_urls_open_local_stores(local_store):
    store = zarrpipe.Store("file://" + os.fspath(local_store))
    np.testing.assert_array_equal(np.asarray(store.read("v2")), expected(local_store, "v2"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "url, options",
    [
        ("gs://bucket/data.zarr", {"google_skip_signature": "true", "google_base_url": "{ep}"}),
        (
            "az://container/data.zarr",
            {"azure_storage_account_name": "acct", "azure_skip_signature": "true",
             "azure_endpoint": "{ep}"},
        ),
    ],
    ids=["gcs", "azure"],
)  # fmt: skip
def test_gcs_and_azure_stores_open_and_report_unreachable_servers(url, options):
    """No GCS or Azure emulator here: the stores are built from their options, and a server
    that refuses connections is an OSError naming the key, not a hang."""
    from support.remote_servers import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {k: v.format(ep=endpoint) for k, v in options.items()}
    store = zarrpipe.Store(url, options={**options, "allow_http": "true"}, timeout=2, retries=0)
    assert url in repr(store)
    with pytest.raises(OSError, match=r"zarr\.json"):
        store.open_array("x")
