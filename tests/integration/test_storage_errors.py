"""Storage errors name the URL and say whether it was the input or the output (issue 14, point 6): missing
credentials and a missing bucket on a real S3-compatible server (moto), a path that is not a folder, a
permission error, through the CLI and through ``label()``."""

from __future__ import annotations

import os
import subprocess

import pytest

from pipeline.input import InputError
from pipeline.run import label
from pipeline.storage.store import StorageError

from .conftest import ROOT, invoke_mcprm, make_cfg, mcprm_cmd, run_mcprm
from .test_refresh import s3_server  # noqa: F401 - the moto fixture

NO_CREDENTIALS = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                  "AWS_EC2_METADATA_DISABLED": "true"}
UNSET = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE")


def _cli(inp, out, env=None, unset=(), here=False):
    """``mcprm label``; ``here``: in this process (a refusal said before any work: a message and an exit code)."""
    args = ("label", "--input", inp, "--output", out, "--k", "2", "--strategy", "per-step", "--max-new-tokens", "8", "--executor", "local",
            "-q")
    if here:
        return invoke_mcprm(*args, env=env)
    if not unset:
        return run_mcprm(*args, env=env)
    e = {k: v for k, v in os.environ.items() if k not in unset}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run(mcprm_cmd(*args), capture_output=True, text=True, timeout=600, cwd=ROOT, env=e)


def test_missing_credentials_name_input_or_output(small_input, s3_server, tmp_path):  # noqa: F811
    import boto3

    # boto3, not fsspec.filesystem("s3"): fsspec caches file systems, possibly one for an earlier test's server
    boto3.client("s3", endpoint_url=s3_server["AWS_ENDPOINT_URL"]).put_object(
        Bucket="corpus", Key="in.jsonl", Body=open(small_input, "rb").read())
    env = {k: v for k, v in dict(s3_server, **NO_CREDENTIALS).items() if k not in UNSET}

    r = _cli("s3://corpus/in.jsonl", str(tmp_path / "out"), env=env, unset=UNSET)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "input s3://corpus/in.jsonl" in r.stderr and "credentials" in r.stderr, r.stderr
    assert "AWS_ACCESS_KEY_ID" in r.stderr and "output" not in r.stderr

    r = _cli(small_input, "s3://corpus/prm", env=env, unset=UNSET)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "on the output s3://corpus/prm" in r.stderr and "credentials" in r.stderr, r.stderr
    assert "NoCredentialsError:" not in r.stderr


def test_missing_bucket_is_named_as_the_input(s3_server, tmp_path):  # noqa: F811
    r = _cli("s3://no-such-bucket/in.jsonl", str(tmp_path / "out"))
    assert r.returncode == 1
    assert "input s3://no-such-bucket/in.jsonl: no such file or folder" in r.stderr, r.stderr


def test_output_that_cannot_be_a_folder(small_input, tmp_path):
    out = tmp_path / "a-file"
    out.write_text("x")
    r = _cli(small_input, str(out / "corpus"), here=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    # issue 25: said before any work, in the user's words
    assert f"{out} is a file, not a folder, so --output {out / 'corpus'} cannot be created" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_permission_denied_on_input_and_output(small_input, tmp_path, monkeypatch):
    from fsspec.implementations.memory import MemoryFileSystem

    from pipeline.storage.store import CorpusStore

    real_write = CorpusStore.write_bytes

    def denied(self, rel, data):
        raise PermissionError(13, "Permission denied", self.path(rel))

    monkeypatch.setattr(CorpusStore, "write_bytes", denied)
    out = str(tmp_path / "out")
    with pytest.raises(StorageError) as e:
        label(make_cfg(small_input, out))
    assert f"storage error on the output {out}: Permission denied" in str(e.value), str(e.value)
    monkeypatch.setattr(CorpusStore, "write_bytes", real_write)

    def no_access(self, path, **kw):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(MemoryFileSystem, "isdir", no_access)
    with pytest.raises(InputError) as e:
        label(make_cfg("memory://bucket/in.jsonl", out))
    assert "cannot read the input memory://bucket/in.jsonl: permission denied" in str(e.value), str(e.value)

