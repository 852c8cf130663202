"""The killable worker pool: parallel batches, hard time limit, crash recovery, clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

import graders
from graders import GraderConfig, grade, grade_batch
from graders.pool import WorkerPool, get_pool, shutdown_pool

SLOW = r"\prod_{n=1}^{%d} n^{n}"


def _alive(pid: int) -> bool:
    """Whether a process this test's pool started still exists (not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_import_is_light():
    code = "import sys, graders, cli.main; bad = {'sympy', 'torch', 'transformers', 'vllm', 'ray'} & set(sys.modules); print(bad); assert not bad"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )


def test_fast_path_never_starts_workers():
    shutdown_pool()
    vs = grade_batch(
        [("112", "The answer is \\boxed{112}."), (r"\frac{7}{3}", "7/3 #### 7/3"), ("-5", "#### -5.0")]
    )
    assert [v.correct for v in vs] == [True, True, True]
    from graders import pool

    assert pool._POOL is None


def test_parallel_batch_matches_one_by_one():
    pairs = [(rf"\sqrt{{{k * k * 2}}}", rf"\boxed{{{k}\sqrt{{2}}}}") for k in range(2, 14)]
    pairs += [(rf"\sqrt{{{k * k * 2}}}", rf"\boxed{{{k}\sqrt{{3}}}}") for k in range(2, 14)]
    graders.CACHE.clear()
    batch = grade_batch(pairs)
    graders.CACHE.clear()
    single = [grade(g, r) for g, r in pairs]
    assert batch == single
    assert [v.correct for v in batch] == [True] * 12 + [False] * 12


def test_timeout_then_recovers():
    cfg = GraderConfig(timeout_s=0.5)
    grade(r"\sqrt{2}", r"\boxed{\sqrt{2}}", cfg)  # warm
    v = grade("1", rf"\boxed{{{SLOW % 9999}}}", cfg)
    assert (v.correct, v.reason) == (None, "timeout")
    assert grade(r"2\sqrt{2}", r"\boxed{\sqrt{8}}", cfg).correct is True


def test_hung_worker_is_killed_and_replaced():
    """A worker that cannot even run its own timer (stopped) is killed at the hard limit."""
    pool = WorkerPool(size=1)
    cfg = GraderConfig(timeout_s=1.0)
    try:
        assert pool.run([(r"\sqrt{8}", r"2\sqrt{2}", cfg)], cfg.timeout_s)[0][0] is True
        (old_pid,) = pool.pids
        old_process = pool._workers[0].process
        threading.Timer(0.2, os.kill, (old_pid, signal.SIGSTOP)).start()
        assert pool.run([("1", SLOW % 9000, cfg)], cfg.timeout_s) == [(None, "timeout")]
        assert not old_process.is_alive()  # killed, not left stopped
        assert pool.run([("3", "1+2", cfg)], cfg.timeout_s)[0][0] is True
        assert pool.pids and pool.pids[0] != old_pid and pool.restarts == 1
    finally:
        pool.close()


class _KillAfterSend:
    """A worker's task pipe that kills the worker a moment after a task has been written to it."""

    def __init__(self, out, pid: int):
        self._out, self._pid = out, pid

    def send(self, obj) -> None:
        self._out.send(obj)
        threading.Timer(0.3, os.kill, (self._pid, signal.SIGKILL)).start()

    def __getattr__(self, name):
        return getattr(self._out, name)


def test_crashed_worker_gives_null_and_pool_recovers():
    pool = WorkerPool(size=2)
    cfg = GraderConfig(timeout_s=5.0)
    try:
        pool.run([("1", "1+0", cfg), ("2", "1+1", cfg)], 5.0)
        assert len(pool.pids) == 2
        # Each worker is killed only once its task is in its pipe: a kill that came before the send (a loaded
        # machine can delay this thread past any fixed timer) is a failed start, and the task would be rerun.
        for w in pool._workers:
            w.out = _KillAfterSend(w.out, w.process.pid)
        res = pool.run([("1", SLOW % 9500, cfg), ("2", SLOW % 9501, cfg)], 5.0)
        assert res == [(None, "worker crashed")] * 2
        assert pool.run([("2", "1+1", cfg)], 5.0)[0][0] is True
    finally:
        pool.close()


def test_close_leaves_no_processes():
    pool = WorkerPool(size=2)
    cfg = GraderConfig()
    pool.run([("1", "1+0", cfg), ("2", "1+1", cfg)], 2.0)
    workers = list(pool._workers)
    started = set(pool.pids)
    assert len(started) == 2 and all(_alive(pid) for pid in started)
    pool.close()
    assert all(w.process.exitcode is not None for w in workers)  # exited and reaped by close()
    assert not any(_alive(pid) for pid in started)


# Pairs whose comparison costs sympy real work (tenths of a second of CPU) and one that never finishes.
HEAVY = [
    (r"\frac{n(n+1)}{2}", r"\boxed{\sum_{k=1}^{n} k}"),
    (r"\frac{n(n+1)(2n+1)}{6}", r"\boxed{\sum_{k=1}^{n} k^2}"),
    (r"\left(\frac{n(n+1)}{2}\right)^2", r"\boxed{\sum_{k=1}^{n} k^3}"),
    (r"1", r"\boxed{\sin^2 x + \cos^2 x}"),
    (r"\frac{\sqrt{6}+\sqrt{2}}{4}", r"\boxed{\cos(\pi/12)}"),
    (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 5 \end{pmatrix}}"),
    (r"x^2+x+1", r"\boxed{\frac{x^3-1}{x-1}}"),
    (r"2^{n}", r"\boxed{\sum_{k=0}^{n} \binom{n}{k}}"),
    (r"\frac{2}{x^2-1}", r"\boxed{\frac{1}{x-1}-\frac{1}{x+1}}"),
    (r"\sqrt2+\sqrt3", r"\boxed{\sqrt{5+2\sqrt{6}}}"),
]


def _burners(n: int) -> list[subprocess.Popen]:
    """``n`` processes that only burn CPU (this test starts them and stops them)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def test_same_verdicts_on_a_loaded_machine():
    """Budgets are CPU time: the same pairs get the same verdicts with every core busy with other work."""
    cfg = GraderConfig(timeout_s=0.5, workers=2)
    pool = WorkerPool(size=2)
    try:
        pool.warm()
        idle = pool.run([(g, r, cfg) for g, r in _normalized(HEAVY)], cfg.timeout_s)
        burners = _burners(2 * (os.cpu_count() or 1) + 2)
        try:
            loaded = pool.run([(g, r, cfg) for g, r in _normalized(HEAVY)], cfg.timeout_s)
        finally:
            for b in burners:
                b.kill()
                b.wait()
        assert loaded == idle
        assert [v[0] for v in idle].count(True) >= 7  # real work was decided, not everything timed out
        assert (None, "timeout") in idle  # the binomial sum never finishes: a timeout both times
        assert pool.retries >= pool.timeouts  # every timeout was retried once first
        assert pool.timeouts == 2 * idle.count((None, "timeout"))
    finally:
        pool.close()


def _normalized(pairs):
    from graders import extract_answer, normalize

    return [(normalize(g), normalize(extract_answer(r))) for g, r in pairs]


def test_timeout_is_retried_once_with_a_larger_budget():
    pool = WorkerPool(size=1)
    cfg = GraderConfig(timeout_s=0.3)
    try:
        assert pool.run([("1", SLOW % 9000, cfg)], cfg.timeout_s) == [(None, "timeout")]
        assert (pool.retries, pool.timeouts) == (1, 1)
        assert pool.run([("3", "1+2", cfg)], cfg.timeout_s)[0][0] is True  # the same worker, still usable
        assert (pool.retries, pool.timeouts) == (1, 1)
    finally:
        pool.close()


def test_shared_pool_size_and_shutdown():
    shutdown_pool()
    assert grade(r"\sqrt{4}", r"\boxed{2}", GraderConfig(workers=1)).correct is True
    assert get_pool(1).size == 1 and len(get_pool(1).pids) == 1
    graders.shutdown()
    from graders import pool

    assert pool._POOL is None


def test_registry():
    from graders import Verdict, available_graders, get_grader, register_grader

    assert {"sympy", "exact"} <= set(available_graders())
    exact = get_grader("exact")
    assert exact.grade_batch([("0.5", r"\boxed{0.5}"), ("0.5", r"\boxed{\frac12}")], GraderConfig()) == [
        Verdict(True, "string match", "0.5"),
        Verdict(False, "strings differ", r"\frac12"),
    ]
    assert grade("1/2", r"\boxed{0.5}", grader="exact").correct is False

    def length_grader(gold, response, config):
        return Verdict(len(gold) == len(response), "same length", response)

    g = register_grader("length-test", length_grader, overwrite=True)
    assert g.version == "length-test-1"
    assert grade("ab", "cd", grader="length-test").correct is True
    with pytest.raises(ValueError, match="already registered"):
        register_grader("length-test", length_grader)
    with pytest.raises(KeyError, match="available"):
        get_grader("nope")
    assert graders.GRADER_VERSION == get_grader("sympy").version


def test_warm_grader_starts_only_what_a_grader_declares():
    """A labeling worker warms its grader while the model loads (graders.registry.warm_grader): the sympy
    grader's processes start, a grader that declares nothing to start is left alone (no name is checked)."""
    from graders import Verdict, register_grader
    from graders.registry import _REGISTRY, warm_grader

    shutdown_pool()
    warm_grader("sympy", 1)
    assert get_pool(1).size == 1 and len(get_pool(1).pids) == 1
    shutdown_pool()
    warm_grader("exact", 1)
    from graders import pool

    assert pool._POOL is None

    class Warmable:
        name, version, warmed = "warm-test", "warm-test-1", []

        def grade_batch(self, pairs, config):
            return [Verdict(True, "ok", r) for _, r in pairs]

        def warm(self, workers):
            self.warmed.append(workers)

    register_grader("warm-test", Warmable(), overwrite=True)
    try:
        warm_grader("warm-test", 3)
        assert Warmable.warmed == [3]
    finally:
        _REGISTRY.pop("warm-test", None)


def test_no_multiprocessing_helper_is_started():
    """Workers are plain subprocesses: grading never starts multiprocessing's resource tracker, the helper
    process that outlived ``mcprm grade`` on a loaded machine (it exits only once it notices its parent left)."""
    code = (
        "import graders; from multiprocessing import resource_tracker as rt; "
        "v = graders.grade(r'\\sqrt{8}', r'\\boxed{2\\sqrt{2}}'); "
        "assert v.correct is True, v; print(rt._resource_tracker._pid)"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"
