"""The shard store (unit): how storage failures are recognised and described."""

from __future__ import annotations


def test_storage_failure_classification():
    from pipeline.storage.store import describe_storage_failure, is_storage_failure

    class NoCredentialsError(Exception):
        pass

    NoCredentialsError.__module__ = "botocore.exceptions"
    e = NoCredentialsError("Unable to locate credentials")
    assert is_storage_failure(e) and "no credentials" in describe_storage_failure(e)
    assert is_storage_failure(PermissionError(13, "Permission denied"))
    assert not is_storage_failure(ValueError("a bug"))
