"""The benchmark harness itself (no timing): tiny datasets, checksum verification, and rows of
wrong data reported as failures, never as numbers."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from zarrpipe.bench import adapters, checksum, datasets, report, runner, worker
from zarrpipe.bench.adapters import Adapter, ZarrpipeAdapter
from zarrpipe.cli import main as cli_main

TINY = {"shape": (32, 32, 32), "chunks": (16, 16, 16), "inner": (8, 8, 8)}


class FlipByteAdapter(ZarrpipeAdapter):
    """zarrpipe's reads with one bit flipped in the first byte of every result."""

    name = "flip-byte"

    def _np(self, tensor):
        out = np.from_dlpack(tensor.into_dlpack()).copy()
        out.reshape(-1).view(np.uint8)[0] ^= 1
        return out


class WrongChunkAdapter(ZarrpipeAdapter):
    """Returns chunk (0, 0, 0) for every chunk: right shape and dtype, wrong data."""

    name = "wrong-chunk"

    def read_piece(self, level, index, slices):
        return super().read_piece(level, (0,) * len(index), slices)


class RaisingAdapter(ZarrpipeAdapter):
    name = "raising"

    def read_all(self):
        raise RuntimeError("deliberately broken")


class MissingAdapter(Adapter):
    name = "missing"

    @classmethod
    def available(cls):
        return "deliberately unavailable"


TEST_ADAPTERS = [FlipByteAdapter, WrongChunkAdapter, RaisingAdapter, MissingAdapter]
ROWS = {  # the (dataset, workload) rows measured per implementation: few, to stay fast
    "zarrpipe": [("zstd", "all"), ("zstd-sharded", "chunks-2t"), ("zstd-sharded", "inner-batch")],
    "flip-byte": [("zstd", "all"), ("zstd-sharded", "inner-batch")],
    "wrong-chunk": [("zstd", "chunks-2t")],
    "raising": [("zstd", "all")],
    "missing": [("zstd", "all"), ("zstd-sharded", "chunks-2t")],
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench-data")
    datasets.generate(path, **TINY)
    return str(path)


@pytest.fixture(scope="module")
def bench_report(data_dir):
    """One runner call (a worker process per row) shared by the tests that read its rows."""
    for cls in TEST_ADAPTERS:
        adapters.register(cls.name, cls)
    try:
        ds = [datasets.open_dataset(data_dir, n) for n in ("zstd", "zstd-sharded")]
        names = ["zarrpipe", *(c.name for c in TEST_ADAPTERS)]
        return runner.run(
            ds,
            data_dir,
            implementations=names,
            repeats=1,
            threads=2,
            workloads=["all", "chunks-2t", "inner-batch"],
            timeout=120,
            only=lambda d, w, i: (d, w) in ROWS.get(i, ROWS["missing"]),
        )
    finally:
        for cls in TEST_ADAPTERS:
            adapters.unregister(cls.name)


def rows(rep, implementation):
    return [r for r in rep["rows"] if r["implementation"] == implementation]


def test_source_is_realistic_and_independent_of_slab_size():
    src = datasets.Source(TINY["shape"], seed=0)
    whole = src.slab(0, 32)
    assert whole.dtype == np.uint16
    assert np.array_equal(whole, np.concatenate([src.slab(0, 5), src.slab(5, 32)]))
    assert whole.std() > 10 and len(np.unique(whole)) > 100  # not zeros, not a flat formula
    assert not np.array_equal(whole, datasets.Source(TINY["shape"], seed=1).slab(0, 32))


def test_generate_writes_the_variants_with_matching_checksums(data_dir):
    import zarr

    source = datasets.Source(TINY["shape"], seed=0).slab(0, 32)
    manifest = json.loads(Path(data_dir, datasets.MANIFEST).read_text())
    assert set(manifest["datasets"]) == set(datasets.VARIANTS)
    for name in datasets.VARIANTS:
        d = datasets.open_dataset(data_dir, name)
        stored = zarr.open_array(d.root, path=d.path, mode="r")
        assert np.array_equal(stored[...], source)
        assert d.checksums["whole"] == checksum.digest(source)
        assert len(d.checksums["outer"]) == 8
        assert d.chunks == (16, 16, 16) and d.stored_bytes > 0
        assert d.ratio > 1.0 if name != "uncompressed" else d.ratio == pytest.approx(1.0)
    sharded = datasets.open_dataset(data_dir, "zstd-sharded")
    assert sharded.inner == (8, 8, 8) and len(sharded.checksums["inner"]) == 64
    assert tuple(zarr.open_array(sharded.root, path="zstd-sharded").shards) == (16, 16, 16)
    index, sl = datasets.pieces(TINY["shape"], (8, 8, 8))[-1]
    assert sharded.checksums["inner"][datasets.key(index)] == checksum.digest(source[sl])


def test_generate_reuses_matching_datasets_and_rewrites_changed_ones(tmp_path):
    logs = []
    datasets.generate(tmp_path, variants=["zstd"], **TINY)
    chunk_files = sorted((tmp_path / datasets.STORE / "zstd").rglob("c/*/*/*"))
    mtimes = [p.stat().st_mtime_ns for p in chunk_files]
    datasets.generate(tmp_path, variants=["zstd"], log=logs.append, **TINY)
    assert any(m.startswith("reusing zstd") for m in logs)
    assert [p.stat().st_mtime_ns for p in chunk_files] == mtimes
    logs.clear()
    datasets.generate(tmp_path, variants=["zstd"], seed=7, log=logs.append, **TINY)
    assert any(m.startswith("writing zstd") for m in logs)


def test_pieces_trim_at_the_edge():
    got = datasets.pieces((5, 3), (2, 2))
    assert got[0] == ((0, 0), (slice(0, 2), slice(0, 2)))
    assert got[-1] == ((2, 1), (slice(4, 5), slice(2, 3)))
    assert len(got) == 6


def test_verify_flags_wrong_data_in_process(data_dir):
    d = datasets.open_dataset(data_dir, "zstd")
    source = datasets.Source(TINY["shape"], seed=0).slab(0, 32)
    todo = datasets.pieces(d.shape, d.chunks)
    good = [(i, source[sl].copy()) for i, sl in todo]
    assert worker.verify(d, "outer", good, todo) is None
    assert worker.verify(d, "all", [("all", source)], todo) is None
    good[3][1][1, 2, 3] += 1
    assert "checksum mismatch in 1 of 8 chunks; first (0, 1, 1)" in worker.verify(
        d, "outer", good, todo
    )
    broken = source.copy()
    broken[20, 0, 0] ^= 4
    assert "first differing chunk (1, 0, 0)" in worker.verify(d, "all", [("all", broken)], todo)
    assert "wrong result" in worker.verify(d, "all", [("all", source[:16])], todo)
    assert "pieces returned" in worker.verify(d, "outer", good[:7], todo)


def test_correct_adapter_rows_pass_with_numbers(bench_report):
    ok = rows(bench_report, "zarrpipe")
    assert [(r["dataset"], r["workload"]) for r in ok] == ROWS["zarrpipe"]
    for r in ok:
        assert r["status"] == "ok", r["reason"]
        assert len(r["times_s"]) == 1 and len(r["warmup_s"]) == 1
        assert r["mb_s"] > 0 and r["rss"]["peak_mib"] > 0
        assert r["rss"]["peak_minus_before_mib"] >= r["rss"]["after_minus_before_mib"] >= 0 or (
            r["rss"]["after_minus_before_mib"] < 0  # freed memory can drop RSS below 'before'
        )


@pytest.mark.parametrize("name", ["flip-byte", "wrong-chunk"])
def test_wrong_data_is_a_failure_never_a_number(bench_report, name):
    measured = [r for r in rows(bench_report, name) if r["status"] != "skipped"]
    assert measured
    for r in measured:
        assert r["status"] == "failed"
        assert "checksum mismatch" in r["reason"]
        for number in ("times_s", "min_s", "median_s", "mb_s", "mb_s_best", "rss"):
            assert number not in r
    text = report.text(bench_report)
    assert f"FAILED: {measured[0]['reason']}" in text


def test_one_right_chunk_does_not_make_a_row_right(bench_report):
    (r,) = rows(bench_report, "wrong-chunk")
    assert "checksum mismatch in 7 of 8 chunks; first (0, 0, 1)" in r["reason"]


def test_errors_and_missing_implementations(bench_report):
    (raising,) = rows(bench_report, "raising")
    assert raising["status"] == "failed" and "mb_s" not in raising
    assert "RuntimeError: deliberately broken" in raising["reason"]
    missing = rows(bench_report, "missing")
    assert missing and all(r["status"] == "skipped" for r in missing)
    assert all(r["reason"] == "deliberately unavailable" for r in missing)
    assert bench_report["implementations"]["missing"]["available"] is False
    batch = [r for r in rows(bench_report, "zarrpipe") if r["workload"] == "inner-batch"]
    assert batch[0]["batch_api"] == "Array.read_chunks(indices)"


def test_report_outputs(bench_report, tmp_path):
    paths = report.write(bench_report, str(tmp_path))
    assert json.loads(Path(paths["json"]).read_text())["rows"] == bench_report["rows"]
    md = Path(paths["markdown"]).read_text()
    assert "| zstd | all |" in md and "FAILED" in md
    assert paths["chart"].endswith(".png") or "matplotlib" in paths["chart"]


def test_cli_info(data_dir, capsys):
    root = os.path.join(data_dir, datasets.STORE)
    assert cli_main(["info", root]) == 0
    out = capsys.readouterr().out
    assert "array  /zstd-sharded" in out and "shards=(16, 16, 16)" in out
    assert cli_main(["info", root, "zstd"]) == 0
    assert "chunks:      (16, 16, 16)" in capsys.readouterr().out
    assert cli_main(["info", root, "nope"]) == 1
