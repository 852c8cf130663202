"""The shard store (unit): how storage failures are recognised and described."""

from __future__ import annotations


def test_storage_failure_classification():
    from pipeline.storage.failures import describe_storage_failure, is_storage_failure

    class NoCredentialsError(Exception):
        pass

    NoCredentialsError.__module__ = "botocore.exceptions"
    e = NoCredentialsError("Unable to locate credentials")
    assert is_storage_failure(e) and "no credentials" in describe_storage_failure(e)
    assert is_storage_failure(PermissionError(13, "Permission denied"))
    assert not is_storage_failure(ValueError("a bug"))


def test_atomic_file_is_published_whole_or_not_at_all(tmp_path):
    import pytest

    from pipeline.storage.atomic import AtomicFile

    target = tmp_path / "sub" / "f.json"
    with AtomicFile(str(target)) as f:
        f.write(b"whole")
        assert not target.exists()  # readers see nothing until it is published
    assert target.read_bytes() == b"whole"
    with pytest.raises(RuntimeError), AtomicFile(str(target)) as f:
        f.write(b"half")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"whole"
    af = AtomicFile(str(target))
    af.write(b"second")
    with pytest.raises(FileExistsError):
        af.publish(exclusive=True)  # create-if-absent: one creator wins
    assert target.read_bytes() == b"whole"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.json"]  # no temporary file left
