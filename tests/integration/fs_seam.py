"""The storage seam of the chaos tests: a subclass of a real fsspec filesystem, registered under its own protocol,
that counts the storage operations of one thread (every operation of ``CorpusStore`` goes through its
filesystem, on a local disk the renames and hard links too) and acts at a chosen one. Nothing in mcprm knows about
it: a run is pointed at ``seamfile:///path`` (or ``takeovers3://bucket/path``) instead of the plain URL.

* In process (``test_takeover``): :class:`Trip` calls an action (a takeover) at the N-th operation.
* In a process of its own (``test_chaos``, ``test_integrity``, ``test_one_pass``): :func:`run_killed` runs ``mcprm`` with
  ``MCPRM_TEST_KILL=when:op:pattern:n``; the child SIGKILLs itself ``before`` or ``after`` the n-th operation
  ``op`` (``*``: any) whose target path matches the glob ``pattern`` (for ``mv``/``link`` the target is the new
  name), e.g. ``before:link:*/versions/*:1``: between the commit's last lock check and its version file.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import subprocess
import sys
import threading

OPS = ("open", "pipe_file", "mv", "link", "rm", "rm_file", "info", "ls", "exists", "cat_file", "makedirs", "size")
LOCAL = "seamfile"


class Trip:
    """The operation counter shared by the wrapping filesystems (only the armed thread's operations count)."""

    n: int | None = None
    count = 0
    log: list[tuple[int, str, str]] = []
    action = None
    thread: int | None = None
    kill: tuple[str, str, str, int] | None = None  # (when, op, pattern, n)
    matched = 0

    @classmethod
    def arm(cls, n: int | None = None, action=None) -> None:
        cls.n, cls.count, cls.log, cls.action, cls.thread = n, 0, [], action, threading.get_ident()

    @classmethod
    def disarm(cls) -> None:
        cls.thread, cls.action = None, None


def _target(name: str, a: tuple, kw: dict, path) -> str:
    if name in ("mv", "link"):
        return str(a[0] if a else kw.get("path2", kw.get("dst", "")))
    return str(path)


def _counted(name, bound):
    def op(path, *a, **kw):
        kill = Trip.kill
        if kill is not None:
            when, what, pattern, n = kill
            hit = what in ("*", name) and fnmatch.fnmatchcase(_target(name, a, kw, path), pattern)
            if hit:
                Trip.matched += 1
            if hit and Trip.matched == n and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            out = bound(path, *a, **kw)
            if hit and Trip.matched == n and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        if Trip.thread == threading.get_ident():
            Trip.count += 1
            Trip.log.append((Trip.count, name, _target(name, a, kw, path)))
            if Trip.count == Trip.n and Trip.action is not None:
                act, Trip.action = Trip.action, None
                act()
        return bound(path, *a, **kw)

    return op


def wrapping(base, proto: str):
    """A subclass of the real filesystem ``base`` under protocol ``proto`` whose every public operation goes
    through :func:`_counted` (wrapped on the instance: async filesystems such as s3fs make their sync methods
    per instance)."""
    import fsspec

    pre = proto + "://"
    local = base.__name__ == "LocalFileSystem"

    def __init__(self, *a, **kw):
        base.__init__(self, *a, **kw)
        if not local:
            from fsspec.asyn import mirror_sync_methods

            mirror_sync_methods(self)  # the sync methods of an async filesystem, before they are wrapped
        for name in OPS:
            if hasattr(self, name):
                setattr(self, name, _counted(name, getattr(self, name)))

    def _strip_protocol(cls, path):
        path = str(path)
        if path.startswith(pre):
            path = "/" + path[len(pre):].lstrip("/") if local else path[len(pre):]
        return base._strip_protocol(path)

    cls = type("Seam" + base.__name__, (base,), {"protocol": (proto,), "__init__": __init__,
                                                 "_strip_protocol": classmethod(_strip_protocol)})
    fsspec.register_implementation(proto, cls, clobber=True)
    return cls


def local_seam() -> str:
    """Register the wrapping local filesystem; returns its protocol."""
    from fsspec.implementations.local import LocalFileSystem

    wrapping(LocalFileSystem, LOCAL)
    return LOCAL


def _child() -> None:  # pragma: no cover - runs in the subprocess
    when, what, rest = os.environ["MCPRM_TEST_KILL"].split(":", 2)
    pattern, n = rest.rsplit(":", 1)
    local_seam()
    Trip.kill = (when, what, pattern, int(n))
    from cli.main import main

    sys.argv[0] = "mcprm"
    main()


# The killed runs start from a pre-imported interpreter: a fork server (the standard library's) that imported the
# CLI, torch and transformers once, and forks each run from there. Each run is still a process of its own, killed
# by a real SIGKILL, that loads the model, starts its graders and writes through the seam itself; what it skips is
# seconds of imports (about 2.5 s of CPU each, 26 runs in test_chaos alone). Only runs whose environment is the
# one the server was started with go this way (settings read at import time are then the same as a fresh
# process's); any other environment gets a fresh interpreter.
# (transformers imports its parts lazily: the model classes, and what they pull in, are named here)
_PRELOAD = ["tests.integration.fs_seam", "cli.main", "pipeline.run", "rollouts.hf", "torch", "pandas",
            "pyarrow.parquet", "transformers.models.auto.modeling_auto", "transformers.models.llama.modeling_llama"]
_server: dict = {}


def _forked(args: list[str], env: dict, cwd: str, out: str, err: str) -> None:  # pragma: no cover - in the child
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["mcprm", *args]
    code = 0
    try:
        _child()
    except SystemExit as e:  # how the CLI ends, as the interpreter would turn it into an exit status
        if isinstance(e.code, int) or e.code is None:
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        # a run that is not killed ends as an interpreter does (a forked child would skip this): its non-daemon
        # threads joined, then its atexit handlers (a Ray of its own stopped, temporary folders removed)
        import atexit

        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _fork_server_env(e: dict):
    """The fork server's context when ``e`` (less the kill spec) is the environment it was started with."""
    import multiprocessing as mp
    from multiprocessing import forkserver

    # (pytest's own variable names the running test: never read by mcprm)
    base = {k: v for k, v in e.items() if k not in ("MCPRM_TEST_KILL", "PYTEST_CURRENT_TEST")}
    if not _server:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(base)
        try:
            forkserver.ensure_running()  # imports with exactly this environment
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _server.update(ctx=ctx, env=base)
    return _server["ctx"] if base == _server["env"] else None


def stop_fork_server() -> None:
    """The fork server ended (it would end with this process anyway: it exits when its parent does)."""
    if _server:
        from multiprocessing import forkserver

        forkserver._forkserver._stop()
        _server.clear()


def run_killed(*args: str, kill: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mcprm *args`` in a process of its own whose storage operations go through the seam (an ``--output`` path
    is given as ``seamfile://``), SIGKILLed at ``kill`` (``when:op:pattern:n``)."""
    import tempfile

    from .conftest import ROOT, budget

    args = list(args)
    if "--output" in args:
        i = args.index("--output") + 1
        args[i] = f"{LOCAL}://{os.path.abspath(args[i])}"
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {}, MCPRM_TEST_KILL=kill)
    cmd = [sys.executable, "-c", "from tests.integration.fs_seam import _child; _child()", *args]
    ctx = _fork_server_env(e)
    if ctx is None:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=budget(timeout), cwd=ROOT, env=e)
    with tempfile.TemporaryDirectory(prefix="mcprm-killed-") as d:
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        p = ctx.Process(target=_forked, args=(args, e, str(ROOT), out, err))
        p.start()
        p.join(budget(timeout))
        if p.exitcode is None:  # still running: ended here, and said as subprocess.run says it
            p.kill()
            p.join(10)
            raise subprocess.TimeoutExpired(cmd, timeout)
        read = lambda path: open(path, errors="replace").read() if os.path.exists(path) else ""  # noqa: E731
        return subprocess.CompletedProcess(cmd, p.exitcode, read(out), read(err))
