"""Staged shards (issue 15): cut as ``shard_sizes`` says, shard i the next ``sizes[i]`` solutions in input order,
whatever the number of solutions is (known only at the end of the pass), and read back as written."""

from __future__ import annotations

import uuid

import pytest

from pipeline.execution.sizing import shard_sizes
from pipeline.run import staging
from pipeline.run.staging import Stager, key_digest, read_staged
from pipeline.solution import Solution
from pipeline.storage.store import CorpusStore, ShardError


def key_digest_all(keys) -> str:
    import hashlib

    return hashlib.sha256("".join(k + "\n" for k in keys).encode()).hexdigest()[:32]


def _sols(n: int) -> list[Solution]:
    return [Solution(id=f"s{i}", problem=f"Compute {i} + 1.", answer=str(i + 1), steps=(f"{i} + 1 = {i + 1}",),
                     source=f"in.jsonl:{i}") for i in range(n)]


@pytest.mark.parametrize("shard_size", [1, 3, 8])
@pytest.mark.parametrize("workers", [1, 2, 5])
def test_staged_shards_follow_shard_sizes(shard_size, workers, monkeypatch):
    monkeypatch.setattr(staging, "GROUP_ROWS", 7)  # several files, shards grouped in each
    for n in (0, 1, 2, 5, 17, 40, 97):
        store = CorpusStore(f"memory://stage-{uuid.uuid4().hex}")
        sols = _sols(n)
        st = Stager(store, "data/v00001", shard_size, workers)
        for s in sols:
            st.add(s.key, s)
            assert len(st.pending) <= 4 * workers * shard_size + 1  # memory bounded by the configuration
        shards, digest = st.finish()
        assert [sh["rows"] for sh in shards] == shard_sizes(n, shard_size, workers)
        assert digest == key_digest_all(s.key for s in sols)
        got = [s for sh in shards for s in read_staged(store, "data/v00001", sh)]
        assert got == sols
        assert all(sh["keys"] == key_digest(s.key for s in read_staged(store, "data/v00001", sh)) for sh in shards)


def test_same_content_same_file_written_once():
    store = CorpusStore(f"memory://stage-{uuid.uuid4().hex}")
    sols = _sols(10)
    first = Stager(store, "data/v00001", 4, 1)
    for s in sols:
        first.add(s.key, s)
    a, _ = first.finish()
    again = Stager(store, "data/v00001", 4, 1)
    for s in sols:
        again.add(s.key, s)
    b, _ = again.finish()
    assert a == b and first.written and not again.written  # the re-run found its file there
    other = Stager(store, "data/v00001", 4, 1)
    for s in sols:
        other.add(s.key, Solution(**{**s.__dict__, "source": "other.jsonl:0"}))
    c, _ = other.finish()
    assert {sh["staged"] for sh in c}.isdisjoint({sh["staged"] for sh in a})  # what a file holds names it


def test_a_missing_staged_file_is_named():
    store = CorpusStore(f"memory://stage-{uuid.uuid4().hex}")
    st = Stager(store, "data/v00001", 4, 1)
    for s in _sols(3):
        st.add(s.key, s)
    (sh,), _ = st.finish()
    st.discard()
    with pytest.raises(ShardError, match="rerun the same command"):
        read_staged(store, "data/v00001", sh)


@pytest.mark.parametrize("workers", [2, 4])
def test_staged_tail_is_cut_by_work(workers):
    """With a cost per solution, the last (smaller) shards hold about equal work: same number of shards, same
    full shards before them, every solution once, in input order."""
    from pipeline.execution.sizing import solution_cost

    cost = solution_cost("per-step")
    sols = [Solution(id=f"w{i}", problem=f"p{i}", answer="1", steps=tuple(f"s{j}" for j in range(3 + (i * 7) % 8)))
            for i in range(97)]
    for shard_size in (3, 8):
        store = CorpusStore(f"memory://stage-{uuid.uuid4().hex}")
        st = Stager(store, "data/v00001", shard_size, workers, cost=cost)
        for s in sols:
            st.add(s.key, s)
        head = len(st.shards)  # full shards cut while more than the lookahead was waiting
        shards, _ = st.finish()
        by_count = shard_sizes(97, shard_size, workers)
        rows = [sh["rows"] for sh in shards]
        assert len(rows) == len(by_count) and sum(rows) == 97 and min(rows) >= 1
        assert rows[:head] == by_count[:head]
        if head < len(rows) - 1:
            assert rows != by_count  # unequal solutions: the tail moved
        assert [s for sh in shards for s in read_staged(store, "data/v00001", sh)] == sols
