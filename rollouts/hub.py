"""A model given by its hub name, checked before any work: found in the local cache, or the hub answers.

Without this, a hub name on a machine with no network ends after a minute and more of the hub client's retries
with an error about storage, after the output folder was made. :func:`model_problem` says in one line why the
model cannot be had (not cached, the hub unreachable) and what to do; a model that is cached while the hub is
unreachable is loaded from the cache (the hub client's offline mode is turned on, so it does not retry).

Light at import: huggingface_hub is imported only for a name that is not a local folder.
"""

from __future__ import annotations

import os
import re

PROBE_TIMEOUT_S = 5.0  # one request to the hub; a machine without network fails it at once (no DNS, no route)
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def _cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        got = try_to_load_from_cache(name, "config.json")
    except Exception:  # noqa: BLE001 - a name the cache cannot even look up: not cached
        return False
    return isinstance(got, str)


def _unreachable(endpoint: str, name: str) -> str | None:
    """Why the hub at ``endpoint`` does not answer (one request, proxies from the environment honoured), or None
    when it answers (any HTTP status: a 401 or 404 is an answer, which the loader then explains)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{endpoint.rstrip('/')}/api/models/{name}", timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason


def set_offline() -> None:
    """The hub client's offline mode, for this process and the processes it starts: loads read the cache only."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub.constants as c

        c.HF_HUB_OFFLINE = True  # read from the environment at its import, which may have happened already
    except ImportError:  # pragma: no cover
        pass


def model_problem(name: str | None, what: str = "model", flag: str = "--model") -> str | None:
    """Why ``name`` (a local folder or a hub name) cannot be loaded on this machine, or None when it can: a hub
    name that is neither in the local cache nor reachable (the hub does not answer, or offline mode is on).
    A cached model with the hub unreachable is fine: offline mode is turned on (:func:`set_offline`)."""
    if not name or os.path.exists(os.path.expanduser(name)) or not _HUB_NAME.fullmatch(name):
        return None  # a local folder, or not a hub name: the loader's own message names it
    try:
        import huggingface_hub.constants as c
    except ImportError:
        return None  # the backend's own MissingDependency says what to install
    cached = _cached(name)
    offline = bool(c.HF_HUB_OFFLINE)
    if offline:
        why = "HF_HUB_OFFLINE is set"
    else:
        why = _unreachable(c.ENDPOINT, name)
        if why is None:
            return None
        why = f"the hub ({c.ENDPOINT}) is unreachable: {why}"
    if cached:
        set_offline()
        return None
    return (f"{what} {name} not found locally and {why}. Download it on a machine with network "
            f"(`huggingface-cli download {name}`) and copy the cache ({c.HF_HUB_CACHE}) here, or pass {flag} a "
            "local folder holding the model")
