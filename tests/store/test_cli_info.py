"""`zarrpipe info`: codecs, chunks stored out of the grid and bytes stored (checked against
zarr-python and the files), `--json`, `--option` for object stores, `--version`, and errors
that exit 1 without creating anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
import zarrpipe
from support.remote_servers import moto_s3, upload_dir
from support.zarr_stores import quiet_zarr_writes
from zarr.codecs import ZstdCodec
from zarrpipe.cli import main


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "info.zarr"
    with quiet_zarr_writes():
        g = zarr.open_group(str(root), mode="w", attributes={"title": "t"})
        a = g.create_array(
            "chunked", shape=(8, 8), chunks=(4, 4), dtype="uint16", compressors=ZstdCodec(level=3)
        )
        a[:4, :] = 1  # 2 of 4 chunks
        a[4:, :4] = 2  # 3 of 4
        s = g.create_array("sharded", shape=(16,), chunks=(2,), shards=(8,), dtype="float32")
        s[:8] = np.arange(8)  # 1 of 2 shards
        v2 = zarr.create_array(
            str(root / "v2"),
            shape=(10,),
            chunks=(5,),
            dtype="int8",
            zarr_format=2,
            compressors=None,
        )
        v2[:] = 3
        g.create_group("empty")
    return root


def run_json(args: list[str], capsys) -> dict:
    assert main(["info", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_counts_match_zarr_python_and_the_files(store, capsys):
    out = run_json([str(store)], capsys)
    nodes = {n["path"]: n for n in out["nodes"]}
    assert set(nodes) == {"/", "/chunked", "/sharded", "/v2", "/empty"}
    assert nodes["/"]["kind"] == "group" and nodes["/"]["attributes"] == {"title": "t"}
    with quiet_zarr_writes():
        for path in ("chunked", "sharded", "v2"):
            z = zarr.open_array(str(store / path), mode="r")
            n = nodes["/" + path]
            assert n["chunks_stored"] == z.nchunks_initialized, path
            assert n["chunks_total"] == z.nchunks, path
            assert n["bytes_stored"] == dir_bytes(store / path), path
            assert n["shape"] == list(z.shape)
    assert nodes["/chunked"]["stored"] == 3 and nodes["/chunked"]["stored_of"] == 4
    assert nodes["/chunked"]["codecs"] == ["bytes", "zstd(level=3)"]
    assert nodes["/sharded"]["stored"] == 1 and nodes["/sharded"]["stored_of"] == 2
    assert nodes["/sharded"]["chunks_stored"] == 4 and nodes["/sharded"]["chunks_total"] == 8
    assert nodes["/sharded"]["codecs"][0].startswith("sharding_indexed[bytes")
    assert nodes["/v2"]["codecs"] == [] and nodes["/v2"]["zarr_format"] == 2


def test_text_lists_codecs_and_stored_counts(store, capsys):
    assert main(["info", str(store)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "/chunked" in line)
    assert "codecs=[bytes, zstd(level=3)]" in line and "stored=3/4 chunks" in line
    line = next(line for line in out.splitlines() if "/sharded" in line)
    assert "stored=1/2 shards" in line
    assert "group  /empty" in out
    assert main(["info", str(store), "chunked"]) == 0
    described = capsys.readouterr().out
    assert "codecs:      bytes, zstd(level=3)" in described
    assert f"stored:      3 of 4 chunks, {dir_bytes(store / 'chunked')} bytes" in described
    assert main(["info", str(store), "empty"]) == 0
    assert "kind:        group" in capsys.readouterr().out


def test_errors_exit_1_with_one_line(store, tmp_path, capsys):
    assert main(["info", str(store), "nope"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    assert main(["info", str(empty)]) == 1
    assert "no Zarr array or group" in capsys.readouterr().err
    assert main(["info", str(store), "--option", "novalue"]) == 2


def test_version():
    proc = subprocess.run(
        [sys.executable, "-m", "zarrpipe", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"zarrpipe {zarrpipe.__version__}"


def test_option_reaches_object_stores(store, capsys):
    with moto_s3() as endpoint:
        upload_dir(endpoint, "infobucket", store, "s.zarr")
        args = [
            "s3://infobucket/s.zarr",
            "--option",
            f"aws_endpoint={endpoint}",
            "--option",
            "allow_http=true",
            "--option",
            "aws_access_key_id=test",
            "--option",
            "aws_secret_access_key=test",
            "--option",
            "aws_region=us-east-1",
        ]
        out = run_json(args, capsys)
        nodes = {n["path"]: n for n in out["nodes"]}
        assert nodes["/chunked"]["stored"] == 3
        assert nodes["/chunked"]["bytes_stored"] == dir_bytes(store / "chunked")
        # Without allow_http the http:// endpoint is refused: exit 1, one line.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "zarrpipe",
                "info",
                "s3://infobucket/s.zarr",
                "--option",
                "aws_region=us-east-1",
                "--option",
                "aws_skip_signature=true",
                "--option",
                f"aws_endpoint={endpoint}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 1, proc
        assert len(proc.stderr.strip().splitlines()) == 1
