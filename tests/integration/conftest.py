"""Shared fixtures for integration tests: the real bundled model, real Ray, real files, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.config import LabelConfig

ROOT = Path(__file__).resolve().parents[2]
N_ROWS = 8


@pytest.fixture(scope="session")
def small_input(tmp_path_factory) -> str:
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:N_ROWS]]
    p = tmp_path_factory.mktemp("input") / "solutions.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


@pytest.fixture(scope="session", autouse=True)
def _fork_server_stopped():
    """The killed runs' fork server (``fs_seam.run_killed``), when one was started, ends with the test run."""
    yield
    from .fs_seam import stop_fork_server

    stop_fork_server()


def make_cfg(inp: str, out: str, **kw) -> LabelConfig:
    # per-step: the reference strategy, labeling every step (the CLI's default, binary-search, is covered by
    # the tests that run `mcprm label` as users do)
    base = dict(input=[inp], output=out, k=2, max_new_tokens=48, shard_size=3, executor="local", progress=False,
                strategy="per-step")
    base.update(kw)
    return LabelConfig(**base)


@pytest.fixture(scope="session")
def reference_run(small_input, tmp_path_factory):
    """An uninterrupted in-process run: the ground truth the fault tests compare with."""
    from pipeline.corpus import read_corpus
    from pipeline.run import label

    out = str(tmp_path_factory.mktemp("ref") / "out")
    res = label(make_cfg(small_input, out))
    return out, res, rows_by_key(read_corpus(out))


def rows_by_key(table) -> dict:
    rows = table.to_pylist()
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "duplicate rows in corpus"
    out = {}
    for r in rows:
        r = dict(r)
        r.pop("source", None)  # where a row came from may differ between inputs with equal content
        out[r["key"]] = r
    return out


# A subprocess never outlives its test's pytest-timeout budget: each gets at most what is left of it, less
# BUDGET_MARGIN_S, so a slow command fails as a TimeoutExpired that names it (and its process is ended by
# subprocess.run) instead of pytest-timeout stopping the test with the command still running. A slow test
# states its own budget with @pytest.mark.timeout(N), sized for a loaded 2-core machine.
BUDGET_MARGIN_S = 30.0
_deadline: list[float | None] = [None]


def _test_timeout(item) -> float | None:
    """The pytest-timeout budget of ``item``: its ``timeout`` mark, else ``--timeout``, else the ini's."""
    m = item.get_closest_marker("timeout")
    if m is not None and (m.args or "timeout" in m.kwargs):
        v = m.args[0] if m.args else m.kwargs["timeout"]
    else:
        v = item.config.getoption("timeout", None) or item.config.getini("timeout")
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


@pytest.fixture(autouse=True)
def _subprocess_budget(request):
    t = _test_timeout(request.node)
    _deadline[0] = None if t is None else time.monotonic() + t - BUDGET_MARGIN_S
    yield
    _deadline[0] = None


def budget(seconds: float) -> float:
    """``seconds``, or less: what is left of the running test's pytest-timeout budget (at least 1 s)."""
    if _deadline[0] is None:
        return seconds
    return max(1.0, min(seconds, _deadline[0] - time.monotonic()))


def mcprm_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli.main", *args]


def run_mcprm(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run(mcprm_cmd(*args), capture_output=True, text=True, timeout=budget(timeout), cwd=ROOT,
                          env=e)


def invoke_mcprm(*args: str, env: dict | None = None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """``mcprm ARGS`` run in this process (typer's test runner), answered as :func:`run_mcprm` answers: exit code,
    stdout and stderr apart. For tests that check only what a command says and its exit code: a subprocess costs
    seconds of imports each, on a loaded 2-core machine. Where the process boundary is what is tested (signals,
    kills, resume, what outlives a command, what a library prints to the real stderr or a logger writes) a test
    keeps :func:`run_mcprm`. The working folder is the checkout's, as for a subprocess; ``timeout`` is accepted
    for the same calls and unused (the test's pytest-timeout bounds a command run in its own process). An
    exception that escapes the command (a bug: the CLI turns every user error into a message) is a non-zero exit
    with its traceback in stderr, so a test asserting "no Traceback" fails on it as on a subprocess's output."""
    import traceback

    from typer.testing import CliRunner

    from cli.main import app

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        r = CliRunner().invoke(app, list(args), env=env, prog_name="mcprm")
    finally:
        os.chdir(cwd)
    stderr = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        stderr += "".join(traceback.format_exception(r.exception))
    return subprocess.CompletedProcess(mcprm_cmd(*args), r.exit_code, r.stdout, stderr)


def popen_mcprm(*args: str, env: dict | None = None) -> subprocess.Popen:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.Popen(mcprm_cmd(*args), cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def shell_env(tmp_path: Path, **extra: str) -> dict:
    """An environment in which ``mcprm`` on the PATH is this checkout's CLI (a shim in ``tmp_path/bin``): docs'
    commands run exactly as a user types them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mcprm").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cli.main "$@"\n')
    (bin_dir / "mcprm").chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def wait_for(pred, timeout: float, what: str, proc: subprocess.Popen | None = None):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"process ended (rc={proc.returncode}) before {what}:\n{out[-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def own_actor_pids(pids_file) -> list[int]:
    """PIDs of the Ray actors of the run started with ``MCPRM_WORKER_PIDS_FILE=pids_file`` (that run writes
    them there): never another job's processes."""
    try:
        return list(json.loads(Path(pids_file).read_text())["actor_pids"])
    except (OSError, ValueError, KeyError):
        return []
