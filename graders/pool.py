"""A pool of killable worker processes for the sympy comparisons.

Each worker is a ``spawn`` process (never plain ``fork``: the grader runs inside Ray actors and processes
with torch threads) talking to the parent over its own pipe. A verdict has a hard wall-clock limit: past it
the worker is killed (SIGKILL) and replaced, and the verdict is ``(None, "timeout")``. A worker also arms
a softer in-process timer (85% of the limit) so that most slow comparisons give up without being killed.
Workers start lazily on first use, exit when their parent dies (pipe EOF or parent change), are shut down
at interpreter exit, and run under an address-space limit so a blow-up cannot take the machine.

Unlike a plain ``spawn`` process, a worker does not re-run the caller's ``__main__`` script: scripts need no
``if __name__ == "__main__"`` guard, and a script that imports torch does not make every worker import it.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing as mp
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a fresh worker must import sympy within this
DEFAULT_MEMORY_LIMIT = 4 << 30


class WorkerError(RuntimeError):
    """The worker processes could not be started or keep dying."""


class _SoftTimeout(BaseException):
    pass


def _raise_soft_timeout(signum, frame):
    raise _SoftTimeout()


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(0)


def _worker_main(conn, parent_pid: int, memory_limit: int) -> None:
    """Worker loop: receive ``(task_id, gold, answer, config)``, send ``(task_id, correct, reason)``."""
    import signal

    if memory_limit:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ImportError, ValueError, OSError):
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    from graders.symbolic import sympy_verdict

    signal.signal(signal.SIGALRM, _raise_soft_timeout)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if msg is None:
            return
        task_id, gold, answer, config = msg
        try:
            signal.setitimer(signal.ITIMER_REAL, max(0.01, 0.85 * config.timeout_s))
            result = sympy_verdict(gold, answer, config)
        except _SoftTimeout:
            result = (None, "timeout")
        except MemoryError:
            result = (None, "out of memory")
        except RecursionError:
            result = (None, "too large: recursion limit")
        except Exception as e:  # a sympy bug must not kill the worker
            result = (None, f"comparison failed: {type(e).__name__}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            conn.send((task_id, *result))
        except (OSError, EOFError, BrokenPipeError):
            return


_MAIN_LOCK = threading.Lock()


@contextmanager
def _main_hidden():
    """Hide ``__main__``'s file and spec while a worker starts, so spawn does not re-import the script."""
    main = sys.modules.get("__main__")
    with _MAIN_LOCK:
        if main is None:
            yield
            return
        saved = {a: getattr(main, a) for a in ("__file__", "__spec__") if hasattr(main, a)}
        try:
            main.__spec__ = None
            if "__file__" in saved:
                del main.__file__
            yield
        finally:
            for a, v in saved.items():
                setattr(main, a, v)


class _Worker:
    __slots__ = ("process", "conn", "ready", "task", "deadline", "started")

    def __init__(self, ctx, memory_limit: int):
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=_worker_main,
            args=(child_conn, os.getpid(), memory_limit),
            daemon=True,
            name="mcprm-grader",
        )
        with _main_hidden():
            self.process.start()
        child_conn.close()
        self.conn = parent_conn
        self.ready = False
        self.task: int | None = None
        self.deadline = 0.0
        self.started = time.monotonic()

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(timeout=5)
        except (OSError, ValueError):
            pass
        self.conn.close()


class WorkerPool:
    """``size`` killable sympy workers; :meth:`run` grades many (gold, answer, config) tasks in parallel."""

    def __init__(
        self, size: int | None = None, context: str = "spawn", memory_limit: int = DEFAULT_MEMORY_LIMIT
    ):
        self.size = size or min(4, os.cpu_count() or 1)
        self._ctx = mp.get_context(context)
        self._memory_limit = memory_limit
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.timeouts = 0
        self.restarts = 0

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    def warm(self) -> None:
        """Start the workers now (they load sympy in the background), so the first grading call does not wait
        for them: a labeling worker calls this while its model loads."""
        with self._lock:
            while len(self._workers) < self.size:
                self._start()

    def _start(self) -> _Worker:
        w = _Worker(self._ctx, self._memory_limit)
        self._workers.append(w)
        return w

    def _replace(self, w: _Worker) -> None:
        w.kill()
        self._workers.remove(w)
        self.restarts += 1

    def run(self, tasks: Sequence[tuple], timeout_s: float) -> list[tuple[bool | None, str]]:
        """Results of ``tasks`` (each ``(gold, answer, config)``), in order; a hung task gives (None, "timeout")."""
        if not tasks:
            return []
        with self._lock:
            return self._run(tasks, timeout_s)

    def _run(self, tasks: Sequence[tuple], timeout_s: float) -> list[tuple[bool | None, str]]:
        results: list = [None] * len(tasks)
        pending = deque(range(len(tasks)))
        want = min(self.size, len(tasks))
        failed_starts = 0
        while len(self._workers) < want:
            self._start()
        while pending or any(w.task is not None for w in self._workers):
            now = time.monotonic()
            for w in self._workers:
                if w.ready and w.task is None and pending:
                    i = pending.popleft()
                    try:
                        w.conn.send((i, *tasks[i]))
                    except (OSError, BrokenPipeError):
                        pending.appendleft(i)
                        w.ready = False
                        continue
                    w.task, w.deadline = i, now + timeout_s
            deadlines = [w.deadline for w in self._workers if w.task is not None]
            deadlines += [w.started + START_TIMEOUT_S for w in self._workers if not w.ready]
            wait_s = max(0.0, min(deadlines) - now) if deadlines else 0.05
            ready_conns = wait([w.conn for w in self._workers], timeout=wait_s)
            by_conn = {id(w.conn): w for w in self._workers}
            dead: list[_Worker] = []
            for c in ready_conns:
                w = by_conn[id(c)]
                try:
                    msg = c.recv()
                except (EOFError, OSError):
                    dead.append(w)
                    continue
                if msg[0] == "ready":
                    w.ready = True
                    failed_starts = 0
                elif w.task is not None and msg[0] == w.task:
                    results[w.task] = (msg[1], msg[2])
                    if msg[2] == "timeout":
                        self.timeouts += 1
                    w.task = None
            now = time.monotonic()
            for w in self._workers:
                if w in dead:
                    continue
                if w.task is not None and now >= w.deadline:
                    results[w.task] = (None, "timeout")
                    self.timeouts += 1
                    w.task = None
                    dead.append(w)
                elif not w.ready and now >= w.started + START_TIMEOUT_S:
                    dead.append(w)
            for w in dead:
                if w.task is not None:  # died while grading: do not retry a task that may crash it again
                    results[w.task] = (None, "worker crashed")
                    w.task = None
                if not w.ready:
                    failed_starts += 1
                self._replace(w)
                if failed_starts >= 3:
                    raise WorkerError(
                        "the sympy grader worker processes fail to start (exit code "
                        f"{w.process.exitcode}); check that `python -c 'import graders.symbolic'` works"
                    )
                if pending:
                    self._start()
        return results

    def close(self) -> None:
        """Stop every worker (politely, then by force)."""
        with self._lock:
            for w in self._workers:
                try:
                    w.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
            deadline = time.monotonic() + 1.0
            for w in self._workers:
                w.process.join(timeout=max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(timeout=5)
                w.conn.close()
            self._workers.clear()


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int = 0) -> WorkerPool:
    """The process-wide pool (created on first use; recreated when a different size is asked for)."""
    global _POOL
    with _POOL_LOCK:
        want = size or min(4, os.cpu_count() or 1)
        if _POOL is not None and _POOL.size != want:
            _POOL.close()
            _POOL = None
        if _POOL is None:
            _POOL = WorkerPool(want)
        return _POOL


def shutdown_pool() -> None:
    """Stop the process-wide pool's workers (a later grade starts new ones)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.close()
            _POOL = None


atexit.register(shutdown_pool)
