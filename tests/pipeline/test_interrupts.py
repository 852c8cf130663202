"""Ctrl-C is never lost: a KeyboardInterrupt swallowed by a cleanup that catches everything still ends the command
at its next loop turn (pipeline.interrupts), and the previous handler comes back afterwards."""

from __future__ import annotations

import os
import signal

import pytest

from pipeline import interrupts


@pytest.fixture
def default_sigint():
    # pytest-xdist's workers may run with SIGINT ignored; these tests need Python's own handler to begin with
    was = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, was)


def _swallowing_cleanup() -> None:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes, here
            pass
    except BaseException:  # noqa: BLE001 - the library code that loses a Ctrl-C looks like this
        pass


def test_a_swallowed_ctrl_c_is_raised_at_the_next_check(default_sigint):
    with interrupts.catching():
        interrupts.raise_if_requested()  # nothing asked yet
        _swallowing_cleanup()
        assert interrupts.requested()
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_requested()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not interrupts.requested()


def test_without_catching_a_swallowed_ctrl_c_is_gone(default_sigint):
    # what the module is for: with Python's own handler nothing remembers the interrupt
    _swallowing_cleanup()
    interrupts.raise_if_requested()
    assert not interrupts.requested()


def test_a_handler_someone_else_installed_is_left_alone():
    seen = []
    was = signal.signal(signal.SIGINT, lambda *a: seen.append(1))
    try:
        with interrupts.catching():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
        assert seen == [1] and not interrupts.requested()
    finally:
        signal.signal(signal.SIGINT, was)


def test_the_local_executor_stops_before_its_next_shard(default_sigint, monkeypatch):
    from pipeline.execution.executors import LocalExecutor

    class Worker:
        processed: list = []

        def process(self, version, idx, sols):
            self.processed.append(idx)
            if idx == 0:
                _swallowing_cleanup()  # Ctrl-C during the first shard, lost inside it
            return {"shard": idx}

    ex = LocalExecutor.__new__(LocalExecutor)
    ex.worker, ex.on_solution = Worker(), None
    done = []
    with interrupts.catching(), pytest.raises(KeyboardInterrupt):
        ex.run(1, iter([(0, []), (1, []), (2, [])]), done.append)
    assert Worker.processed == [0] and done == [{"shard": 0}]


def test_a_ctrl_c_a_deferring_handler_dropped_is_still_seen(default_sigint):
    """A library that swaps in its own handler for a while (Ray defers SIGINT around task submission) and then
    drops the signal: the wakeup pipe saw it."""
    with interrupts.catching():
        mine = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, lambda *a: None)  # deferred, then dropped
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        signal.signal(signal.SIGINT, mine)
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_requested()
