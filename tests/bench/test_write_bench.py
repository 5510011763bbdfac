"""benches/write_bench.py runs end to end in its quick mode (so the script cannot rot): every
installed writer gives a row with numbers, and a writer that is not installed is skipped
with the reason. No timing is asserted."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "write_bench.py"


@pytest.mark.timeout(300)
def test_quick_write_bench_runs_every_writer(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "quick", "--repeats", "1", "--threads", "2",
         "--data-dir", str(tmp_path / "data"), "--json", str(out)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    installed = {
        "zarrpipe": True,
        "zarrpipe+durable": True,
        "zarr+zarrpipe": True,
        "zarr": True,
        "zarr-fused": False,  # needs --python-new
        "zarr+zarrs": importlib.util.find_spec("zarrs") is not None,
        "tensorstore": importlib.util.find_spec("tensorstore") is not None,
    }
    assert report["datasets"] == ["zstd", "zstd-sharded"]
    for ds, rows in report["results"].items():
        assert set(rows) == set(installed), ds
        for writer, row in rows.items():
            if writer == "zarr-fused":
                assert row["status"] == "skipped" and "--python-new" in row["reason"]
                continue
            if not installed[writer]:
                assert row["status"] == "skipped" and "not installed" in row["reason"]
                continue
            assert row["status"] == "ok", (ds, writer, row)
            assert len(row["runs"]) == 1
            assert 0 < row["s_min"] <= row["s_median"] <= row["s_max"]
            assert row["rss_growth_mib"] >= 0 and row["stored_mib"] > 0
            assert row["cpu_s_median"] > 0
            assert f"| {writer} | " in proc.stdout
        # The encode limit is measured in the same run and reported beside the writers.
        assert len(report["limits"][ds]["mbps_per_thread"]) == 1
        assert report["limits"][ds]["s_median"] > 0 and report["limits"][ds]["cpu_s"] > 0
    assert proc.stdout.count("Encode limit:") == 2
    # The source is kept in --data-dir and reused; outputs are deleted after each run.
    assert [p.name for p in (tmp_path / "data").iterdir()] == [
        next((tmp_path / "data").glob("source-*.npy")).name
    ]
