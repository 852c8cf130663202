"""Issue 25, item 3: a lock held from another pid namespace with the same host name (two containers on one
machine) is never taken for the lock of a dead process of this namespace, whatever its pid is here. A real second
pid namespace (``unshare --pid``), a real lock holder in it; skipped where namespaces cannot be made."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from pipeline.processes import pid_alive
from pipeline.storage.lock import INSTANCE, LockError, OutputLock, corpus_lock
from pipeline.storage.store import CorpusStore, is_fenced

from .conftest import ROOT, wait_for

# pid 1 of the new namespace moves the namespace's pid counter far up (ns_last_pid), then forks the holder: its
# pid there is one that no process has here, the case where "same host, pid gone" took a live lock for dead
HOLD = """
import os, sys, time
sys.path.insert(0, {root!r})
try:
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(min(int(open("/proc/sys/kernel/pid_max").read()) - 100, 3999000)))
except OSError:
    pass
if os.fork() == 0:
    from pipeline.storage.lock import OutputLock
    from pipeline.storage.store import CorpusStore
    lk = OutputLock(CorpusStore({out!r}), heartbeat_s=0.2).acquire()
    time.sleep(600)
else:
    os.wait()
"""


def _unshare_ok() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _unshare_ok(), reason="cannot create a pid namespace here (unshare --pid)")
def test_lock_from_another_pid_namespace_with_the_same_host_name(tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                          HOLD.format(root=str(ROOT), out=out)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(os.path.join(out, "_lock")), 60, "the lock of the other namespace", p)
        rec = json.load(open(os.path.join(out, "_lock")))
        assert rec["host"] == socket.gethostname() and rec["instance"] != INSTANCE
        if pid_alive(rec["pid"]):
            pytest.skip(f"pid {rec['pid']} of the other namespace exists here too: nothing to tell apart")
        # its pid exists in no process here; it is alive all the same, so the lock is refused
        with pytest.raises(LockError, match="held by another mcprm run"):
            OutputLock(CorpusStore(out)).acquire()
    finally:
        os.killpg(p.pid, 9)  # the unshare process this test started, and its namespace with it
        p.wait(30)
    # the holder is gone now, but nothing here can prove it: the lock waits for its heartbeat to go stale,
    # then is taken over with a fence (its owner might have been alive)
    with pytest.raises(LockError, match="held by another mcprm run"):
        OutputLock(CorpusStore(out)).acquire()
    time.sleep(0.3)
    lk = corpus_lock(CorpusStore(out), stale_after_s=0.2).acquire()
    assert lk.fenced == 1 and is_fenced(CorpusStore(out).version_manifest(1))
    lk.release()
