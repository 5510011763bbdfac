"""Resident-memory measurement around one read: the method is chosen once and reported."""

from __future__ import annotations

import os
import re
import resource
import threading

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"

METHODS = {
    "vmhwm-reset": "VmHWM from /proc/self/status, reset before each read by writing 5 to "
    "/proc/self/clear_refs (kernel-tracked peak, exact)",
    "statm-sampler": "a thread sampling /proc/self/statm every 1 ms during each read "
    "(can miss spikes shorter than 1 ms; the sampler takes the GIL briefly)",
    "ru_maxrss": "getrusage ru_maxrss: the process's lifetime peak, never reset "
    "(no /proc); 'peak' is only meaningful for the first read",
}


def _status_kib(field: str) -> int:
    with open(_STATUS) as f:
        m = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    if m is None:
        raise OSError(f"{field} missing from {_STATUS}")
    return int(m.group(1))


def _statm_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_hwm() -> bool:
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return _status_kib("VmHWM") <= _status_kib("VmRSS") + 1024
    except OSError:
        return False


class RssProbe:
    """`start()` before a read, `stop()` after it: RSS before, RSS after and the peak between."""

    def __init__(self, method: str | None = None):
        if method is None:
            if _reset_hwm():
                method = "vmhwm-reset"
            elif os.path.exists("/proc/self/statm"):
                method = "statm-sampler"
            else:
                method = "ru_maxrss"
        self.method = method
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._peak = 0

    @property
    def description(self) -> str:
        return METHODS[self.method]

    def rss(self) -> int:
        """Current resident set size in bytes."""
        if self.method == "ru_maxrss":
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return _statm_rss_bytes()

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._peak = max(self._peak, _statm_rss_bytes())

    def start(self) -> int:
        """Resets the peak and returns the RSS before the read."""
        before = self.rss()
        if self.method == "vmhwm-reset":
            _reset_hwm()
            before = self.rss()
        elif self.method == "statm-sampler":
            self._peak = before
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return before

    def stop(self) -> tuple[int, int]:
        """(RSS after the read, peak RSS since `start`) in bytes."""
        after = self.rss()
        if self.method == "vmhwm-reset":
            peak = _status_kib("VmHWM") * 1024
        elif self.method == "statm-sampler":
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            peak = max(self._peak, after)
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return after, max(peak, after)
