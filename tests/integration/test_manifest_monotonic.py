"""``manifest.json`` never goes back in version on local disk, whatever a writer paused half-way does (here: a
real process paused between its re-read and its rename, then resumed and killed right after the rename); and
when ``manifest.json`` and the newest version file are both unreadable, ``label`` and readers refuse with a clear
error instead of taking an older version for the current one. Only processes this test started are signalled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from pipeline.corpus import CorpusError, read_corpus
from pipeline.storage import versions
from pipeline.storage.store import CorpusStore

from .conftest import N_ROWS, ROOT, invoke_mcprm, make_cfg, wait_for

PAUSED_WRITER = """
import json, os, sys, time
sys.path.insert(0, {root!r})
from pipeline.storage.store import CorpusStore
out = {out!r}
store = CorpusStore(out)
real_mv = store.fs.mv

def mv(src, dst, *a, **kw):
    if dst.endswith("/manifest.json"):
        open(os.path.join(out, "..", "paused"), "w").close()  # between its re-read and its rename
        while not os.path.exists(os.path.join(out, "..", "go")):
            time.sleep(0.05)
        real_mv(src, dst, *a, **kw)
        open(os.path.join(out, "..", "moved"), "w").close()
        time.sleep(600)  # killed here, before any catch-up
    return real_mv(src, dst, *a, **kw)

store.fs.mv = mv
store.write_manifest({{"version": 2, "shards": []}})
"""


def _m(n: int) -> dict:
    return {"version": n, "shards": []}


def _version(out: str) -> int:
    return json.load(open(os.path.join(out, "manifest.json")))["version"]


def test_a_paused_writer_killed_after_its_rename_never_puts_an_older_copy_back(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    store = CorpusStore(out)
    store.create_json("versions/v00001.json", _m(1))
    store.write_manifest(_m(1))
    store.create_json("versions/v00002.json", _m(2))  # the paused writer's commit
    p = subprocess.Popen([sys.executable, "-c", PAUSED_WRITER.format(root=str(ROOT), out=out)],
                         start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(tmp_path / "paused"), 120, "the writer's pause before its rename", p)
        monkeypatch.setattr(versions, "MANIFEST_LOCK_WAIT_S", 0.5)
        store.create_json("versions/v00003.json", _m(3))
        store.create_json("versions/v00004.json", _m(4))
        store.write_manifest(_m(4))  # a later commit while the paused writer holds its old copy
        seen = [_version(out)]
        (tmp_path / "go").touch()
        wait_for(lambda: os.path.exists(tmp_path / "moved"), 120, "the writer's rename", p)
        seen.append(_version(out))
    finally:
        p.send_signal(signal.SIGKILL)  # the writer this test started
        p.wait(60)
    seen.append(_version(out))
    assert seen == sorted(seen), f"manifest.json went back: {seen}"
    store.write_manifest(_m(4))  # the next writer brings it up
    assert _version(out) == 4


@pytest.fixture(scope="module")
def two_versions(small_input, tmp_path_factory):
    from pipeline.run import label

    d = tmp_path_factory.mktemp("two-versions")
    half = d / "half.jsonl"
    half.write_text("".join(open(small_input).readlines()[: N_ROWS // 2]))
    out = str(d / "out")
    label(make_cfg(str(half), out))
    label(make_cfg(small_input, out))
    return out


def test_label_refuses_when_the_manifest_and_the_newest_version_are_unreadable(two_versions, small_input, tmp_path):
    import shutil

    out = str(tmp_path / "out")
    shutil.copytree(two_versions, out)
    for rel in ("manifest.json", "versions/v00002.json"):
        with open(os.path.join(out, rel), "r+b") as f:
            f.truncate(40)
    r = invoke_mcprm("label", "--input", small_input, "--output", out, "--k", "2", "--strategy", "per-step",
                     "--max-new-tokens", "48", "--shard-size", "3", "--executor", "local", "-q")  # refused: a message
    said = r.stdout + r.stderr
    assert r.returncode == 1, said
    assert "up to date" not in said and "v00002.json" in said and "cannot be read" in said, said
    with pytest.raises(CorpusError, match="cannot be read"):
        read_corpus(out)
    assert not os.path.exists(os.path.join(out, "versions", "v00003.json"))
