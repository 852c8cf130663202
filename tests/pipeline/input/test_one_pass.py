"""The one pass over the input (issue 15/17): ids and contents checked with compact indexes that stay exact
when hashes collide and across index merges; a refresh leaves out what the corpus has; --limit."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from pipeline.input import IngestStats, InputError, InputSpec, iter_keyed_solutions, reading
from pipeline.solution import content_key
from pipeline.storage.integrity import key_numbers
from tests.input_files import iter_solutions


def _rows(n: int, seed: int = 0) -> list[dict]:
    """n rows with repeats of every kind: exact duplicates, the same content under another id, an id used
    again for other content, and rows without an id."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        j = rng.randrange(max(1, n // 3))
        r = {"problem": f"Compute {j} + 1.", "answer": str(j + 1), "steps": [f"{j} + 1 = {j + 1}"]}
        kind = rng.random()
        if kind < 0.5:
            r["id"] = f"s{j}"
        elif kind < 0.6:
            r["id"] = f"other{i}"  # the content of s{j}, another id
        elif kind < 0.65:
            r = dict(r, id=f"s{j}", answer=str(j + 2))  # s{j}'s id for other content
        rows.append(r)
    return rows


def _reference(rows: list[dict]) -> tuple[list[tuple[str, str]], list[int], int]:
    """(id, key) of the solutions yielded, rows rejected, exact duplicates: dicts and sets of full strings."""
    ids: dict[str, str] = {}
    keys: set[str] = set()
    out, rejected, dups = [], [], 0
    for i, r in enumerate(rows):
        key = content_key(r["problem"], r["answer"], r["steps"])
        sid = r.get("id", key)
        if sid in ids:
            if ids[sid] == key:
                dups += 1
            else:
                rejected.append(i)
            continue
        ids[sid] = key
        if key in keys:
            continue
        keys.add(key)
        out.append((sid, key))
    return out, rejected, dups


def _write(tmp_path, rows) -> str:
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(p)


@pytest.mark.parametrize("collide", [False, True])
def test_compact_indexes_match_dicts_of_strings(tmp_path, monkeypatch, collide):
    monkeypatch.setattr(reading, "_MERGE_AT", 7)  # merges into the sorted arrays every few rows
    monkeypatch.setattr(reading.files, "BATCH_ROWS", 16)
    if collide:  # every id hashes alike: only the full comparison tells them apart
        monkeypatch.setattr(reading, "_id_hash", lambda sid: 42)
    rows = _rows(600)
    p = _write(tmp_path, rows)
    want, rejected, dups = _reference(rows)
    got, rejects, stats = [], [], IngestStats()
    for key, sol in iter_keyed_solutions(InputSpec(paths=(p,)), True, rejects.append, stats):
        got.append((sol.id, key))
        assert key == sol.key
    assert got == want
    assert [r.row for r in rejects] == rejected and stats.duplicates == dups
    assert stats.solutions == len(want) and stats.same_content == len(rows) - len(want) - len(rejected) - dups
    assert all("is already used by" in r.reason for r in rejects)


def test_known_contents_are_left_out_and_limit_counts_them(tmp_path):
    rows = [{"id": f"s{i}", "problem": f"Compute {i} + 1.", "answer": str(i + 1), "steps": [f"{i} + 1 = {i + 1}"]}
            for i in range(10)]
    p = _write(tmp_path, rows)
    keys = [content_key(r["problem"], r["answer"], r["steps"]) for r in rows]
    known = key_numbers(keys[::2])
    assert known.dtype == np.uint64 and list(known) == sorted(int(k, 16) for k in keys[::2])
    stats = IngestStats()
    got = [k for k, _ in iter_keyed_solutions(InputSpec(paths=(p,)), stats=stats, known=known)]
    assert got == keys[1::2] and stats.known == 5 and stats.solutions == 10
    stats = IngestStats()
    got = [k for k, _ in iter_keyed_solutions(InputSpec(paths=(p,)), stats=stats, known=known, limit=4)]
    assert got == [keys[1], keys[3]] and stats.solutions == 4


def test_limit_without_skip_bad_still_checks_every_row(tmp_path):
    rows = [{"problem": f"p{i}", "answer": "1", "steps": ["s"]} for i in range(5)] + [{"problem": "late"}]
    p = _write(tmp_path, rows)
    with pytest.raises(InputError, match=r"line 6, field 'answer'"):
        list(iter_solutions(InputSpec(paths=(p,)), limit=2))
    got = list(iter_solutions(InputSpec(paths=(p,)), skip_bad=True, on_reject=pytest.fail, limit=2))
    assert [s.problem for s in got] == ["p0", "p1"]  # reading stops at the limit: the late bad row is not read
