"""The benchmark's per-read costs (CPU, page faults, storage reads) and the machine's memory
policies in the report header: what they measure, read from fakes where the real source
depends on the machine."""

import mmap
import os
import time

import pytest
from zarrpipe.bench import machine, report, usage


def test_a_read_s_cpu_and_page_faults_are_counted():
    before = usage.snapshot()
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    # 16 MiB of fresh anonymous memory touched page by page: thousands of minor faults
    # (an mmap of its own, kept off huge pages, which would fold them into a few).
    with mmap.mmap(-1, 16 << 20) as m:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            m.madvise(mmap.MADV_NOHUGEPAGE)
        for offset in range(0, len(m), mmap.PAGESIZE):
            m[offset] = 1
        cost = usage.between(before, usage.snapshot())
    assert cost["cpu_user_s"] + cost["cpu_sys_s"] >= 0.04
    assert cost["minor_faults"] >= (16 << 20) // mmap.PAGESIZE // 2
    assert cost["major_faults"] >= 0


def test_storage_reads_come_from_proc_io(tmp_path):
    io = tmp_path / "io"
    io.write_text("rchar: 900\nwchar: 0\nread_bytes: 12288\nwrite_bytes: 4096\n")
    assert usage.storage_read_bytes(str(io)) == 12288
    assert usage.storage_read_bytes(str(tmp_path / "missing")) is None
    io.write_text("rchar: 900\n")
    assert usage.storage_read_bytes(str(io)) is None
    if os.path.exists(usage.IO_PATH):
        assert usage.snapshot().storage_read_bytes >= 0


def test_between_is_the_difference_and_keeps_unknown_storage_unknown():
    a = usage.Snapshot(1.0, 0.5, 10, 1, 4096, 7.25)
    b = usage.Snapshot(3.5, 0.75, 110, 3, 4096 * 5, 7.5)
    assert usage.between(a, b) == {
        "cpu_user_s": 2.5,
        "cpu_sys_s": 0.25,
        "minor_faults": 100,
        "major_faults": 2,
        "storage_read_bytes": 4096 * 4,
        "steal_s": 0.25,
    }
    unknown = usage.Snapshot(3.5, 0.75, 110, 3, None)
    assert usage.between(a, unknown)["storage_read_bytes"] is None
    assert usage.between(a, unknown)["steal_s"] is None


def test_steal_time_comes_from_the_machine_s_cpu_line(tmp_path):
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  10 0 5 900 3 0 1 {3 * tick} 0 0\ncpu0 5 0 2 450 1 0 0 {tick} 0 0\n")
    assert usage.machine_steal_s(str(stat)) == 3.0
    assert usage.machine_cpu_s(str(stat)) == [v / tick for v in (10, 0, 5, 900, 3, 0, 1)] + [3.0]
    stat.write_text("cpu  10 0 5 900\n")  # a kernel without the column
    assert usage.machine_steal_s(str(stat)) is None
    assert usage.machine_steal_s(str(tmp_path / "missing")) is None
    if os.path.exists(usage.STAT_PATH):
        assert usage.snapshot().steal_s >= 0


def _write(root, path, text):
    p = root / path
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


@pytest.fixture
def vm_sysfs(tmp_path):
    """A sysfs tree like the Firecracker VMs': THP on madvise, free page reporting of
    2 MiB blocks, one running kdamond paging out file pages idle for a minute."""
    _write(tmp_path, machine.THP, "always [madvise] never")
    _write(tmp_path, machine.REPORTING, "9")
    ctx = f"{machine.KDAMONDS}/0/contexts/0"
    _write(tmp_path, f"{machine.KDAMONDS}/0/state", "on")
    _write(tmp_path, f"{ctx}/monitoring_attrs/intervals/aggr_us", "5000000")
    scheme = f"{ctx}/schemes/0"
    _write(tmp_path, f"{scheme}/action", "pageout")
    _write(tmp_path, f"{scheme}/access_pattern/age/min", "12")
    _write(tmp_path, f"{scheme}/quotas/bytes", str(128 << 20))
    _write(tmp_path, f"{scheme}/quotas/reset_interval_ms", "1000")
    for i, (kind, allow) in enumerate([("anon", "N"), ("unmapped", "Y")]):
        _write(tmp_path, f"{scheme}/ops_filters/{i}/type", kind)
        _write(tmp_path, f"{scheme}/ops_filters/{i}/allow", allow)
        _write(tmp_path, f"{scheme}/ops_filters/{i}/matching", "Y")
    return tmp_path


def test_memory_policies_of_a_vm(vm_sysfs):
    assert machine.memory_policies(str(vm_sysfs)) == [
        "transparent huge pages: madvise",
        "free page reporting: free blocks of 2 MiB and more go back to the hypervisor "
        "(fresh memory taken from them may have to be faulted in by the host)",
        "DAMON pages out page cache idle for 60 s or more, up to 128 MiB per 1 s",
    ]


def test_memory_policies_leave_out_what_is_off_or_absent(vm_sysfs, tmp_path_factory):
    (vm_sysfs / machine.KDAMONDS / "0" / "state").write_text("off\n")
    (vm_sysfs / machine.REPORTING).unlink()
    assert machine.memory_policies(str(vm_sysfs)) == ["transparent huge pages: madvise"]
    assert machine.memory_policies(str(tmp_path_factory.mktemp("empty"))) == []


def _report(rows, policies):
    meta = {
        "date": "2026-12-04T00:00:00+00:00",
        "platform": "Linux",
        "python": "3.11",
        "cpus": 2,
        "threads": 2,
        "repeats": 3,
        "warmup": 1,
        "size": "custom",
        "memory_policies": policies,
    }
    return {
        "meta": meta,
        "implementations": {},
        "datasets": {},
        "decode_limits": {},
        "rows": rows,
    }


def _row(impl, disk_mib, cache="warm"):
    return {
        "dataset": "zstd",
        "workload": "all",
        "implementation": impl,
        "mode": "in-process",
        "cache": cache,
        "status": "ok",
        "min_s": 1.0,
        "median_s": 1.0,
        "max_s": 1.0,
        "spread": 1.0,
        "mb_s": 1000.0,
        "mb_s_best": 1000.0,
        "mb_s_worst": 1000.0,
        "rss": {},
        "cpu_s": 1.87,
        "cpu_sys_s": 0.31,
        "storage_read_mib_max": disk_mib,
    }


def test_report_shows_costs_and_warns_of_a_warm_row_that_read_the_disk():
    # A fresh process pages in a few MiB of library code: not a cold page cache.
    rows = [
        _row("zarrpipe", 0.0),
        _row("zarr", 107.0),
        _row("zarrs", 3.0),
        _row("cold-one", 500.0, "cold"),
    ]
    text = report.text(_report(rows, ["transparent huge pages: madvise"]))
    assert "machine: transparent huge pages: madvise" in text
    warning = next(line for line in text.splitlines() if "warm-cache row" in line)
    assert warning.startswith("WARNING: 1 warm-cache row(s)") and "up to 107 MiB" in warning
    zp = next(line for line in text.splitlines() if line.split()[2:3] == ["zarrpipe"])
    assert "1.87" in zp and "0.31" in zp
    md = report.markdown(_report(rows[:1], []))
    assert "| CPU s | sys s | disk MiB |" in md and "warm-cache row" not in md
    # Against a dataset of 6 GiB stored, 107 MiB is under 2 %: not flagged.
    big = _report(rows, [])
    big["datasets"]["zstd"] = {
        "shape": [2048, 2048, 1024],
        "dtype": "uint16",
        "chunks": [256, 256, 256],
        "inner": None,
        "nbytes": 8 << 30,
        "stored_bytes": 6 << 30,
        "ratio": 1.33,
    }
    assert "warm-cache row" not in report.text(big)
