"""A pool of killable worker processes for the sympy comparisons (and the ``math-verify`` grader's).

Each worker is a plain ``python`` subprocess (never ``fork``: the grader runs inside Ray actors and processes
with torch threads; not ``multiprocessing``: its ``spawn`` starts a resource-tracker process that outlives the
command for up to seconds) talking to the parent over two pipes with :mod:`multiprocessing.connection`.
It imports only this package, never the caller's ``__main__`` script.

**Budgets are CPU time, not wall time**, so that a pair gets the same verdict on an idle and on a loaded
machine: a verdict may use ``timeout_s`` seconds of the worker's CPU (``ITIMER_PROF``; ``RLIMIT_CPU`` a little
above it kills a worker stuck inside C code). A comparison that runs out is retried once with
:data:`RETRY_FACTOR` times the budget (a warm worker; the retry is counted in :attr:`WorkerPool.retries`);
what still runs out is ``(None, "timeout")`` and counted in :attr:`WorkerPool.timeouts`. A generous
wall-clock cap (:func:`wall_cap`) is only the backstop for a worker that stops using CPU at all (stopped,
swapping): past it the worker is killed and replaced. Workers warm up (import sympy, parse and simplify a
few answers) before they report ready, so the first deadline never pays for imports. They exit when their
parent dies (pipe EOF or parent change), are shut down (and reaped) at interpreter exit, and run under an
address-space limit so a blow-up cannot take the machine.
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a fresh worker must import sympy (and warm up) within this
DEFAULT_MEMORY_LIMIT = 4 << 30
RETRY_FACTOR = 3.0  # a timed-out comparison is retried once with this many times the CPU budget
WALL_FACTOR, WALL_SLACK_S = 5.0, 5.0  # backstop: a task is killed after WALL_FACTOR * budget + WALL_SLACK_S


def wall_cap(cpu_budget_s: float) -> float:
    """Wall-clock seconds after which a task that has not answered is killed (only a worker that gets no CPU
    at all, or is stuck where signals cannot reach it, gets there: CPU budgets end tasks long before)."""
    return WALL_FACTOR * cpu_budget_s + WALL_SLACK_S


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


_WARM_UP = [
    (r"\frac{\sqrt{3}}{2}", r"\sin(\pi/3)"),
    (r"x^2 - 1", r"(x-1)(x+1)"),
    (r"(1, 2]", r"1 < x \le 2"),
    (r"\begin{pmatrix}1\\2\end{pmatrix}", r"(1, 2)"),
    (r"\sum_{k=1}^{3} k", r"6"),
]


def _cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _child_main() -> None:
    """Entry point of a worker process: ``python -c 'from graders.pool import _child_main; _child_main()'``
    with the pipe descriptors and settings in ``MCPRM_GRADER_WORKER``."""
    spec = json.loads(os.environ.pop("MCPRM_GRADER_WORKER"))
    conn_in = Connection(spec["rfd"], writable=False)
    conn_out = Connection(spec["wfd"], readable=False)
    _worker_main(conn_in, conn_out, spec["parent"], spec["memory"])


def _worker_main(conn_in, conn_out, parent_pid: int, memory_limit: int) -> None:
    """Worker loop: receive ``(task_id, gold, answer, config, cpu_budget[, kind])``, send ``(task_id, correct,
    reason, ...)`` (what the kind's function returns)."""
    import resource
    import signal

    if memory_limit:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ValueError, OSError):
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    from graders.config import GraderConfig
    from graders.symbolic import sympy_verdict

    signal.signal(signal.SIGPROF, _raise_soft_timeout)
    warm_cfg = GraderConfig()
    for gold, answer in _WARM_UP:  # the first parse and simplify load lazily imported code: not in a budget
        try:
            sympy_verdict(gold, answer, warm_cfg)
        except Exception:  # noqa: BLE001 - warming up is best effort
            pass
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    conn_out.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn_in.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if msg is None:
            return
        task_id, gold, answer, config, budget, *kind = msg
        try:
            verdict = _task_function(kind[0] if kind else "sympy", sympy_verdict)
        except Exception as e:  # noqa: BLE001 - e.g. the grader's package is missing in this environment
            try:
                conn_out.send((task_id, None, f"grader error: {type(e).__name__}: {e}"[:200]))
            except (OSError, EOFError, BrokenPipeError):
                return
            continue
        try:
            limit = int(_cpu_seconds() + 2 * budget + 2)  # SIGXCPU kills a worker stuck inside C code
            if cpu_hard == resource.RLIM_INFINITY or limit < cpu_hard:
                resource.setrlimit(resource.RLIMIT_CPU, (limit, cpu_hard))
        except (ValueError, OSError):
            pass
        try:
            signal.setitimer(signal.ITIMER_PROF, max(0.01, budget))
            result = verdict(gold, answer, config)
        except _SoftTimeout:
            result = (None, "timeout")
        except MemoryError:
            result = (None, "out of memory")
        except RecursionError:
            result = (None, "too large: recursion limit")
        except Exception as e:  # a sympy bug must not kill the worker
            result = (None, f"comparison failed: {type(e).__name__}")
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        try:
            conn_out.send((task_id, *result))
        except (OSError, EOFError, BrokenPipeError):
            return


_WARMED: dict = {}


def _task_function(kind: str, sympy_verdict):
    """What a task of ``kind`` runs in a worker: ``"sympy"`` (the default grader's comparison), or another
    grader's function of this package named ``"graders.module:function"`` (e.g. ``graders.mathverify.POOL_TASK``),
    imported with :mod:`importlib` on first use and warmed up by its module's ``warm_up()`` where it has one,
    outside any task's budget. The pool knows no other grader."""
    if kind == "sympy":
        return sympy_verdict
    if kind not in _WARMED:
        module_name, _, function = kind.partition(":")
        if not function or module_name.split(".")[0] != __package__:  # never code outside this package
            raise ValueError(f"unknown grader task kind {kind!r}")
        module = importlib.import_module(module_name)
        verdict = getattr(module, function)
        try:
            getattr(module, "warm_up", lambda: None)()
        except Exception:  # noqa: BLE001 - warming up is best effort
            pass
        _WARMED[kind] = verdict
    return _WARMED[kind]


_CHILD_CODE = "from graders.pool import _child_main; _child_main()"


class _Process:
    """A worker subprocess (the parts of ``multiprocessing.Process`` the pool uses)."""

    __slots__ = ("popen",)

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        if self.popen.poll() is None:
            try:
                self.popen.kill()
            except OSError:
                pass

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass


def _package_path() -> list[str]:
    """``sys.path`` for a worker: this package's parent first, then the caller's path."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [root] + [p for p in sys.path if p and p != root]


class _Worker:
    __slots__ = ("process", "conn", "out", "ready", "task", "deadline", "started", "budget", "kinds")

    def __init__(self, memory_limit: int):
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        env = dict(os.environ)
        env["MCPRM_GRADER_WORKER"] = json.dumps(
            {"rfd": p2c_r, "wfd": c2p_w, "parent": os.getpid(), "memory": memory_limit}
        )
        env["PYTHONPATH"] = os.pathsep.join(_package_path())
        try:
            popen = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE],
                pass_fds=(p2c_r, c2p_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self.process = _Process(popen)
        self.out = Connection(p2c_w, readable=False)
        self.conn = Connection(c2p_r, writable=False)
        self.ready = False
        self.task: int | None = None
        self.deadline = 0.0
        self.budget = 0.0
        self.kinds = {"sympy"}  # task kinds this worker has loaded (another one loads on its first task)
        self.started = time.monotonic()

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()
        self.out.close()


class WorkerPool:
    """``size`` killable sympy workers; :meth:`run` grades many (gold, answer, config) tasks in parallel.

    Counters: :attr:`retries` (comparisons that ran out of their CPU budget once and were retried with
    :data:`RETRY_FACTOR` times it), :attr:`timeouts` (those that ran out again: their verdict is a timeout),
    :attr:`restarts` (workers killed and replaced).
    """

    def __init__(self, size: int | None = None, context: str | None = None, memory_limit: int = DEFAULT_MEMORY_LIMIT):
        # ``context`` is accepted for compatibility and ignored: workers are plain subprocesses.
        self.size = size or min(4, os.cpu_count() or 1)
        self._memory_limit = memory_limit
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.timeouts = 0
        self.retries = 0
        self.restarts = 0

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    def warm(self) -> None:
        """Start the workers now (they load sympy and warm up in the background), so the first grading call
        does not wait for them: a labeling worker calls this while its model loads."""
        with self._lock:
            while len(self._workers) < self.size:
                self._start()

    def _start(self) -> _Worker:
        w = _Worker(self._memory_limit)
        self._workers.append(w)
        return w

    def _replace(self, w: _Worker) -> None:
        w.kill()
        self._workers.remove(w)
        self.restarts += 1

    def run(self, tasks: Sequence[tuple], timeout_s: float) -> list[tuple]:
        """Results of ``tasks`` (each ``(gold, answer, config)``, or ``(gold, answer, config, kind)`` for another
        grader's comparison, a function named ``"graders.module:function"``: its own result tuple), in order, each within ``timeout_s``
        seconds of CPU time (retried once with :data:`RETRY_FACTOR` times it); what runs out gives
        (None, "timeout"), a worker that died (None, "worker crashed")."""
        if not tasks:
            return []
        with self._lock:
            return self._run(tasks, timeout_s)

    def _run(self, tasks: Sequence[tuple], timeout_s: float) -> list[tuple[bool | None, str]]:
        results: list = [None] * len(tasks)
        budgets = [timeout_s] * len(tasks)
        pending = deque(range(len(tasks)))
        want = min(self.size, len(tasks))
        failed_starts = 0
        while len(self._workers) < want:
            self._start()

        def timed_out(i: int) -> None:
            if budgets[i] <= timeout_s:  # first time: once more, with a larger budget
                budgets[i] = timeout_s * RETRY_FACTOR
                self.retries += 1
                pending.append(i)
            else:
                results[i] = (None, "timeout")
                self.timeouts += 1

        while pending or any(w.task is not None for w in self._workers):
            now = time.monotonic()
            for w in self._workers:
                if w.ready and w.task is None and pending:
                    i = pending.popleft()
                    try:  # (id, gold, answer, config, budget[, kind])
                        w.out.send((i, *tasks[i][:3], budgets[i], *tasks[i][3:]))
                    except (OSError, BrokenPipeError):
                        pending.appendleft(i)
                        w.ready = False
                        continue
                    w.task, w.budget, w.deadline = i, budgets[i], now + wall_cap(budgets[i])
                    kind = tasks[i][3] if len(tasks[i]) > 3 else "sympy"
                    if kind not in w.kinds:  # it loads that grader first, outside the task's CPU budget
                        w.kinds.add(kind)
                        w.deadline += START_TIMEOUT_S
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
                    i, w.task = w.task, None
                    if msg[2] == "timeout":
                        timed_out(i)
                    else:
                        results[i] = tuple(msg[1:])
            now = time.monotonic()
            for w in self._workers:
                if w in dead:
                    continue
                if w.task is not None and now >= w.deadline:
                    timed_out(w.task)
                    w.task = None
                    dead.append(w)
                elif not w.ready and now >= w.started + START_TIMEOUT_S:
                    dead.append(w)
            for w in dead:
                if w.task is not None:
                    w.process.join(timeout=1.0)
                    if w.process.exitcode == -_SIGXCPU:  # past RLIMIT_CPU inside C code: out of budget
                        timed_out(w.task)
                    else:  # died while grading: do not retry a task that may crash it again
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
        """Stop every worker (politely, then by force) and reap it."""
        with self._lock:
            for w in self._workers:
                try:
                    w.out.send(None)
                except (OSError, BrokenPipeError):
                    pass
            deadline = time.monotonic() + 1.0
            for w in self._workers:
                w.process.join(timeout=max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(timeout=5)
                w.conn.close()
                w.out.close()
            self._workers.clear()


_SIGXCPU = signal.SIGXCPU


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
