"""benches/first_touch.py runs end to end on a small mapping (so the script cannot rot): every
state and page size gives a row with one cost per 2 MiB step. No timing is asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "first_touch.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux page faults")


def test_the_probe_times_every_step_of_a_private_mapping():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", "base", "--mib", "16"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    costs = [float(c) for c in proc.stdout.strip().strip("[]").split(",")]
    assert len(costs) == 8 and all(c > 0 for c in costs)


@pytest.mark.timeout(120)
def test_every_state_and_page_size_gets_a_row():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--mib", "32", "--rounds", "1", "--gaps", "0", "--idle", "0"],
        capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = re.findall(r"^(idle|gap 0 s)\s+(huge|base)\s+\d+\s+[\d.]+\s+(\d+)\s+([.\-oX#]{8})$",
                      proc.stdout, re.M)  # fmt: skip
    assert {(state, pages) for state, pages, *_ in rows} == {
        (s, p) for s in ("idle", "gap 0 s") for p in ("huge", "base")
    }
    assert all(0 <= int(slow) <= 16 for _, _, slow, _ in rows)
