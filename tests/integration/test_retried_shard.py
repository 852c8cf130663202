"""A shard Ray resubmits while its first attempt still finishes (a node that looked gone) never overwrites the bytes
the first attempt reported, and the run records exactly one of them: the real bundled model, real Parquet."""

from __future__ import annotations

import hashlib
import json

from pipeline.execution.shard_worker import ShardWorker
from pipeline.solution import Solution
from pipeline.storage.store import CorpusStore, Fenced, sidecar_rel

from .conftest import make_cfg


def _solutions(path: str, n: int) -> list[Solution]:
    rows = [json.loads(x) for x in open(path).read().splitlines()[:n]]
    return [Solution(r["id"], r["problem"], r["answer"], tuple(r["steps"]), source=f"{path}:{i}")
            for i, r in enumerate(rows)]


def test_second_attempt_of_a_shard_never_overwrites_the_first(small_input, tmp_path):
    out = str(tmp_path / "out")
    cfg = make_cfg(small_input, out, max_new_tokens=16, k=2).resolved()
    worker = ShardWorker(cfg)
    sols = _solutions(small_input, 2)
    version = Fenced(1, "0123456789ab")  # the same owner: a retried task of one run
    first = worker.process(version, 0, sols)
    # the retry runs on another actor, whose continuations differ (vLLM output is not bit-reproducible)
    other = ShardWorker(cfg.replace(seed=cfg.seed + 1).resolved())
    second = other.process(version, 0, sols)
    other.close()
    assert first["path"] != second["path"]
    assert first["path"].startswith("data/v00001/part-00000.0123456789ab.")
    store = CorpusStore(out)
    for res in (first, second):  # each attempt's file is still the very bytes it reported
        data = store.read_bytes(res["path"])
        assert len(data) == res["bytes"] and hashlib.sha256(data).hexdigest() == res["sha256"]
        side = store.read_json(sidecar_rel(res["path"]))
        assert side["sha256"] == res["sha256"] and side["keys"] == [s.key for s in sols]
    worker.close()
