"""Session-wide: this machine's Ray for warm workers (``--keep-warm``, pipeline/execution/keeper.py) lives in a
state folder of the test session's own, never the user's ``~/.cache/mcprm/local-ray``: a test run that keeps
workers (or asks for GPUs, which keeps them by default) starts its keeper there, and a keeper still up at the end
is stopped. Every ``mcprm`` subprocess inherits the variable."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _own_local_ray_dir(tmp_path_factory):
    from pipeline.execution import keeper

    d = str(tmp_path_factory.mktemp("local-ray"))
    before = os.environ.get(keeper.DIR_ENV)
    os.environ[keeper.DIR_ENV] = d
    try:
        yield d
    finally:
        keeper.stop(d)
        if before is None:
            os.environ.pop(keeper.DIR_ENV, None)
        else:
            os.environ[keeper.DIR_ENV] = before


@pytest.fixture(autouse=True)
def _no_lock_outlives_its_test():
    """A test that takes a lock releases it: a held lock keeps a heartbeat thread writing to a folder the test
    no longer owns (and into the next test's spies). A leak fails its own test: threads that were already running
    before a test are not counted against it."""
    import threading

    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate()
              if t.name == "mcprm-lock-heartbeat" and t not in before and t.is_alive()]
    if not leaked:
        return
    for t in leaked:
        t.join(timeout=5)  # a lock released at the very end of the test: its thread may still be finishing
    still = [t for t in leaked if t.is_alive()]
    if still:
        pytest.fail(f"{len(still)} lock heartbeat thread(s) still running after the test: release every lock it takes")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """How the two workers share the run (``--dist loadgroup``, pyproject's addopts). A test module is one unit of
    work (one worker runs all of it, so a module's shared fixtures are built once), unless its tests name their
    own ``xdist_group`` (a long module split in parts that two workers can run at once; each part builds the
    module's fixtures itself). Units with a test marked ``slow`` go first: the longest work started first is what
    keeps both workers busy to the end, instead of one long module starting last while the other worker idles.
    Runs before xdist reads the groups; with ``-n 0`` only the order changes."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))

    def group(item):
        m = item.get_closest_marker("xdist_group")
        return m.args[0] if m.args else m.kwargs.get("name", "default")

    heavy = {group(it) for it in items if it.get_closest_marker("slow") is not None}
    items.sort(key=lambda it: group(it) not in heavy)  # stable: the collection order otherwise
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        for it in items:
            _name_group(it, group(it))


def _name_group(item, name: str) -> None:
    """xdist reads a test's group from its node id (``path::test@group``: what the controller schedules by),
    which its own hook writes as ``item._nodeid``. pytest 9.2 keeps the id in ``item._id`` and no longer reads
    ``_nodeid``: xdist's suffix is lost there and every test is scheduled on its own, a module's tests spread over
    both workers, each building the module's shared fixtures. Where the id lives in ``_id`` it is written here;
    elsewhere xdist's hook, which runs after this one, writes it as before."""
    if hasattr(item, "_id") and not item.nodeid.endswith(f"@{name}"):
        item._id = type(item._id).parse(f"{item.nodeid}@{name}")
