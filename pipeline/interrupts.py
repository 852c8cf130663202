"""Ctrl-C that is never lost.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be. When that is a finalizer, a
weakref or atexit callback, or a library's ``except BaseException`` that cleans up and carries on, the interrupt is
printed as "ignored" (or not at all) and the run goes on: on a loaded machine a label run then labels to the end and
a training run with many epochs never stops. The handler installed here raises the KeyboardInterrupt as before and
also records that one was asked for; the long loops (label's wait for shards, training's optimizer steps) call
:func:`raise_if_requested` at each turn, so a swallowed interrupt still ends the run there, through the same
KeyboardInterrupt path (what was written stays, the message says how to resume)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

# requested: a Ctrl-C came; wake: the read end of the pipe Python's C-level signal handler writes each signal's
# number to (signal.set_wakeup_fd), which sees a SIGINT even when a library had swapped the Python handler for one
# that defers and then drops it (Ray defers SIGINT around task submission and loses it if that raises)
_state: dict = {"requested": False, "wake": None}


def _handler(signum, frame) -> None:
    _state["requested"] = True
    raise KeyboardInterrupt


def requested() -> bool:
    """Whether Ctrl-C came while :func:`catching` was on (the handler's record, or the wakeup pipe's)."""
    if not _state["requested"] and _state["wake"] is not None:
        try:
            got = os.read(_state["wake"], 512)
        except (BlockingIOError, OSError):
            got = b""
        if signal.SIGINT in got:
            _state["requested"] = True
    return _state["requested"]


def raise_if_requested() -> None:
    """A KeyboardInterrupt if Ctrl-C came while :func:`catching` was on, whether or not its first one got through."""
    if requested():
        raise KeyboardInterrupt


@contextlib.contextmanager
def catching():
    """Install the recording handler and the wakeup pipe for the length of a command (main thread only; elsewhere,
    or when SIGINT is ignored or handled by someone else already, nothing changes), then put the previous ones
    back."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not \
            signal.default_int_handler:
        yield
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    _state.update(requested=False, wake=r)
    signal.signal(signal.SIGINT, _handler)
    try:
        old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # (not the main interpreter)
        old_fd = None
    try:
        yield
    finally:
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _state.update(requested=False, wake=None)
        os.close(r)
        os.close(w)
