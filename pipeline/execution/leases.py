"""A run's leases on warm workers (a fleet's, :mod:`pipeline.execution.fleet`, or this machine's kept ones,
:mod:`pipeline.execution.kept`): one run per worker at a time. A run renews its leases every :data:`RENEW_S` from a
thread of its own; a lease lapses :data:`LEASE_TTL_S` after its last renewal, so a run killed with -9 frees its
workers by itself. A run on the same machine as a lease's holder need not wait that long: a holder whose process
is provably gone (:func:`holder_gone`: pid and start time, in this pid namespace) has its lease taken over at once."""

from __future__ import annotations

import logging
import os
import socket
import threading

from pipeline.processes import namespace_key, process_gone, this_process

log = logging.getLogger("mcprm")

LEASE_TTL_S = 60.0  # a run's lease on a worker lapses this long after its last renewal
RENEW_S = 10.0  # how often a run renews its leases
CONTROL = "control"  # the actors' concurrency group for leases and status: answered while a shard is labeled


def control(handle, method: str, *args):
    """Call ``method`` of a warm worker in its control group (answered while it labels a shard)."""
    return getattr(handle, method).options(concurrency_group=CONTROL).remote(*args)


def this_holder(output: str) -> dict:
    """Who holds a lease: this process (host; machine: host, boot and pid namespace; pid and start time) for a run
    writing ``output``."""
    return {"host": socket.gethostname(), "machine": namespace_key(), "pid": os.getpid(),
            "process": this_process(), "output": output}


def holder_gone(holder: dict) -> bool:
    """Whether a lease's holder is provably gone: a process of this host, boot and pid namespace whose pid no
    longer names it (gone, or reused by a process started since). A holder in another container is never."""
    return holder.get("machine") == namespace_key() and process_gone(holder.get("process"))


class Leases:
    """A run's leases on warm workers (``self.actors``, for run ``self.run_id`` held by ``self.holder``): renewed
    every :data:`RENEW_S` by a thread of the run, released at ``close`` (the workers stay up, warm for their
    keep-warm from then: ``self.keep_warm_s``, None for their own). ``after_close``, if set, is called once the
    leases are released, with whether every release was answered."""

    release_wait_s = 60.0  # how long close() waits for the releases (a lease not released lapses by itself)
    release_log_level = logging.WARNING  # (of a lease not released in that time)
    after_close = None

    def _start_renewing(self) -> None:
        self._stop = threading.Event()
        threading.Thread(target=self._renew, daemon=True, name="mcprm-fleet-lease").start()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            for i, a in enumerate(list(self.actors)):
                try:
                    other = self.ray.get(control(a, "acquire", self.run_id, self.holder, LEASE_TTL_S), timeout=30)
                except Exception as e:  # noqa: BLE001 - loading or restarting: renewed (taken back) next time
                    log.debug("fleet %s worker %d: lease not renewed (%s)", self.fleet, i, e)
                    continue
                if other is not None:
                    log.error("fleet %s worker %d was leased to another run (%s) after this run's lease lapsed",
                              self.fleet, i, other["holder"])

    def close(self) -> None:
        """Release this run's leases (the workers stay up, warm for their keep-warm time from now)."""
        if self._stop.is_set():
            return
        self._stop.set()
        refs = [control(a, "release", self.run_id, self.keep_warm_s) for a in self.actors]
        released = True
        try:
            self.ray.get(refs, timeout=self.release_wait_s)
        except Exception as e:  # noqa: BLE001 - a worker gone (or still loading); an unreleased lease lapses by itself
            released = False
            log.log(self.release_log_level, "fleet %s: a lease was not released (%s); it lapses in %.0f s", self.fleet,
                    e, LEASE_TTL_S)
        if self.after_close is not None:
            try:
                self.after_close(released)
            except Exception as e:  # noqa: BLE001 - a notice that failed must not hide the run's own outcome
                log.warning("could not report this machine's warm workers: %s", e)
