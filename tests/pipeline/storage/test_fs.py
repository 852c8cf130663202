"""pipeline.storage.fs, the one place a URL becomes a file system: paths on each store, files opened in text and
binary modes, and a store's options (credentials, an endpoint) passed through to it unchanged, on a real
S3-compatible server (moto on loopback) that the environment says nothing about."""

from __future__ import annotations

import gzip
import socket
import subprocess
import sys
import time
import uuid

import pytest

from pipeline.storage import fs as storage_fs
from pipeline.storage.store import CorpusStore


def test_local_and_memory_paths(tmp_path):
    fs, path = storage_fs.filesystem(str(tmp_path / "a"))
    assert storage_fs.is_local(fs) and not storage_fs.is_memory(fs) and path == str(tmp_path / "a")
    name = uuid.uuid4().hex
    fs, path = storage_fs.filesystem(f"memory://{name}/x.txt")
    assert storage_fs.is_memory(fs) and not storage_fs.is_local(fs) and path == f"/{name}/x.txt"
    assert not storage_fs.exists(f"memory://{name}/x.txt")
    with storage_fs.open_url(f"memory://{name}/x.txt", "wb") as f:
        f.write("é\n".encode())
    assert storage_fs.exists(f"memory://{name}/x.txt")
    with storage_fs.open_url(f"memory://{name}/x.txt", "r", encoding="utf-8") as f:
        assert f.read() == "é\n"


def test_compression_and_a_missing_file(tmp_path):
    p = tmp_path / "rows.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}\n'))
    with storage_fs.open_url(str(p), "rb", compression="gzip") as f:
        assert f.read() == b'{"a": 1}\n'
    with pytest.raises(FileNotFoundError):
        storage_fs.open_url(str(tmp_path / "missing.txt"), "r", encoding="utf-8")
    with pytest.raises(ValueError):  # an unknown protocol: said by fsspec, as before
        storage_fs.filesystem("nosuchproto://x")


def test_options_reach_the_store_unchanged():
    pytest.importorskip("s3fs")
    options = {"key": "k-" + uuid.uuid4().hex[:6], "secret": "s", "endpoint_url": "http://127.0.0.1:9"}
    fs, path = storage_fs.filesystem("s3://bucket/corpus", options)
    assert storage_fs.is_s3(fs) and path == "bucket/corpus"
    assert {k: fs.storage_options[k] for k in options} == options
    store = CorpusStore("s3://bucket/corpus", storage_options=options)
    assert store.fs is fs and store.root == "bucket/corpus" and not store.local
    one, name = CorpusStore.for_file("s3://bucket/corpus/manifest.json", storage_options=options)
    assert one.fs is fs and name == "manifest.json"
    other, _ = storage_fs.filesystem("s3://bucket/corpus")  # no options: another file system
    assert other is not fs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto_endpoint(monkeypatch):
    """A moto S3 server on loopback, its address known only to the test: no AWS_* variable names it."""
    pytest.importorskip("moto")
    s3fs = pytest.importorskip("s3fs")
    for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
              "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        s3fs.S3FileSystem.clear_instance_cache()


def test_credentials_and_endpoint_passed_through_to_s3(moto_endpoint):
    options = {"key": "testing", "secret": "testing", "endpoint_url": moto_endpoint}
    fs, _ = storage_fs.filesystem("s3://passed", options)
    fs.mkdir("passed")
    with storage_fs.open_url("s3://passed/prompt.txt", "wb", storage_options=options) as f:
        f.write(b"critique {problem}")
    assert storage_fs.exists("s3://passed/prompt.txt", options)
    with storage_fs.open_url("s3://passed/prompt.txt", "r", storage_options=options, encoding="utf-8") as f:
        assert f.read() == "critique {problem}"
    store = CorpusStore("s3://passed/corpus", storage_options=options)
    store.write_bytes("data/x.json", b"{}")
    assert store.read_bytes("data/x.json") == b"{}" and fs.exists("passed/corpus/data/x.json")


def test_fsspec_configuration_applies_under_the_options(monkeypatch):
    # fsspec's own configuration (FSSPEC_S3_ENDPOINT_URL, ~/.config/fsspec/s3.json) reaches the store; an option
    # the caller passes wins over it
    pytest.importorskip("s3fs")
    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": "http://127.0.0.1:7", "anon": True})
    fs, _ = storage_fs.filesystem("s3://bucket/x")
    assert fs.storage_options == {"endpoint_url": "http://127.0.0.1:7", "anon": True}
    fs, _ = storage_fs.filesystem("s3://bucket/x", {"endpoint_url": "http://127.0.0.1:8"})
    assert fs.storage_options == {"endpoint_url": "http://127.0.0.1:8", "anon": True}


def test_corpus_readers_pass_the_options_through(moto_endpoint, tmp_path):
    # a corpus on a store only its options reach: read_corpus, iter_corpus and scan_corpus (pyarrow over the
    # store's file system, not polars' own reader, which knows nothing of fsspec's option names) all read it
    import json

    from pipeline.bundled import SAMPLE_PATH
    from pipeline.bundled.synthetic import exact_corpus
    from pipeline.corpus import iter_corpus, read_corpus, scan_corpus

    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:5]]
    exact_corpus(rows, tmp_path / "c")
    options = {"key": "testing", "secret": "testing", "endpoint_url": moto_endpoint}
    fs, _ = storage_fs.filesystem("s3://readers", options)
    fs.mkdir("readers")
    fs.put(str(tmp_path / "c") + "/", "readers/c/", recursive=True)
    ids = [r["id"] for r in rows]
    assert read_corpus("s3://readers/c", storage_options=options).column("id").to_pylist() == ids
    assert [i for b in iter_corpus("s3://readers/c", storage_options=options) for i in b.column("id").to_pylist()
            ] == ids
    assert scan_corpus("s3://readers/c", storage_options=options).collect()["id"].to_list() == ids
