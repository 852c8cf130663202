"""Facts about processes and this machine that more than one layer needs (the corpus lock, this machine's warm
workers): whether a process id names a live process, and which boot of which host this is."""

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
