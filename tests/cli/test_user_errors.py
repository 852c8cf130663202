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


def _ray_task_error(cause: BaseException):
    """Ray's own wrapping of an exception a task raised, as Ray builds it on the worker."""
    import traceback

    from ray.exceptions import RayTaskError

    try:
        raise cause
    except BaseException as e:
        tb = traceback.format_exc()
        return RayTaskError("label_shard", tb, e, proctitle="ray::Worker", pid=1, ip="127.0.0.1")


def test_a_bug_on_a_ray_worker_is_a_typed_remote_error_with_the_worker_traceback(capsys, monkeypatch):
    pytest.importorskip("ray")
    from pipeline.errors import RemoteTaskError
    from pipeline.execution.ray_cluster import task_cause

    ray_e = _ray_task_error(ValueError("boom in the worker"))
    e = task_cause(ray_e)
    assert isinstance(e, RemoteTaskError) and isinstance(e.cause, ValueError)
    assert "Traceback" in e.detail and "boom in the worker" in e.detail
    assert not hasattr(ray_e.cause, "detail")  # nothing attached to the foreign exception
    monkeypatch.delenv("MCPRM_DEBUG", raising=False)
    try:
        raise e from ray_e
    except RemoteTaskError as raised:
        assert raised.__cause__ is ray_e
        err = _said(raised, capsys)
    assert err.strip() == "error: ValueError: boom in the worker. (set MCPRM_DEBUG=1 to see the traceback)."
    monkeypatch.setenv("MCPRM_DEBUG", "1")
    err = _said(e, capsys)
    assert "Traceback" in err and err.count("boom in the worker") == 2  # the worker's traceback, then the line


def test_errors_that_say_it_all_cross_from_a_ray_worker_as_their_own_type():
    pytest.importorskip("ray")
    from pipeline.execution.ray_cluster import task_cause
    from pipeline.execution.shard_worker import WorkerError

    for own in (WorkerError("in.jsonl line 4: ValueError: x", "worker traceback"),
                StorageError.said("storage error on the output: full"), FileNotFoundError(2, "gone", "m")):
        assert task_cause(_ray_task_error(own)) is own
