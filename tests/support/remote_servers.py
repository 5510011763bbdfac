"""Servers on 127.0.0.1 for the remote-store tests: moto's S3 server, and an HTTP server
that serves a directory with byte ranges and injects faults on request."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


# moto checks a conditional PUT's If-Match and then stores, in two steps: two requests at
# once can both pass the check. S3 does both as one step; this runs moto's app one request
# at a time, so conditional writes mean what they mean on S3.
_ONE_REQUEST_AT_A_TIME = """
import sys, threading
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def one_at_a_time(environ, start_response):
    with lock:
        body = app(environ, start_response)
        return [b"".join(body)]
run_simple("127.0.0.1", int(sys.argv[1]), one_at_a_time, threaded=True)
"""


@contextlib.contextmanager
def moto_s3(one_request_at_a_time: bool = False) -> Iterator[str]:
    """A moto S3 server; yields its endpoint URL. With `one_request_at_a_time`, requests
    are answered one after another, so that conditional writes are atomic, as on S3."""
    pytest.importorskip("moto.server")
    port = free_port()
    command = (
        [sys.executable, "-c", _ONE_REQUEST_AT_A_TIME, str(port)]
        if one_request_at_a_time
        else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    )
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def upload_dir(endpoint: str, bucket: str, root: Path, prefix: str) -> None:
    """Copies every file under `root` to s3://bucket/prefix/..."""
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            key = f"{prefix}/{path.relative_to(root).as_posix()}"
            # Public, so anonymous (unsigned) reads are allowed too.
            s3.upload_file(str(path), bucket, key, ExtraArgs={"ACL": "public-read"})


class Faults:
    """What the HTTP server does wrong, shared with its handler threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fail_next = 0  # answer the next N requests with 500
        self.fail_status = 500
        self.drop_next = 0  # send half a body, then close, for the next N GETs with a body
        self.drop_from = 0  # bodies of at least this many bytes only (0: any)
        self.delay = 0.0  # seconds to sleep before answering
        self.bytes_per_s = 0.0  # send bodies at most this fast (0: at once)
        self.ranges_from: Path | None = None  # answer range requests from this root instead
        self.requests = 0

    def take(self, attr: str) -> bool:
        with self.lock:
            n = getattr(self, attr)
            if n > 0:
                setattr(self, attr, n - 1)
                return True
            return False


def _handler(root: Path, faults: Faults) -> type[SimpleHTTPRequestHandler]:
    class Handler(SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args) -> None:  # quiet
            pass

        def _file(self) -> Path | None:
            path = Path(self.translate_path(self.path))
            return path if path.is_file() else None

        def _refuse(self) -> bool:
            with faults.lock:
                faults.requests += 1
                delay = faults.delay
            if delay:
                time.sleep(delay)
            if faults.take("fail_next"):
                self.send_response(faults.fail_status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
            return False

        def do_HEAD(self) -> None:
            if self._refuse():
                return
            path = self._file()
            if path is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(path.stat().st_size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self) -> None:
            if self._refuse():
                return
            path = self._file()
            if path is None:
                self.send_error(404)
                return
            header = self.headers.get("Range")
            if header and faults.ranges_from is not None:  # another version of the files
                path = faults.ranges_from / path.relative_to(Path(self.directory))
            data = path.read_bytes()
            start, end = 0, len(data)
            status = 200
            if header and header.startswith("bytes="):
                first, _, last = header[6:].partition("-")
                if first == "":  # suffix
                    start = max(0, len(data) - int(last))
                else:
                    start = int(first)
                    end = min(len(data), int(last) + 1) if last else len(data)
                if start >= len(data) and len(data) > 0:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            body = data[start:end]
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
            self.end_headers()
            if len(body) >= max(1, faults.drop_from) and faults.take("drop_next"):
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            rate, piece = faults.bytes_per_s, 64 * 1024
            if not rate:
                self.wfile.write(body)
                return
            for at in range(0, len(body), piece):
                self.wfile.write(body[at : at + piece])
                self.wfile.flush()
                time.sleep(piece / rate)

        def do_PUT(self) -> None:
            # A WebDAV-like PUT (object_store's HTTP store writes this way): the whole body
            # becomes the file. No conditional headers are honoured, as plain servers do.
            if self._refuse():
                return
            path = Path(self.translate_path(self.path))
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self) -> None:
            if self._refuse():
                return
            path = self._file()
            if path is not None:
                path.unlink()
            self.send_response(204 if path is not None else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@contextlib.contextmanager
def http_server(root: Path) -> Iterator[tuple[str, Faults]]:
    """Serves `root` over HTTP with byte ranges; yields (base URL, fault switches)."""
    faults = Faults()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, faults))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", faults
    finally:
        server.shutdown()
        server.server_close()
