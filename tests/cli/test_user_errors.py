"""cli.common.user_errors reads a storage failure's own message by type (StorageError.message, issue 27), not
through an attribute probed on any exception."""

from __future__ import annotations

import pytest
import typer

from cli.common import user_errors
from pipeline.storage.store import StorageError


def _said(exc: BaseException, capsys) -> str:
    with pytest.raises(typer.Exit) as e:
        with user_errors():
            raise exc
    assert e.value.exit_code == 1
    return capsys.readouterr().err


def test_a_storage_error_that_says_it_all_is_printed_as_is(capsys):
    msg = "storage error on the output s3://b/out: quota exceeded. Nothing was committed by this run."
    err = _said(StorageError.said(msg, errno=122), capsys)
    assert err.strip() == f"error: {msg}"  # not "[Errno 122] ..." and no advice added
    assert str(StorageError.said("plain")) == "plain"


def test_other_storage_failures_name_the_file_and_what_to_do(capsys):
    err = _said(StorageError(28, "No space left on device", "/d/out/part-1.parquet"), capsys)
    assert "No space left on device (/d/out/part-1.parquet). Fix the storage problem" in err
    err = _said(OSError(30, "Read-only file system"), capsys)  # no file name: none shown
    assert "Read-only file system. Fix the storage problem" in err and "(None)" not in err
