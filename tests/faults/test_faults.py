"""Hostile and corrupt stores read through zarrpipe's Python API (issue 6).

Every case builds its broken store itself (`fault_stores.CASES`: a valid store written with
zarr-python, then damaged on disk, or metadata written by hand) and asserts the exact outcome:
an `Exception` subclass of the documented type that names the chunk key, with the process still
reading correctly afterwards; or the value the format defines. Decompression bombs and lying
headers run in a subprocess that measures the read's peak RSS growth (and survives an abort).
Shards are in test_faults_shards.py; docs/reliability.md compares all of this with zarr-python.
"""

from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest
import zarr
import zarrpipe
from support.faults.checks import assert_healthy, assert_raises, memory_bound, outcome
from support.faults.observe import observe
from support.faults.path_cases import SECRET
from support.faults.registry import CASES, allowed_exceptions, allowed_outcomes
from support.faults.stores import (
    BAD,
    DATA,
    DTYPE,
    FILL,
    GOOD_REGION,
    key_file,
    quiet_zarr,
    stored_key,
    write_plain,
)

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning")


def names(pred) -> list[str]:
    return [n for n, c in CASES.items() if pred(c)]


def build(name: str, tmp_path) -> tuple:
    c = CASES[name]
    return c, c.build(str(tmp_path / "store"))


# ---------------------------------------------------------------------------------------------
# chunk bytes: truncated, empty, garbage, wrong-size frames, checksums


CHUNK_CASES = names(
    lambda c: (
        c.section in ("chunk bytes", "checksums") and not c.memory and "fallback" not in c.tags
    )
)


@pytest.mark.parametrize("name", CHUNK_CASES)
def test_corrupt_chunk(tmp_path, name):
    c, b = build(name, tmp_path)
    types = allowed_exceptions(c)
    store = zarrpipe.Store(b.root)
    arr = store.open_array(b.path)
    assert arr.chunk_key(BAD) == b.key
    reads = {
        "the chunk's region": lambda: arr[b.bad],
        "one element of it": lambda: arr[5, 6],
        "a row across two chunks": lambda: arr[6, 3:7],
        "the whole array": lambda: arr[...],
        "store.read": lambda: store.read(b.path, b.bad),
        "read_chunk": lambda: arr.read_chunk(BAD),
        "read_chunks": lambda: arr.read_chunks([(0, 0), BAD, (1, 0)]),
        "store.read_chunks": lambda: store.read_chunks(b.path, [BAD]),
    }
    for what, read in reads.items():
        assert_raises(read, types, key=b.key, what=what)
    # everything else still reads, in this process
    np.testing.assert_array_equal(np.asarray(arr[GOOD_REGION]), DATA[GOOD_REGION])
    for index, t in zip([(0, 0), (1, 0)], arr.read_chunks([(0, 0), (1, 0)]), strict=True):
        r, s = index
        np.testing.assert_array_equal(np.asarray(t), DATA[r * 4 : r * 4 + 4, s * 4 : s * 4 + 4])
    assert_healthy(str(tmp_path / "scratch"))


@pytest.mark.parametrize("name", ["zstd-garbage", "crc32c-bitflip", "gzip-truncated"])
def test_corrupt_chunk_is_not_cached(tmp_path, name):
    """With a chunk cache, a corrupt chunk fails every time (no poisoned entry, no fill
    value), and once the file is repaired the correct data is read."""
    c, b = build(name, tmp_path)
    file = key_file(b.root, b.key)
    store = zarrpipe.Store(b.root, cache_bytes=1 << 20)
    arr = store.open_array(b.path)
    for _ in range(3):
        assert_raises(lambda: arr.read_chunk(BAD), allowed_exceptions(c), key=b.key)
        np.testing.assert_array_equal(np.asarray(arr.read_chunk((0, 0))), DATA[:4, :4])
    assert store.cache_info()["hits"] >= 2
    write_plain(str(tmp_path / "fresh"), name.split("-")[0], data=DATA)
    z_fresh = zarr.open_array(store=str(tmp_path / "fresh"), path="a", mode="r")
    shutil.copyfile(key_file(str(tmp_path / "fresh"), stored_key("a", z_fresh, BAD)), file)
    np.testing.assert_array_equal(np.asarray(arr[...]), DATA)


@pytest.mark.parametrize(
    "name", ["zstd-garbage", "blosc-truncated", "crc32c-bitflip", "none-long-frame"]
)
def test_corrupt_chunk_through_codec_pipeline(tmp_path, name):
    """zarr-python with zarrpipe.CodecPipeline raises the same typed error, naming the key
    (zarr-python's own pipeline returns wrong data for a truncated blosc chunk)."""
    c, b = build(name, tmp_path)
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}), quiet_zarr():
        z = zarr.open_array(store=b.root, path=b.path, mode="r")
        assert isinstance(z._async_array.codec_pipeline, zarrpipe.CodecPipeline)
        assert_raises(lambda: z[b.bad], allowed_exceptions(c), key=b.key)
        assert_raises(lambda: z[...], allowed_exceptions(c), key=b.key)
        np.testing.assert_array_equal(z[GOOD_REGION], DATA[GOOD_REGION])


# ---------------------------------------------------------------------------------------------
# variable-length strings and bytes: damaged vlen-utf8 / vlen-bytes chunks


VLEN_CASES = names(lambda c: c.section == "vlen chunks")


@pytest.mark.parametrize("name", VLEN_CASES)
def test_corrupt_vlen_chunk(tmp_path, name):
    """A damaged vlen chunk is a DecodeError naming the key through every read door and the
    pipeline (truncated, lengths past the end, a count of 2^32-1, bad UTF-8: no panic, no
    allocation of what the chunk claims), one zarr-python reads (trailing bytes) reads the
    same, and the other chunks still read."""
    c, b = build(name, tmp_path)
    types = allowed_exceptions(c)
    store = zarrpipe.Store(b.root)
    arr = store.open_array(b.path)
    if b.expected is not None:  # a valid chunk after all: read exactly
        assert arr[b.bad].tolist() == b.expected.tolist()
        assert arr.read_chunk(BAD).tolist() == b.expected.tolist()
        types = ()
    reads = {
        "the chunk's region": lambda: arr[b.bad],
        "one element of it": lambda: arr[5, 6],
        "a row across two chunks": lambda: arr[6, 3:7],
        "the whole array": lambda: arr[...],
        "store.read": lambda: store.read(b.path, b.bad),
        "read_chunk": lambda: arr.read_chunk(BAD),
        "read_chunks": lambda: arr.read_chunks([(0, 0), BAD]),
    }
    for what, read in reads.items() if types else ():
        assert_raises(read, types, key=b.key, what=what)
    assert arr[GOOD_REGION].tolist() == b.good_value.tolist()
    with zarr.config.set({"codec_pipeline.path": "zarrpipe.CodecPipeline"}), quiet_zarr():
        z = zarr.open_array(store=b.root, path=b.path, mode="r")
        if types:
            assert_raises(lambda: z[b.bad], types, what="pipeline")
        else:
            assert z[b.bad].tolist() == b.expected.tolist()
        assert z[GOOD_REGION].tolist() == b.good_value.tolist()
    assert_healthy(str(tmp_path / "scratch"))


# ---------------------------------------------------------------------------------------------
# the zarrs fallback path: arrays whose codec chain zarrpipe hands to zarrs' decoder get the
# same guarantees (typed error, no wrong data, key named)


FALLBACK_CASES = names(lambda c: "fallback" in c.tags and not c.memory)


@pytest.mark.parametrize("name", FALLBACK_CASES)
def test_fallback_fault(tmp_path, name):
    c, b = build(name, tmp_path)
    store = zarrpipe.Store(b.root)
    arr = store.open_array(b.path)
    assert arr.fallback_reason, "the case must exercise the zarrs fallback path"
    outcomes = allowed_outcomes(c)
    kind, v = outcome(lambda: np.asarray(arr[b.bad]))
    if "value" in outcomes and kind == "value":
        np.testing.assert_array_equal(v, b.expected)
    else:
        assert kind == "raised", (
            f"no error: returned {v!r}"
            + (" (the undamaged values)" if b.original is not None and np.array_equal(v, b.original)
               else " (wrong data)")
        )  # fmt: skip
        assert isinstance(v, Exception), f"{type(v)} is not an Exception subclass: {v}"
        assert isinstance(v, allowed_exceptions(c)), f"expected {c.expect}, got {v!r}"
        assert_raises(lambda: store.read(b.path, b.bad), allowed_exceptions(c))
    np.testing.assert_array_equal(np.asarray(arr[GOOD_REGION]), DATA[GOOD_REGION])
    assert_healthy(str(tmp_path / "scratch"))


def test_fallback_errors_name_the_chunk_key(tmp_path):
    """Errors from the zarrs fallback path name the chunk (or shard) key like zarrpipe's own
    decoder does (one test for all cases: one cause)."""
    unnamed = {}
    for k, name in enumerate(FALLBACK_CASES):
        c = CASES[name]
        b = c.build(str(tmp_path / str(k)))
        arr = zarrpipe.Store(b.root).open_array(b.path)
        kind, v = outcome(lambda arr=arr, b=b: arr[b.bad])
        if kind == "raised" and b.key not in str(v):
            unnamed[name] = f"{type(v).__name__}: {v}"
    assert unnamed == {}, f"errors not naming the chunk key: {unnamed}"


# ---------------------------------------------------------------------------------------------
# bombs and headers that lie about sizes: error, with memory bounded (in a subprocess)


MEMORY_CASES = names(lambda c: c.memory)


@pytest.mark.parametrize("name", MEMORY_CASES)
def test_hostile_frame_bounded_memory(name):
    c = CASES[name]
    report = observe(name, "zarrpipe", timeout=120)
    assert report["outcome"] not in ("timeout", "crashed"), (
        f"{name}: the reading process {report['outcome']}: {report.get('stderr', '')[-600:]}"
    )
    assert report["outcome"] == "raised", f"{name}: returned data instead of an error"
    problems = []
    if not report["is_exception"]:
        problems.append(f"{report['type']} is not an Exception subclass")
    want = [t.__name__ for t in allowed_exceptions(c)]
    if not any(t in report["mro"] for t in want):
        problems.append(f"expected {want}, got {report['type']}")
    if report["rss_growth"] >= memory_bound():
        problems.append(
            f"peak RSS grew by {report['rss_growth'] / 2**20:.0f} MiB "
            f"(bound {memory_bound() / 2**20:.0f} MiB)"
        )
    if report["key"] not in report["message"]:
        problems.append(f"the error does not name {report['key']!r}")
    if report.get("after_ok") is False:
        problems.append(f"a valid read afterwards failed: {report.get('after_error')}")
    assert problems == [], f"{name} ({c.what}): {problems}; message: {report['message']}"


def test_memory_measurement_sees_a_big_read():
    """The subprocess measurement is live: zarr-python's own pipeline inflates the zstd bomb
    to 1 GiB and the child reports that growth (so a small number above means something)."""
    report = observe("zstd-bomb", "zarr", timeout=120)
    assert report["outcome"] == "raised", report
    assert report["rss_growth"] > 512 << 20, report


# ---------------------------------------------------------------------------------------------
# metadata


METADATA_CASES = names(lambda c: c.section == "metadata")


@pytest.mark.parametrize("name", METADATA_CASES)
def test_bad_metadata(tmp_path, name):
    c, b = build(name, tmp_path)
    store = zarrpipe.Store(b.root)
    types = allowed_exceptions(c)
    if c.expect == "value":  # the format defines the answer
        np.testing.assert_array_equal(np.asarray(store.open_array(b.path)[b.bad]), b.expected)
    else:
        assert_raises(lambda: store.open_array(b.path), types, what="open_array")
        assert_raises(lambda: store.read(b.path, b.bad), types, what="store.read")
        assert_raises(lambda: store.read_chunks(b.path, [(0, 0)]), types, what="read_chunks")
        # the error is not remembered: fixing the metadata makes the array readable
        fixed = str(tmp_path / "fixed")
        write_plain(fixed, "zlib-v2" if "v2" in name else "zstd")
        np.testing.assert_array_equal(np.asarray(zarrpipe.Store(fixed).open_array("a")[...]), DATA)
    assert_healthy(str(tmp_path / "scratch"))


def test_every_case_expects_one_outcome():
    """No case passes "one way or another": each names the one exception type (or the value)
    zarrpipe gives, so a change of behaviour fails its test."""
    assert [n for n, c in CASES.items() if isinstance(c.expect, tuple)] == []


def test_metadata_errors_are_distinct_classes():
    assert issubclass(zarrpipe.MetadataError, zarrpipe.ZarrpipeError)
    assert issubclass(zarrpipe.UnsupportedError, zarrpipe.ZarrpipeError)
    assert not issubclass(zarrpipe.MetadataError, zarrpipe.UnsupportedError)
    assert not issubclass(zarrpipe.UnsupportedError, zarrpipe.MetadataError)
    assert issubclass(zarrpipe.ChecksumError, zarrpipe.DecodeError)
    assert issubclass(zarrpipe.ZarrpipeError, Exception)


def test_huge_chunk_whole_read_is_memory_error(tmp_path):
    """The 2^40-element chunk read whole: the 1 TiB output cannot be allocated ->
    MemoryError before any decoding (in a subprocess: a wrong answer could abort)."""
    code = (
        "import sys, zarrpipe\n"
        f"a = zarrpipe.Store({str(tmp_path)!r}).open_array('a')\n"
        "try:\n    a[...]\nexcept MemoryError as e:\n    print('MemoryError', e); sys.exit(0)\n"
        "except Exception as e:\n    print(type(e).__name__, e); sys.exit(3)\n"
        "sys.exit(4)\n"
    )
    from support.faults.checks import might_allocate
    from support.faults.chunk_cases import _huge_chunk
    from support.faults.stores import encode

    if might_allocate(1 << 40):
        pytest.skip("this machine might actually hold a 1 TiB output")
    _huge_chunk(str(tmp_path), encode("zstd", b"tiny"), None)
    proc = _run(code)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])


def _run(code: str, timeout: float = 120):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, RUST_BACKTRACE="0"),
    )


# ---------------------------------------------------------------------------------------------
# paths: never outside the store root; missing stores; permissions


SECRET_CASES = names(lambda c: "secret" in c.tags)


@pytest.mark.parametrize("name", SECRET_CASES)
def test_path_never_leaves_the_store(tmp_path, name):
    c, b = build(name, tmp_path)
    types = allowed_exceptions(c)
    secret_dir = tmp_path / "store" / "secret"
    assert secret_dir.is_dir(), "the secret array the case hides outside the store"
    # the secret is a valid array: readable when asked for by its own store
    outer = zarrpipe.Store(str(tmp_path / "store"))
    assert (np.asarray(outer.open_array("secret")[...]) == SECRET).all()
    store = zarrpipe.Store(b.root)
    for what, fn in {
        "open_array": lambda: store.open_array(b.path)[b.bad],
        "store.read": lambda: store.read(b.path, b.bad),
        "store.read_chunks": lambda: store.read_chunks(b.path, [(0, 0)]),
    }.items():
        kind, v = outcome(fn)
        if kind == "value":
            values = np.asarray(v)
            assert not (values == SECRET).any(), f"{what}: read the secret outside the store"
            pytest.fail(f"{what}: returned {values!r} for {b.path!r}; expected {types}")
        assert isinstance(v, types), f"{what}: expected {types}, got {v!r}"
    assert_healthy(str(tmp_path / "scratch"))


def test_store_root_array_and_group_listing_stay_inside(tmp_path):
    """list() walks only the store; an array next to the store is not part of it."""
    store_dir = tmp_path / "store"
    write_plain(str(store_dir), "zstd")
    write_plain(str(tmp_path), "zstd", path="outside")
    assert [p for p, _ in zarrpipe.Store(str(store_dir)).list() if "outside" in p] == []


def test_missing_store(tmp_path):
    """Read-only, a missing store is FileNotFoundError (nothing created); read-write, it is
    created, and where it cannot be (under a file) that is an OSError, never a crash."""
    for path in (tmp_path / "nope", tmp_path / "nope" / "deeper", "/no/such/zarrpipe/store"):
        assert_raises(
            lambda p=path: zarrpipe.Store(str(p), mode="r"), FileNotFoundError, what=str(path)
        )
    assert not (tmp_path / "nope").exists()
    (tmp_path / "a-file").write_bytes(b"x")
    assert_raises(
        lambda: zarrpipe.Store(str(tmp_path / "a-file" / "store")), OSError, what="under a file"
    )
    assert_healthy(str(tmp_path / "scratch"))


def test_store_removed_after_open(tmp_path):
    """The store directory disappears between open and read: FileNotFoundError (or, for a
    missing chunk, the fill value), never a crash."""
    root = tmp_path / "store"
    write_plain(str(root), "zstd")
    arr = zarrpipe.Store(str(root)).open_array("a")
    shutil.rmtree(root)
    kind, v = outcome(lambda: np.asarray(arr[...]))
    if kind == "value":
        np.testing.assert_array_equal(v, np.full(DATA.shape, FILL, DTYPE))
    else:
        assert isinstance(v, FileNotFoundError), repr(v)
    assert_healthy(str(tmp_path / "scratch"))


@pytest.mark.parametrize("name", ["array-missing", "store-missing", "store-is-a-file"])
def test_missing_things(tmp_path, name):
    c, b = build(name, tmp_path)
    types = allowed_exceptions(c)
    if name == "array-missing":
        store = zarrpipe.Store(b.root)
        assert_raises(lambda: store.open_array(b.path), types)
        assert_raises(lambda: store.read(b.path), types)
    else:
        assert_raises(lambda: zarrpipe.Store(b.root, mode="r"), types)
    assert_healthy(str(tmp_path / "scratch"))


def test_chunk_path_is_a_directory(tmp_path):
    _, b = build("chunk-is-a-directory", tmp_path)
    arr = zarrpipe.Store(b.root).open_array(b.path)
    e = assert_raises(lambda: arr[b.bad], OSError, key=b.key)
    assert not isinstance(e, FileNotFoundError), "a directory is not a missing chunk"
    np.testing.assert_array_equal(np.asarray(arr[GOOD_REGION]), DATA[GOOD_REGION])


@pytest.mark.parametrize("name", ["chunk-permission-denied", "metadata-permission-denied"])
def test_permission_denied(tmp_path, name):
    """chmod 000 -> PermissionError. As root (which ignores permissions) the read runs in
    a subprocess that drops to uid/gid 65534 after its imports."""
    c = CASES[name]
    types = allowed_exceptions(c)
    if os.geteuid() == 0:
        report = observe(name, "zarrpipe", timeout=120)
        assert report["outcome"] == "raised", report
        assert report["is_exception"], report
        assert "PermissionError" in report["mro"], f"expected PermissionError: {report}"
        assert report["stage"] == c.stage, report
        if name == "chunk-permission-denied":
            assert report["key"] in report["message"], report
            assert report["after_ok"], report
        return
    b = c.build(str(tmp_path / "store"))
    store = zarrpipe.Store(b.root)
    if c.stage == "open":
        assert_raises(lambda: store.open_array(b.path), types)
    else:
        arr = store.open_array(b.path)
        assert_raises(lambda: arr[b.bad], types, key=b.key)
        np.testing.assert_array_equal(np.asarray(arr[GOOD_REGION]), DATA[GOOD_REGION])


# ---------------------------------------------------------------------------------------------
# selections


SELECTION_CASES = names(lambda c: c.section == "selections")


@pytest.mark.parametrize("name", SELECTION_CASES)
def test_bad_selection(tmp_path, name):
    c, b = build(name, tmp_path)
    types = allowed_exceptions(c)
    store = zarrpipe.Store(b.root)
    arr = store.open_array(b.path)
    sel = b.bad
    assert_raises(lambda: arr[sel], types, what="arr[sel]")
    assert_raises(lambda: arr.read(sel), types, what="arr.read(sel)")
    assert_raises(lambda: store.read(b.path, sel), types, what="store.read")
    if len(sel) == 1:  # also bare, not in a tuple
        assert_raises(lambda: arr[sel[0]], types, what="arr[sel[0]]")
    np.testing.assert_array_equal(np.asarray(arr[...]), DATA)


@pytest.mark.parametrize(
    "index, types",
    [
        ((2, 0), IndexError),
        ((0, 2), IndexError),
        ((0,), IndexError),
        ((0, 0, 0), IndexError),
        ((1 << 64, 0), (IndexError, OverflowError)),
        ("ab", TypeError),
        ((0.5, 0), TypeError),
        ((None, 0), TypeError),
    ],
)
def test_bad_chunk_index(tmp_path, index, types):
    write_plain(str(tmp_path), "zstd")
    store = zarrpipe.Store(str(tmp_path))
    arr = store.open_array("a")
    assert_raises(lambda: arr.read_chunk(index), types, what="read_chunk")
    assert_raises(lambda: arr.read_chunks([(0, 0), index]), types, what="read_chunks")
    assert_raises(lambda: store.read_chunks("a", [index]), types, what="store.read_chunks")
    np.testing.assert_array_equal(np.asarray(arr.read_chunk((1, 1))), DATA[4:, 4:])


@pytest.mark.parametrize(
    "index, types",
    [((2, 0), IndexError), ((0, 2), IndexError), ((0,), IndexError), ((0, 0, 0), IndexError),
     ((-3, 0), IndexError), ("ab", TypeError), ((0.5, 0), TypeError)],
)  # fmt: skip
def test_chunk_key_rejects_bad_index(tmp_path, index, types):
    """chunk_key names a stored chunk: an index outside the grid, or of the wrong rank, is
    an error like read_chunk's, not the key of a chunk that cannot exist."""
    write_plain(str(tmp_path), "zstd")
    arr = zarrpipe.Store(str(tmp_path)).open_array("a")
    assert arr.chunk_key((1, 1)) == "a/c/1/1"
    assert_raises(lambda: arr.read_chunk(index), types, what="read_chunk")
    assert_raises(lambda: arr.chunk_key(index), types, what="chunk_key")


def test_selection_errors_from_many_threads(tmp_path):
    """Bad selections raised concurrently are all the right exception (no poisoned state)."""
    write_plain(str(tmp_path), "zstd")
    arr = zarrpipe.Store(str(tmp_path)).open_array("a")
    errors: list[BaseException] = []
    barrier = threading.Barrier(8, timeout=120)

    def run(k: int) -> None:
        barrier.wait()
        for i in range(200):
            kind, v = outcome(lambda i=i: arr[8 + (i + k) % 5])
            if kind == "value" or not isinstance(v, IndexError):
                errors.append(v)
            np.testing.assert_array_equal(np.asarray(arr[(i + k) % 8]), DATA[(i + k) % 8])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---------------------------------------------------------------------------------------------
# writes through zarr-python's pipeline: a failed write never tears a chunk


PIPELINE = {"codec_pipeline.path": "zarrpipe.CodecPipeline"}
WSHAPE = (8, 12)  # 2 x 3 chunks of 4 x 4


def _chunk_regions():
    return {
        (i, j): (slice(4 * i, 4 * i + 4), slice(4 * j, 4 * j + 4))
        for i in range(2)
        for j in range(3)
    }


DEFAULT_PIPELINE = {"codec_pipeline.path": "zarr.core.codec_pipeline.BatchedCodecPipeline"}


def _state_of_chunks(root: str, skip=()) -> dict:
    """Each chunk as zarr-python's own pipeline decodes it (an independent reader)."""
    with zarr.config.set(DEFAULT_PIPELINE), quiet_zarr():
        z = zarr.open_array(store=root, path="a", mode="r")
        assert not isinstance(z._async_array.codec_pipeline, zarrpipe.CodecPipeline)
        return {ix: np.asarray(z[reg]) for ix, reg in _chunk_regions().items() if ix not in skip}


def _assert_old_or_new(root: str, old: np.ndarray, new: np.ndarray, blocked=()) -> dict:
    result = {}
    for ix, got in _state_of_chunks(root, skip=blocked).items():
        reg = _chunk_regions()[ix]
        is_old = np.array_equal(got, old[reg])
        is_new = np.array_equal(got, new[reg])
        assert is_old or is_new, f"chunk {ix} is torn: {got} is neither old nor new"
        result[ix] = "new" if is_new else "old"
    return result


def _read(file: str) -> bytes:
    with open(file, "rb") as f:
        return f.read()


def _leftover_temp_files(root: str) -> list[str]:
    return [
        os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".tmp")
    ]


@pytest.mark.parametrize("compressor", ["zstd", "crc32c", "none"])
def test_failed_pipeline_write_never_tears_chunks(tmp_path, compressor):
    root = str(tmp_path)
    old = (np.arange(96, dtype=DTYPE).reshape(WSHAPE) * 3 + 1).astype(DTYPE)
    new = (old + 1000).astype(DTYPE)
    with zarr.config.set(PIPELINE):
        write_plain(root, compressor, data=old)
        with quiet_zarr():
            z = zarr.open_array(store=root, path="a", mode="r+")
            assert isinstance(z._async_array.codec_pipeline, zarrpipe.CodecPipeline)
        # Block chunk (1, 2): its file becomes a directory (with a file in it), so the
        # rename that would replace it fails.
        blocked = key_file(root, stored_key("a", z, (1, 2)))
        os.remove(blocked)
        os.makedirs(blocked)
        with open(os.path.join(blocked, "keep"), "wb") as f:
            f.write(b"keep")
        before = {ix: _read(key_file(root, stored_key("a", z, ix)))
                  for ix in _chunk_regions() if ix != (1, 2)}  # fmt: skip

        # 1. a whole-array write (every chunk replaced whole)
        assert_raises(lambda: z.__setitem__(Ellipsis, new), OSError, what="whole write")
        _assert_old_or_new(root, old, new, blocked={(1, 2)})
        # 2. a partial write (read-modify-write of chunks (0, 1), (0, 2), (1, 1), (1, 2))
        part = (slice(2, 6), slice(6, 10))
        expect = old.copy()
        expect[part] = new[part]
        assert_raises(lambda: z.__setitem__(part, new[part]), OSError, what="partial write")
        for ix, got in _state_of_chunks(root, skip={(1, 2)}).items():
            reg = _chunk_regions()[ix]
            ok = [np.array_equal(got, v[reg]) for v in (old, new, expect)]
            assert any(ok), f"chunk {ix} is torn: {got}"

    assert os.path.isdir(blocked) and os.listdir(blocked) == ["keep"]
    assert _leftover_temp_files(root) == []
    # 3. unblock; a write now succeeds and every chunk is the new data
    shutil.rmtree(blocked)
    with zarr.config.set(PIPELINE), quiet_zarr():
        z = zarr.open_array(store=root, path="a", mode="r+")
        z[...] = new
    assert _assert_old_or_new(root, new, new) == dict.fromkeys(_chunk_regions(), "new")
    np.testing.assert_array_equal(np.asarray(zarrpipe.Store(root).open_array("a")[...]), new)
    # the files we did not block were replaced, not appended to or left half-written
    assert all(_read(key_file(root, stored_key("a", z, ix))) != b for ix, b in before.items())


def test_failed_read_modify_write_leaves_the_corrupt_chunk_alone(tmp_path):
    """A partial write into a corrupt chunk fails (typed, naming the key) and does not
    rewrite the corrupt chunk with guessed contents; other chunks are old or new."""
    root = str(tmp_path)
    old = (np.arange(96, dtype=DTYPE).reshape(WSHAPE) * 3 + 1).astype(DTYPE)
    new = (old + 1000).astype(DTYPE)
    with zarr.config.set(PIPELINE):
        write_plain(root, "crc32c", data=old)
        with quiet_zarr():
            z = zarr.open_array(store=root, path="a", mode="r+")
        bad_key = stored_key("a", z, (1, 1))
        file = key_file(root, bad_key)
        corrupt = bytearray(_read(file))
        corrupt[3] ^= 0x08
        with open(file, "wb") as f:
            f.write(bytes(corrupt))
        part = (slice(2, 6), slice(2, 6))  # partial in chunks (0,0), (0,1), (1,0), (1,1)
        assert_raises(lambda: z.__setitem__(part, new[part]), zarrpipe.ChecksumError, key=bad_key)
    assert _read(file) == bytes(corrupt)
    expect = old.copy()
    expect[part] = new[part]
    for ix, got in _state_of_chunks(root, skip={(1, 1)}).items():
        reg = _chunk_regions()[ix]
        assert np.array_equal(got, old[reg]) or np.array_equal(got, expect[reg]), ix


@pytest.mark.timeout(120)
def test_readers_never_see_a_torn_chunk_during_pipeline_writes(tmp_path):
    """One thread rewrites every chunk (uniform values k, then k+1...) through the zarrpipe
    pipeline while others read with zarrpipe: each chunk read is uniform (old or new value),
    never a decode error from a half-written file."""
    root = str(tmp_path)
    shape = (16, 16)
    with zarr.config.set(PIPELINE):
        write_plain(root, "zstd", data=np.zeros(shape, DTYPE), chunks=(4, 4))
        with quiet_zarr():
            z = zarr.open_array(store=root, path="a", mode="r+")
    rounds = 60
    done = threading.Event()
    problems: list[str] = []

    def writer() -> None:
        try:
            with zarr.config.set(PIPELINE):
                for k in range(1, rounds + 1):
                    z[...] = np.full(shape, k, DTYPE)
        except BaseException as e:  # reported below
            problems.append(f"writer: {e!r}")
        finally:
            done.set()

    def reader() -> None:
        arr = zarrpipe.Store(root).open_array("a")
        indices = [(i, j) for i in range(4) for j in range(4)]
        while True:
            finished = done.is_set()  # one more full pass after the writer is done
            kind, tensors = outcome(lambda: arr.read_chunks(indices))
            if kind == "raised":
                problems.append(f"reader: {tensors!r}")
                return
            for t in tensors:
                v = np.asarray(t)
                if not (v == v.flat[0]).all():
                    problems.append(f"torn chunk: {np.unique(v)}")
                    return
            kind, whole = outcome(lambda: np.asarray(arr[...]))
            if kind == "raised":
                problems.append(f"reader: {whole!r}")
                return
            for i, j in indices:
                v = whole[4 * i : 4 * i + 4, 4 * j : 4 * j + 4]
                if not (v == v.flat[0]).all():
                    problems.append(f"torn chunk in a whole read: {np.unique(v)}")
                    return
            if finished:
                return

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    np.testing.assert_array_equal(np.asarray(zarrpipe.Store(root).open_array("a")[...]), rounds)
    assert _leftover_temp_files(root) == []
