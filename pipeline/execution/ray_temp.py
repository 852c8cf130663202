"""Ray's files for a Ray that mcprm starts itself: a folder of the run's own, removed when it ends.

A Ray started with ``ray.init()`` writes its session (logs, sockets, spill files) under ``/tmp/ray`` and never
removes it: a folder per run, world-writable, left behind. Every Ray that mcprm starts (a run's own, this
machine's keeper for warm workers) gets a fresh private folder instead (:func:`new`: mode 0700, a random name
under the system temp dir, short because Ray's socket paths are limited to 107 bytes), removed when that Ray
stops (:func:`remove`). The folder records its owner (pid, start time, pid namespace:
:func:`pipeline.processes.this_process`), so that one left by a run killed with -9 is removed by the next one
that starts a Ray (:func:`sweep`) once its owner is provably gone; a folder of a live run, of another user or of
another container is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile

from pipeline.processes import process_gone, this_process

PREFIX = "mcprm-ray-"
OWNER = "owner.json"


def new() -> str:
    """A fresh private folder for a Ray this process starts (its owner recorded in it)."""
    sweep()
    path = tempfile.mkdtemp(prefix=PREFIX)  # mode 0700, a name nobody could take before
    with open(os.path.join(path, OWNER), "w") as f:
        json.dump(this_process(), f)
    return path


def ours(path: str | None) -> bool:
    """Whether ``path`` is such a folder: of that name, directly under the system temp dir, a real folder (never
    a link) of this user."""
    if not path or os.path.dirname(os.path.abspath(path)) != os.path.abspath(tempfile.gettempdir()):
        return False
    if not os.path.basename(path).startswith(PREFIX):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def remove(path: str | None) -> None:
    """Remove such a folder (anything else is left alone)."""
    if ours(path):
        shutil.rmtree(path, ignore_errors=True)


def sweep() -> list[str]:
    """Remove the folders of Rays whose owner is provably gone (killed with -9 before it could remove its own).
    Returns those removed."""
    gone = []
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            path = os.path.join(tmp, name)
            if not name.startswith(PREFIX) or not ours(path):
                continue
            try:
                with open(os.path.join(path, OWNER)) as f:
                    owner = json.load(f)
            except (OSError, ValueError):
                continue  # being created right now, or not one of these: left alone
            if process_gone(owner):
                shutil.rmtree(path, ignore_errors=True)
                gone.append(path)
    return gone
