"""One error base class (pipeline.errors): every error of the pipeline is a McprmError of one of two kinds, and
keeps the built-in base that callers may already catch."""

from __future__ import annotations

import pytest

from pipeline.config import ConfigError
from pipeline.corpus import CorpusError
from pipeline.errors import FatalError, McprmError, RowError
from pipeline.execution.ray_cluster import ResourceError
from pipeline.execution.shard_worker import WorkerError
from pipeline.export.common import ExportError
from pipeline.input import InputError
from pipeline.input.split import SplitError
from pipeline.storage.integrity import ManifestError
from pipeline.storage.lock import LockError, LockLost
from pipeline.storage.store import ShardError, StorageError


@pytest.mark.parametrize("cls,kind,builtin", [
    (ConfigError, FatalError, ValueError), (ResourceError, FatalError, ValueError),
    (InputError, FatalError, ValueError), (LockError, FatalError, RuntimeError),
    (LockLost, FatalError, RuntimeError), (ManifestError, FatalError, RuntimeError),
    (CorpusError, FatalError, ValueError), (ShardError, FatalError, RuntimeError),
    (StorageError, FatalError, OSError), (SplitError, RowError, ValueError),
    (WorkerError, RowError, RuntimeError), (ExportError, RowError, ValueError),
])
def test_every_error_has_one_base_and_its_kind(cls, kind, builtin):
    assert issubclass(cls, McprmError) and issubclass(cls, kind) and issubclass(cls, builtin)
    assert not issubclass(cls, FatalError if kind is RowError else RowError)


def test_storage_error_is_still_an_os_error():
    e = StorageError(28, "No space left on device", "/out/x")
    assert e.errno == 28 and e.filename == "/out/x" and isinstance(e, McprmError)


def test_cli_prints_any_mcprm_error_as_one_line(capsys):
    import typer

    from cli.common import user_errors

    with pytest.raises(typer.Exit) as ex:
        with user_errors():
            raise SplitError("in.jsonl line 3: cannot split")
    assert ex.value.exit_code == 1
    assert "cannot split" in capsys.readouterr().err
