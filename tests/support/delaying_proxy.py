"""A slow network in front of a local HTTP server (moto's S3): an HTTP/1.1 proxy that holds
every request for a fixed latency and paces response bodies to a bandwidth cap, and counts
what passes. Used by the remote tests and by benches/s3_read.py (there in its own process,
`python tests/support/delaying_proxy.py --upstream URL ...`, so it never competes with the reader
being measured for the GIL).

Each request waits `latency_ms` once, after the proxy has received it and before it is sent
upstream (a round trip). Each response body is sent at most at `bandwidth_mbps` (Mbit/s, per
request, as a single TCP stream from an object store gets), and all of them together at most
at `link_mbps` (the machine's link) when that is set; 0 turns a cap off. Requests on one
connection are forwarded in order on one upstream connection; the Host header and everything
else pass unchanged, so signed requests stay valid. `GET /__proxy__/stats` answers the counts
as JSON itself (no bucket can be named `__proxy__`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

# Bytes relayed between two pacing decisions (2 ms at 1000 Mbit/s), through one reused
# buffer: the proxy shares the cores with the reader being measured, and a real network's
# copies cost the client nothing, so the relay copies each byte once (`readinto1`, then
# `sendall` of a view) rather than into fresh `bytes` and slices of them.
BLOCK = 256 * 1024
STATS_PATH = "/__proxy__/stats"


class _Link:
    """Paces bytes to a rate: `send(n)` returns once n more bytes fit (shared when global)."""

    def __init__(self, mbps: float):
        self.rate = mbps * 1e6 / 8  # bytes per second; 0 means no cap
        self.lock = threading.Lock()
        self.free_at = 0.0

    def send(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            start = max(time.monotonic(), self.free_at)
            self.free_at = start + n / self.rate
            wait = self.free_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def _read_head(f) -> list[bytes] | None:
    """The lines of one HTTP head (start line first), None at a clean end of the stream."""
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            if lines:
                raise ConnectionError("stream ended inside an HTTP head")
            return None
        if line in (b"\r\n", b"\n"):
            if lines:
                return lines
            continue  # tolerated: empty lines before a request
        lines.append(line)


def _headers(lines: list[bytes]) -> dict[str, str]:
    out = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        out[name.strip().lower()] = value.strip()
    return out


class _Server(socketserver.ThreadingTCPServer):
    # socketserver listens with a backlog of 5: a client that opens more connections at once
    # has the rest of its SYNs dropped and retried a second later, a stall no real object
    # store causes.
    request_queue_size = 1024


class DelayingProxy:
    """`with DelayingProxy("http://127.0.0.1:PORT", latency_ms=20) as endpoint: ...`"""

    def __init__(
        self,
        upstream: str,
        latency_ms: float = 20.0,
        bandwidth_mbps: float = 1000.0,
        link_mbps: float = 0.0,
        port: int = 0,
    ):
        url = urlsplit(upstream)
        self.upstream = (url.hostname or "127.0.0.1", url.port or 80)
        self.latency = latency_ms / 1000
        self.bandwidth_mbps = bandwidth_mbps
        self.link = _Link(link_mbps)
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()  # by method
        self.ranged = 0  # requests with a Range header
        self.body_bytes = 0  # response body bytes sent to clients
        self.connections = 0
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        self.server = _Server(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> str:
        self.thread.start()
        return self.endpoint

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stats(self) -> dict:
        with self.lock:
            return {
                "requests": sum(self.requests.values()),
                "by_method": dict(self.requests),
                "ranged": self.ranged,
                "body_bytes": self.body_bytes,
                "connections": self.connections,
                "latency_ms": self.latency * 1000,
                "bandwidth_mbps": self.bandwidth_mbps,
                "link_mbps": self.link.rate * 8 / 1e6,
            }

    # -- one client connection ------------------------------------------------------------

    def _serve(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            self.connections += 1
        cin = client.makefile("rb")
        up: socket.socket | None = None
        upin = None
        try:
            while True:
                head = _read_head(cin)
                if head is None:
                    return
                method, target = head[0].split(b" ", 2)[:2]
                if target == STATS_PATH.encode():
                    body = json.dumps(self.stats()).encode()
                    client.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                    continue
                req = _headers(head)
                request = b"".join(head) + b"\r\n" + self._body_of(cin, req)
                with self.lock:
                    self.requests[method.decode()] += 1
                    self.ranged += "range" in req
                time.sleep(self.latency)
                if up is None:
                    up = socket.create_connection(self.upstream)
                    up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    upin = up.makefile("rb")
                up.sendall(request)
                # The response's own "Connection: close" reached the client too: both end.
                keep = self._relay_response(upin, client, method == b"HEAD")
                if not keep or req.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, OSError):
            return
        finally:
            for f in (upin, up, cin):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()

    @staticmethod
    def _body_of(cin, headers: dict[str, str]) -> bytes:
        """A request's body, raw (chunked framing kept)."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size_line = cin.readline()
                parts.append(size_line)
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    while True:  # trailers, up to the empty line
                        line = cin.readline()
                        parts.append(line)
                        if line in (b"\r\n", b"\n", b""):
                            return b"".join(parts)
                parts.append(cin.read(size + 2))
        return cin.read(int(headers.get("content-length", 0) or 0))

    def _relay_response(self, upin, client: socket.socket, head_only: bool) -> bool:
        """Forwards one response, pacing its body; True if both connections can be kept."""
        while True:
            head = _read_head(upin)
            if head is None:
                raise ConnectionError("upstream closed without a response")
            status = int(head[0].split(b" ", 2)[1])
            client.sendall(b"".join(head) + b"\r\n")
            if status >= 200 or status == 101:
                break
        headers = _headers(head)
        pace = _Link(self.bandwidth_mbps)
        buf = memoryview(bytearray(BLOCK))

        def relay(left: int | None) -> None:
            """Forwards `left` body bytes (None: up to the end of the stream), paced."""
            while left is None or left:
                n = upin.readinto1(buf if left is None else buf[: min(left, BLOCK)])
                if not n:
                    if left is None:
                        return
                    raise ConnectionError("upstream closed inside a response body")
                pace.send(n)
                self.link.send(n)
                client.sendall(buf[:n])
                with self.lock:
                    self.body_bytes += n
                if left is not None:
                    left -= n

        keep = headers.get("connection", "").lower() != "close"
        if head_only or status in (204, 304):
            return keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = upin.readline()
                size = int(size_line.split(b";")[0], 16)
                client.sendall(size_line)
                if size == 0:
                    while True:
                        line = upin.readline()
                        client.sendall(line)
                        if line in (b"\r\n", b"\n", b""):
                            return keep
                relay(size)
                client.sendall(upin.read(2))
        if "content-length" in headers:
            relay(int(headers["content-length"]))
            return keep
        relay(None)  # no length: the body ends with the connection
        return False


@contextlib.contextmanager
def proxy_process(
    upstream: str, latency_ms: float, bandwidth_mbps: float, link_mbps: float = 0.0
) -> Iterator[tuple[str, Callable[[], dict]]]:
    """The proxy in a child process: yields (its endpoint, a function returning its stats)."""
    cmd = [sys.executable, __file__, "--upstream", upstream, "--latency-ms", str(latency_ms),
           "--bandwidth-mbps", str(bandwidth_mbps), "--link-mbps", str(link_mbps)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("listening "):
            raise RuntimeError(f"the delaying proxy did not start: {line!r}")
        endpoint = line.split()[1]

        def stats() -> dict:
            with urllib.request.urlopen(endpoint + STATS_PATH, timeout=10) as r:
                return json.load(r)

        yield endpoint, stats
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:5000")
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--bandwidth-mbps", type=float, default=1000.0)
    p.add_argument("--link-mbps", type=float, default=0.0)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()
    proxy = DelayingProxy(a.upstream, a.latency_ms, a.bandwidth_mbps, a.link_mbps, a.port)
    print(f"listening {proxy.endpoint}", flush=True)
    proxy.server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
