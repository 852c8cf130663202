"""No row leaves a corpus silently: a refresh whose base has a damaged shard, with an input that no longer holds
that shard's rows, stops and names them unless ``--drop-damaged`` is given, which the new manifest records; and
``mcprm verify`` finds a solution held by two shards. Real runs of the bundled model, real Parquet."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.corpus import read_corpus
from pipeline.run import label
from pipeline.storage.integrity import verify_corpus
from pipeline.storage.store import CorpusStore, ShardError, sidecar_rel

from .conftest import N_ROWS, make_cfg, run_mcprm


@pytest.fixture(scope="module")
def committed(small_input, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("committed") / "out")
    label(make_cfg(small_input, out, shard_size=2, max_new_tokens=16))
    return out


def _copy(src, tmp_path) -> str:
    dst = str(tmp_path / "out")
    shutil.copytree(src, dst)
    return dst


def test_refresh_refuses_to_drop_rows_of_a_damaged_shard_unless_asked(committed, small_input, tmp_path):
    out = _copy(committed, tmp_path)
    store = CorpusStore(out)
    v1 = store.version_manifest(1)
    damaged = v1["shards"][1]
    lost_keys = store.read_table(damaged["path"], columns=["key"]).column("key").to_pylist()
    assert store.read_json(sidecar_rel(damaged["path"]))["keys"] == lost_keys  # named even once unreadable
    full = os.path.join(out, damaged["path"])
    data = open(full, "rb").read()
    open(full, "wb").write(data[: len(data) // 2])  # truncated: no row of it can be read
    # the new input: the rows of the intact shards and one new row, not the damaged shard's rows
    rows = [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[: N_ROWS + 1]]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for i, r in enumerate(rows) if i not in (2, 3)))
    cfg = make_cfg(str(inp), out, shard_size=2, max_new_tokens=16)
    with pytest.raises(ShardError) as e:
        label(cfg)
    msg = str(e.value)
    assert store.uri(damaged["path"]) in msg and "2 of its 2 rows" in msg and lost_keys[0] in msg, msg
    assert "--drop-damaged" in msg and "backup" in msg and "Nothing was labeled or committed" in msg
    assert store.versions() == [1] and store.manifest()["version"] == 1  # nothing committed

    res = label(cfg.replace(drop_damaged=True))
    m = res.manifest
    assert res.version == 2 and res.added == 1
    assert m["counts"]["dropped"] == 2 and m["counts"]["solutions"] == N_ROWS - 2 + 1
    assert m["dropped"] == [{"path": damaged["path"], "version": 1, "rows": 2, "keys": lost_keys, "missing": 2}]
    assert store.version_manifest(2)["dropped"] == m["dropped"]
    keys = set(read_corpus(out, verify=True).column("key").to_pylist())
    assert len(keys) == N_ROWS - 1 and not keys & set(lost_keys)


def test_refresh_relabels_a_damaged_shard_the_input_still_holds(committed, small_input, tmp_path):
    out = _copy(committed, tmp_path)
    store = CorpusStore(out)
    damaged = store.version_manifest(1)["shards"][0]
    full = os.path.join(out, damaged["path"])
    b = bytearray(open(full, "rb").read())
    b[len(b) // 3] ^= 0x5A  # a bit flip
    open(full, "wb").write(bytes(b))
    res = label(make_cfg(small_input, out, shard_size=2, max_new_tokens=16))
    assert res.version == 2 and res.added == 2 and "dropped" not in res.manifest
    assert len(read_corpus(out, verify=True)) == N_ROWS


def test_verify_finds_a_solution_held_by_two_shards(committed, tmp_path):
    out = _copy(committed, tmp_path)
    assert verify_corpus(out)[0] == []
    store = CorpusStore(out)
    m = store.version_manifest(1)
    src = m["shards"][0]
    copy = src["path"].replace("part-00000.", "part-00009.")
    shutil.copyfile(os.path.join(out, src["path"]), os.path.join(out, copy))
    m["shards"].append(dict(src, path=copy))
    m["counts"]["solutions"] += src["rows"]
    for rel in ("versions/v00001.json", "manifest.json"):
        open(os.path.join(out, rel), "w").write(json.dumps(m, indent=2) + "\n")
    problems, summary = verify_corpus(out)
    assert len(problems) == 1 and summary["damaged_versions"] == [1], problems
    p = problems[0]
    assert p.where == "version 1" and "2 solution keys are held more than once" in p.what
    assert src["path"] in p.what and copy in p.what and "--output NEW" in p.fix


def test_a_drop_damaged_version_with_nothing_new_is_said_as_committed(committed, small_input, tmp_path):
    """A --drop-damaged refresh whose input holds no new row still commits a version (without the damaged rows):
    the summary says so, never "up to date"."""
    out = _copy(committed, tmp_path)
    store = CorpusStore(out)
    damaged = store.version_manifest(1)["shards"][1]
    full = os.path.join(out, damaged["path"])
    data = open(full, "rb").read()
    open(full, "wb").write(data[: len(data) // 2])
    rows = [json.loads(x) for x in open(small_input).read().splitlines()]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for i, r in enumerate(rows) if i not in (2, 3)))
    r = run_mcprm("label", "--input", str(inp), "--output", out, "--k", "2", "--strategy", "per-step",
                  "--max-new-tokens", "16", "--shard-size", "2", "--executor", "local", "--drop-damaged")
    assert r.returncode == 0, r.stdout + r.stderr
    assert store.manifest()["version"] == 2 and store.manifest()["counts"]["dropped"] == 2
    assert "up to date" not in r.stdout and "version 2: labeled 0 solutions" in r.stdout, r.stdout
    assert "2 rows of damaged shards left out (--drop-damaged)" in r.stdout, r.stdout
