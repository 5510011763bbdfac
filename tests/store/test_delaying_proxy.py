"""The delaying proxy of the slow-network benchmark forwards every request once, unchanged,
and every response whole (ranges, HEAD, errors, chunked bodies, request bodies), and counts
what it forwarded. Its delays are set in every test but never timed."""

from __future__ import annotations

import contextlib
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import zarr
from support.delaying_proxy import DelayingProxy, proxy_process
from support.remote_servers import http_server, moto_s3, upload_dir
from support.zarr_stores import quiet_zarr_writes

SLOW = {"latency_ms": 5, "bandwidth_mbps": 200, "link_mbps": 400}


def connect(endpoint: str) -> http.client.HTTPConnection:
    host, port = endpoint.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


def test_forwards_gets_ranges_heads_and_errors_once_each(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    (tmp_path / "blob").write_bytes(data)
    with http_server(tmp_path) as (upstream, faults):
        proxy = DelayingProxy(upstream, **SLOW)
        c = connect(proxy.start())  # one keep-alive connection for all of them
        c.request("GET", "/blob")
        whole = c.getresponse()
        assert (whole.status, whole.read()) == (200, data)
        c.request("GET", "/blob", headers={"Range": "bytes=1000-70999"})
        part = c.getresponse()
        assert (part.status, part.read()) == (206, data[1000:71000])
        c.request("HEAD", "/blob")
        head = c.getresponse()
        assert (head.status, head.getheader("Content-Length"), head.read()) == (200, "300000", b"")
        c.request("GET", "/missing")
        missing = c.getresponse()
        missing_body = missing.read()
        assert missing.status == 404
        c.close()
        proxy.stop()
    assert faults.requests == 4  # each forwarded exactly once
    got = proxy.stats()
    assert (got["requests"], got["by_method"], got["connections"]) == (4, {"GET": 3, "HEAD": 1}, 1)
    assert got["body_bytes"] == len(data) + 70_000 + len(missing_body)


def test_counts_what_it_forwarded(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    with http_server(tmp_path) as (upstream, faults):
        proxy = DelayingProxy(upstream, **SLOW)
        with proxy:
            for _ in range(3):
                c = connect(proxy.endpoint)
                c.request("GET", "/a", headers={"Range": "bytes=0-9"})
                assert c.getresponse().read() == b"x" * 10
                c.request("HEAD", "/a")
                c.getresponse().read()
                c.close()
            got = proxy.stats()
    assert faults.requests == 6
    assert got["requests"] == 6 and got["by_method"] == {"GET": 3, "HEAD": 3}
    assert (got["ranged"], got["body_bytes"], got["connections"]) == (3, 30, 3)
    assert (got["latency_ms"], got["bandwidth_mbps"], got["link_mbps"]) == (5, 200, 400)


class _Chunked(BaseHTTPRequestHandler):
    """Answers a POST with its body, sent back in chunked transfer encoding."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 70_000):
            part = body[i : i + 70_000]
            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


@contextlib.contextmanager
def chunked_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chunked)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_request_bodies_and_chunked_responses_pass_whole():
    body = bytes(range(256)) * 1000
    with chunked_server() as upstream, DelayingProxy(upstream, **SLOW) as endpoint:
        c = connect(endpoint)
        for _ in range(2):  # the connection stays usable after a chunked response
            c.request("POST", "/echo", body=body)
            r = c.getresponse()
            assert (r.status, r.getheader("Transfer-Encoding"), r.read()) == (200, "chunked", body)
        c.close()


class _Unframed(BaseHTTPRequestHandler):
    """Answers a GET with a body that has no length: it ends when the connection does."""

    protocol_version = "HTTP/1.0"
    body = np.random.default_rng(1).integers(0, 256, 700_001, dtype=np.uint8).tobytes()

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        for i in range(0, len(self.body), 90_000):  # in pieces, as a network delivers it
            self.wfile.write(self.body[i : i + 90_000])


def test_a_body_without_length_passes_whole_until_the_connection_ends():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unframed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with DelayingProxy(upstream, **SLOW) as endpoint:
            c = connect(endpoint)
            c.request("GET", "/unframed")
            r = c.getresponse()
            got = (r.status, r.getheader("Content-Length"), r.read())
            assert got == (200, None, _Unframed.body)
            c.close()
    finally:
        server.shutdown()
        server.server_close()


def test_zarrpipe_reads_s3_through_the_proxy_process(tmp_path):
    pytest.importorskip("boto3")
    zarrpipe = pytest.importorskip("zarrpipe")
    data = np.arange(64 * 64, dtype="uint16").reshape(64, 64)
    with quiet_zarr_writes():
        a = zarr.create_array(tmp_path / "d.zarr", shape=data.shape, chunks=(16, 16),
                              shards=(32, 64), dtype="uint16")  # fmt: skip
        a[:] = data
    with moto_s3() as moto, proxy_process(moto, **SLOW) as (endpoint, stats):
        upload_dir(moto, "proxied", tmp_path / "d.zarr", "d.zarr")  # directly, not proxied
        options = {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": "test",
                   "aws_secret_access_key": "test", "aws_region": "us-east-1"}  # fmt: skip
        store = zarrpipe.Store("s3://proxied/d.zarr", options=options)
        before = stats()
        got = np.asarray(store.read("", (slice(0, 40), slice(None))))
        after = stats()
    np.testing.assert_array_equal(got, data[:40])
    counts = store.request_counts()
    assert after["requests"] - before["requests"] == counts["gets"] + counts["heads"] > 0
    assert after["by_method"].get("PUT") is None  # the upload did not go through it
