"""The benchmark harness itself (no timing): tiny datasets, checksum verification, and rows of
wrong data reported as failures, never as numbers."""

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from zarrpipe.bench import (
    adapters,
    checksum,
    datasets,
    decode_limit,
    report,
    runner,
    usage,
    worker,
)
from zarrpipe.bench.adapters import Adapter, ZarrpipeAdapter
from zarrpipe.cli import _parser
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


class CountingAdapter(ZarrpipeAdapter):
    """zarrpipe's read-all that logs, per read, its process and whether the page cache was
    "dropped" since the previous read (the fake drop_caches file holds "3"; it is emptied)."""

    name = "counted"

    def read_all(self):
        drop = os.environ.get("BENCH_TEST_DROP_FILE")
        dropped = False
        if drop and os.path.exists(drop):
            dropped = Path(drop).read_text() == "3\n"
            Path(drop).write_text("")
        with open(os.environ["BENCH_TEST_READ_LOG"], "a") as f:
            f.write(f"{os.getpid()} {dropped}\n")
        return super().read_all()


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
            repeats=2,
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
        assert (r["mode"], r["cache"]) == ("in-process", "warm")
        assert len(r["times_s"]) == 2 and len(r["warmup_s"]) == 1
        assert r["min_s"] == min(r["times_s"]) and r["max_s"] == max(r["times_s"])
        assert r["min_s"] <= r["median_s"] <= r["max_s"]
        assert r["spread"] == pytest.approx(r["max_s"] / r["min_s"])
        assert r["mb_s_worst"] <= r["mb_s"] <= r["mb_s_best"]
        assert r["mb_s"] > 0 and r["rss"]["peak_mib"] > 0
        # What each read cost its process: CPU (a decode is never free), page cache or disk.
        assert r["cpu_s"] > 0 and 0 <= r["cpu_sys_s"] <= r["cpu_s"]
        assert r["minor_faults"] >= 0
        no_io_accounting = usage.storage_read_bytes() is None  # no /proc/self/io here
        assert (r["storage_read_mib_max"] is None) == no_io_accounting
        assert no_io_accounting or r["storage_read_mib_max"] >= 0
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
        for number in ("times_s", "min_s", "median_s", "max_s", "spread", "mb_s", "rss"):
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


def test_summarize_gives_the_spread_of_the_timed_runs():
    def run(seconds, warmup=False, storage=0, steal=0.0):
        return {
            "warmup": warmup,
            "seconds": seconds,
            "rss_before": 0,
            "rss_after": 0,
            "rss_peak": 0,
            "cpu_user_s": seconds,
            "cpu_sys_s": seconds / 4,
            "minor_faults": int(seconds * 10),
            "major_faults": 0,
            "storage_read_bytes": storage,
            "steal_s": steal,
        }

    result = {
        "status": "ok",
        "baseline_rss": 0,
        "runs": [
            run(9.0, True, 2**30, steal=5.0),
            run(4.0, steal=0.4),
            run(1.0, storage=3 * 2**20),
            run(2.0, steal=0.1),
        ],
    }
    got = runner.summarize(8_000_000, result)
    assert got["times_s"] == [4.0, 1.0, 2.0] and got["warmup_s"] == [9.0]
    assert (got["min_s"], got["median_s"], got["max_s"], got["spread"]) == (1.0, 2.0, 4.0, 4.0)
    assert (got["mb_s_worst"], got["mb_s"], got["mb_s_best"]) == (2.0, 4.0, 8.0)
    # Medians of the timed reads; the warm-up's disk reads do not count against the row.
    assert (got["cpu_s"], got["cpu_sys_s"], got["minor_faults"]) == (2.5, 0.5, 20)
    assert got["storage_read_mib_max"] == 3.0
    assert got["steal_s_max"] == 0.4  # the warm-up's steal does not count either
    result["runs"][2]["storage_read_bytes"] = None  # no /proc/self/io in that worker
    assert runner.summarize(8_000_000, result)["storage_read_mib_max"] is None
    del result["runs"][1]["steal_s"]  # recorded before steal time was
    assert runner.summarize(8_000_000, result)["steal_s_max"] is None
    for r in result["runs"]:  # results written before these were recorded
        del r["cpu_user_s"]
    assert "cpu_s" not in runner.summarize(8_000_000, result)
    assert runner.summarize(1, {"status": "failed", "reason": "x"}) == {}


def test_decode_limit_of_each_compressed_dataset(bench_report):
    limits = bench_report["decode_limits"]
    assert set(limits) == {"zstd", "zstd-sharded"}
    zstd, sharded = limits["zstd"], limits["zstd-sharded"]
    assert zstd["status"] == "ok" and zstd["codec"].startswith("zstd")
    assert (zstd["level"], zstd["chunks"], zstd["chunk_shape"]) == ("outer", 8, [16, 16, 16])
    assert (sharded["level"], sharded["chunks"], sharded["chunk_shape"]) == ("inner", 64, [8] * 3)
    for lim in (zstd, sharded):
        assert lim["decoded_bytes"] == 32**3 * 2 and len(lim["seconds"]) == 3
        assert lim["limit_mb_s"] == pytest.approx(lim["single_thread_mb_s"] * os.cpu_count())
        assert lim["method"] == decode_limit.METHOD
    text = report.text(bench_report)
    assert "decode limit zstd-sharded: zstd (numcodecs Zstd), 64 chunks of (8, 8, 8)" in text
    assert f"decode limit, how: {decode_limit.METHOD}" in text
    headers, rows = report._pivot_rows(bench_report)
    assert headers[-2:] == ["decode limit", "zarrpipe / limit"]
    zstd_all = next(r for r in rows if r[:2] == ["zstd", "all"])
    assert zstd_all[-2] == f"{zstd['limit_mb_s']:.0f}" and zstd_all[-1].endswith("%")


def test_decode_limit_decodes_blosc_and_checks_what_it_decoded(data_dir):
    blosc = datasets.open_dataset(data_dir, "blosc")
    got = decode_limit.measure(blosc, repeats=1)
    assert got["codec"].startswith("blosc") and got["chunks"] == 8
    assert decode_limit.compressor(datasets.open_dataset(data_dir, "uncompressed")) is None
    sums = {**blosc.checksums, "outer": {**blosc.checksums["outer"], "1,0,1": "0" * 32}}
    with pytest.raises(ValueError, match=r"blosc: decoded chunk \(1, 0, 1\) differs"):
        decode_limit.measure(dataclasses.replace(blosc, checksums=sums), repeats=1)


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """Registers the counting and the raising adapters; yields the read log's path."""
    log = tmp_path / "reads.log"
    monkeypatch.setenv("BENCH_TEST_READ_LOG", str(log))
    for cls in (CountingAdapter, RaisingAdapter):
        adapters.register(cls.name, cls)
    yield log
    for cls in (CountingAdapter, RaisingAdapter):
        adapters.unregister(cls.name)


def reads(log: Path) -> list[tuple[int, bool]]:
    lines = [line.split() for line in log.read_text().splitlines()]
    return [(int(pid), dropped == "True") for pid, dropped in lines]


def test_fresh_processes_one_read_each_round_robin(data_dir, counted):
    ds = [datasets.open_dataset(data_dir, "zstd")]
    rep = runner.run(
        ds,
        data_dir,
        implementations=["zarrpipe", "counted", "raising"],
        workloads=[],
        fresh_processes=3,
        threads=2,
        timeout=120,
        decode_limits=False,
    )
    assert rep["meta"]["fresh_processes"] == 3 and rep["decode_limits"] == {}
    by = {r["implementation"]: r for r in rep["rows"]}
    assert set(by) == {"zarrpipe", "counted", "raising"}  # no in-process rows
    for name in ("zarrpipe", "counted"):
        r = by[name]
        assert (r["status"], r["mode"], r["workload"]) == ("ok", "fresh-process", "all")
        assert len(r["times_s"]) == 3 and len(r["warmup_s"]) == 1
        assert [p["round"] for p in r["processes"]] == [0, 1, 2, 3]
        # Each read's own costs, for telling what a slow one paid for.
        assert all(p["cpu_user_s"] + p["cpu_sys_s"] > 0 for p in r["processes"])
        assert all(p["minor_faults"] >= 0 and "steal_s" in p for p in r["processes"])
        assert r["min_s"] <= r["median_s"] <= r["max_s"]
    # Every read in its own process, the counted one read exactly once there (no warm-up).
    log = reads(counted)
    assert [pid for pid, _ in log] == [p["pid"] for p in by["counted"]["processes"]]
    pids = [p["pid"] for n in ("zarrpipe", "counted") for p in by[n]["processes"]]
    assert len(set(pids)) == 8
    # Round robin: zarrpipe and counted alternate, round by round.
    order = sorted((p["seq"], n) for n in ("zarrpipe", "counted") for p in by[n]["processes"])
    assert [n for _, n in order] == ["zarrpipe", "counted"] * 4
    raising = by["raising"]
    assert raising["status"] == "failed" and raising["processes"] == []
    assert raising["reason"].startswith("warm-up process: RuntimeError: deliberately broken")
    assert "times_s" not in raising and "mb_s" not in raising
    text = report.text(rep)
    assert report.FRESH_TITLE in text and "Every measured row" not in text
    zp = next(line for line in text.splitlines() if line.split()[:2] == ["zstd", "zarrpipe"])
    assert f"{by['zarrpipe']['spread']:.2f}x" in zp and zp.rstrip().endswith("ok")


def test_in_process_rounds_take_turns_in_a_rotating_order(data_dir, counted):
    ds = [datasets.open_dataset(data_dir, "zstd")]
    labels = []
    rep = runner.run(
        ds,
        data_dir,
        implementations=["zarrpipe", "counted", "raising"],
        workloads=["all"],
        repeats=2,
        rounds=3,
        threads=2,
        timeout=120,
        decode_limits=False,
        progress=lambda step, total, label: labels.append(label),
    )
    assert rep["meta"]["rounds"] == 3
    turns = [label for label in labels if "· round" in label]
    assert [t.split(" · ")[0] for t in turns] == [
        *("zarrpipe", "counted", "raising"),
        *("counted", "raising", "zarrpipe"),
        *("raising", "zarrpipe", "counted"),
    ]
    assert turns[-1].endswith("round 3/3")
    by = {r["implementation"]: r for r in rep["rows"]}
    assert [r["implementation"] for r in rep["rows"]] == ["zarrpipe", "counted", "raising"]
    for name in ("zarrpipe", "counted"):
        r = by[name]
        assert (r["status"], r["mode"]) == ("ok", "in-process")
        # Every timed read of every round counts, each round its own warm-up.
        assert len(r["times_s"]) == 6 and len(r["warmup_s"]) == 3
        assert len(r["round_medians_s"]) == 3
        assert r["min_s"] <= min(r["round_medians_s"]) <= max(r["round_medians_s"]) <= r["max_s"]
    # Three worker processes for counted, three reads in each (warm-up and two timed).
    pids = [pid for pid, _ in reads(counted)]
    assert len(pids) == 9 and len(set(pids)) == 3
    assert all(pids.count(p) == 3 for p in set(pids))
    raising = by["raising"]
    assert raising["status"] == "failed" and "times_s" not in raising
    assert raising["reason"].startswith("round 1: RuntimeError: deliberately broken")
    assert "in each of 3 rounds" in report.text(rep)


def test_cold_drops_the_cache_before_every_timed_read(data_dir, counted, tmp_path, monkeypatch):
    drop = tmp_path / "drop_caches"
    monkeypatch.setenv("BENCH_TEST_DROP_FILE", str(drop))
    ds = [datasets.open_dataset(data_dir, "zstd")]
    rep = runner.run(
        ds,
        data_dir,
        implementations=["counted"],
        workloads=["all"],
        repeats=2,
        fresh_processes=2,
        cold=True,
        drop_caches_path=str(drop),
        threads=2,
        timeout=120,
        decode_limits=False,
    )
    assert rep["meta"]["cold"] is True and rep["meta"]["cold_skipped"] is None
    in_process, fresh = rep["rows"]
    assert (in_process["mode"], fresh["mode"]) == ("in-process", "fresh-process")
    for r in (in_process, fresh):
        assert r["status"] == "ok" and r["cache"] == "cold" and len(r["times_s"]) == 2
    # in-process: warm-up, timed, timed; fresh: the warm-up process, then 2 timed processes.
    # (The first read sees the one drop the runner makes to find out whether it can.)
    assert [dropped for _, dropped in reads(counted)] == [True, True, True, False, True, True]
    assert "the page cache was dropped" in report.text(rep)


def test_cold_without_permission_skips_every_row_with_the_reason(data_dir, tmp_path):
    drop = str(tmp_path / "no-such-dir" / "drop_caches")
    ds = [datasets.open_dataset(data_dir, "zstd")]
    rep = runner.run(
        ds,
        data_dir,
        implementations=["zarrpipe"],
        workloads=["all", "chunks"],
        fresh_processes=2,
        cold=True,
        drop_caches_path=drop,
        threads=2,
        timeout=120,
        decode_limits=False,
    )
    assert len(rep["rows"]) == 3
    for r in rep["rows"]:
        assert r["status"] == "skipped" and "times_s" not in r
        assert r["reason"].startswith("cold cache: cannot drop the page cache")
        assert drop in r["reason"] and "FileNotFoundError" in r["reason"]
    assert rep["meta"]["cold_skipped"] == r["reason"]
    text = report.text(rep)
    assert f"COLD CACHE: every row skipped: {r['reason']}" in text
    assert f"zarrpipe skipped (all rows): {r['reason']}" in text
    paths = report.write(rep, str(tmp_path / "out"))
    assert paths["chart"].endswith("no chart") or "no chart (" in paths["chart"]


def test_cli_bench_options():
    args = _parser().parse_args(
        ["bench", "--fresh-processes", "10", "--cold", "--no-decode-limit", "--workloads", "none"]
    )
    assert (args.fresh_processes, args.cold, args.decode_limit) == (10, True, False)
    assert args.workloads == ["none"]
    defaults = _parser().parse_args(["bench"])
    assert (defaults.fresh_processes, defaults.cold, defaults.decode_limit) == (0, False, True)
    with pytest.raises(SystemExit, match="--workloads none measures nothing"):
        cli_main(["bench", "--workloads", "none"])
    with pytest.raises(SystemExit, match="--fresh-processes must be 0"):
        cli_main(["bench", "--fresh-processes", "-1"])
    with pytest.raises(SystemExit, match="--rounds must be at least 1"):
        cli_main(["bench", "--rounds", "0"])
    assert _parser().parse_args(["bench", "--rounds", "3"]).rounds == 3
    # Unset, they depend on --size (small: 3 rounds of 10 reads; else 1 of 3).
    assert (defaults.rounds, defaults.repeats) == (None, None)


def test_only_zarrpipes_own_failures_fail_the_run():
    from zarrpipe.cli import _exit_status

    assert _exit_status([]) == 0
    assert _exit_status(["zarr+zarrs", "zarrista"]) == 0
    assert _exit_status(["zarr+zarrs", "zarrpipe"]) == 1
    assert _exit_status(["zarr+zarrpipe"]) == 1


def test_small_arrays_measure_every_read_and_check_the_values(tmp_path):
    from zarrpipe.bench import adapters, small

    datasets = small.generate(str(tmp_path), sizes=["8MiB"])
    assert [d.name for d in datasets] == ["8MiB-chunked", "8MiB-sharded"]
    names = ["zarrpipe", "zarr"]
    specs = {n: adapters.REGISTRY[n] for n in names}
    result = small.run(datasets, names, specs, threads=2, rounds=1, repeats=2, timeout=300)
    rows = {(r["layout"], r["read"], r["reader"]): r for r in result["rows"]}
    assert set(rows) == {(lay, read, n) for lay, read in small.READS for n in names}
    for row in rows.values():
        assert row["status"] == "ok", row
        assert row["n"] == 2 and row["min_ms"] <= row["median_ms"] <= row["max_ms"]
    table = small.table(result)
    assert "| sharded, oindex every 8th row and column |" in table
    # The decode limit of small zstd chunks: one batched call, every chunk checked.
    from zarrpipe.bench import decode_limit

    limit = decode_limit.measure_batched(datasets[1], repeats=2)
    assert (limit["level"], limit["chunks"]) == ("inner", 1024)
    assert limit["decoded_bytes"] == 2048 * 2048 * 2 and limit["limit_mb_s"] > 0
    # A reader whose values differ from the source is a failed row, not a time.
    datasets[0].checksums["whole"] = "0" * 32
    bad = small.run(datasets[:1], ["zarrpipe"], specs, threads=2, rounds=1, repeats=1, timeout=300)
    (row,) = [r for r in bad["rows"] if r["layout"] == "chunked"]
    assert (row["status"], row["reason"]) == ("failed", "result differs from source")


def test_the_chart_title_counts_the_runs_of_every_round():
    from zarrpipe.bench.chart import title

    def meta(**extra):
        return {"repeats": 2, "size": "full", "threads": 2, **extra}

    in_process = [{"mode": "in-process"}]
    assert "median of 6 runs in 3 rounds" in title({"meta": meta(rounds=3), "rows": in_process})
    assert "median of 2 runs (" in title({"meta": meta(), "rows": in_process})
    fresh = title({"meta": meta(fresh_processes=10, cold=True), "rows": [{"mode": "fresh"}]})
    assert "median of 10 fresh processes" in fresh and "runs" not in fresh.split("(")[0]
    assert "cold cache" in fresh
