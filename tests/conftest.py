"""Session-wide: this machine's Ray for warm workers (``--keep-warm``, pipeline/execution/local_head.py) lives in a
state folder of the test session's own, never the user's ``~/.cache/mcprm/local-ray``: a test run that keeps
workers (or asks for GPUs, which keeps them by default) starts its keeper there, and a keeper still up at the end
is stopped. Every ``mcprm`` subprocess inherits the variable."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _own_local_ray_dir(tmp_path_factory):
    from pipeline.execution import local_head

    d = str(tmp_path_factory.mktemp("local-ray"))
    before = os.environ.get(local_head.DIR_ENV)
    os.environ[local_head.DIR_ENV] = d
    try:
        yield d
    finally:
        local_head.stop(d)
        if before is None:
            os.environ.pop(local_head.DIR_ENV, None)
        else:
            os.environ[local_head.DIR_ENV] = before
