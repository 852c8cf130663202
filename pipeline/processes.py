"""Facts about processes and this machine that more than one layer needs (the corpus lock, this machine's warm
workers, their leases): whether a process id names a live process, whether a recorded process is still the one
recorded (pid and start time: a pid is reused), and which host, boot and pid namespace this is."""

from __future__ import annotations

import os
import re
import socket

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"  # Linux: a new random id at every boot


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine. A process of another user answers ``kill(pid, 0)`` with
    PermissionError: it exists (only its owner may signal it), so it counts as alive."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


def boot_id() -> str:
    """An id of this boot of this machine: Linux's boot id; elsewhere the boot time (psutil, where installed);
    else ``unknown`` (state kept per boot is then kept per host only)."""
    try:
        with open(BOOT_ID_PATH) as f:
            text = f.read().strip()
        if text:
            return text
    except OSError:
        pass
    try:
        import psutil

        return f"boot-{int(psutil.boot_time())}"
    except Exception:  # noqa: BLE001 - no psutil, or no boot time on this system
        return "unknown"


def machine_key() -> str:
    """This host and boot as a short folder name (``HOST-BOOT``): state kept under a home folder several machines
    share is kept apart per machine, and a process id recorded before a reboot is never taken for a live one."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname() or "host")[:64]
    boot = re.sub(r"[^A-Za-z0-9]", "", boot_id())[:12] or "unknown"
    return f"{host}-{boot}"


def pid_namespace() -> str:
    """An id of this process's pid namespace (Linux: the inode of ``/proc/self/ns/pid``): two containers on one
    host, with one host name and boot, differ here, and a pid means something only inside its namespace.
    ``""`` where the system does not say (one namespace is then assumed)."""
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return re.sub(r"\D", "", link)[:20]


def namespace_key() -> str:
    """This host, boot and pid namespace as a short folder name (``HOST-BOOT`` or ``HOST-BOOT-NS``): state that
    records pids (this machine's warm workers, their leases' holders) is read only where those pids mean the same
    processes, so another container that shares the home folder neither sees it nor takes it for dead."""
    ns = pid_namespace()
    return machine_key() + (f"-{ns}" if ns else "")


def _exited(pid: int) -> bool:
    """Whether ``pid`` is a process that has exited and waits for its parent to collect it (a zombie: Linux)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
        return raw[raw.rindex(")") + 2:].split()[0] == "Z"
    except (OSError, ValueError, IndexError):
        return False


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (Linux: its start time in clock ticks since boot, from ``/proc/PID/stat``;
    elsewhere psutil's create time, where installed), or None when it does not exist or nothing says. With the
    pid it names one process: a pid the system gave to a new process after the first one died has another."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
        # the command name (field 2) is in parentheses and may hold spaces or parentheses: split after the last
        return raw[raw.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return f"{psutil.Process(int(pid)).create_time():.3f}"
    except Exception:  # noqa: BLE001 - no psutil, no such process, or not allowed to see it
        return None


def this_process() -> dict:
    """This process as :func:`same_process` recognises it later: pid, start time, host, boot and pid namespace."""
    return {"pid": os.getpid(), "start": process_start(os.getpid()), "namespace": namespace_key()}


def _recorded_pid(rec: dict | None) -> int | None:
    """The pid a process record names, when it was recorded in this very pid namespace of this boot (a pid from
    elsewhere says nothing about the processes here), else None."""
    if not isinstance(rec, dict) or rec.get("namespace") != namespace_key():
        return None
    try:
        pid = int(rec.get("pid", 0) or 0)
    except (TypeError, ValueError):
        return None
    return pid if pid > 0 else None


def same_process(rec: dict | None) -> bool:
    """Whether the process ``rec`` (:func:`this_process` of some process) still runs: recorded in this very pid
    namespace of this boot, its pid alive and started when it was recorded. Never just "some process has this
    pid": a pid is reused after its process dies (an OOM kill, kill -9). A record without a start time (written
    by an older mcprm) cannot be told from a reused pid and does not count as running."""
    pid = _recorded_pid(rec)
    start = rec.get("start") if pid else None
    if not pid or not start or not pid_alive(pid) or _exited(pid):
        return False
    now = process_start(pid)
    return now is not None and now == str(start)


def process_gone(rec: dict | None) -> bool:
    """Whether the process ``rec`` is provably gone: recorded in this very pid namespace of this boot, and its pid
    no longer names it (no such process, or one started at another time). A record from elsewhere is never
    provably gone."""
    pid = _recorded_pid(rec)
    if not pid:
        return False
    if not pid_alive(pid) or _exited(pid):
        return True
    start, now = rec.get("start"), process_start(pid)
    return bool(start) and now is not None and now != str(start)
