"""Ray Data in and out (issue 17): ``ray.data.read_parquet(shard_uris(OUT))`` reads the corpus;
``pipeline.label_dataset`` labels a Dataset of solutions like ``mcprm label`` does, on a local Ray."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray(local_ray):
    """tests/pipeline/conftest.py's local Ray, with Ray Data's progress bars off."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    return local_ray


def test_read_parquet_of_shard_uris(local_ray, tmp_path):
    import ray.data

    from pipeline.corpus import read_corpus, shard_uris
    from tests.pipeline.prm_fixtures import make_corpus

    make_corpus(tmp_path / "out")
    ds = ray.data.read_parquet(shard_uris(str(tmp_path / "out")))
    got = sorted(ds.take_all(), key=lambda r: r["id"])
    want = sorted(read_corpus(str(tmp_path / "out")).to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [r["id"] for r in want]
    assert [list(r["labels"]) for r in got] == [r["labels"] for r in want]


def test_label_dataset_matches_the_in_process_worker(local_ray):
    import ray.data

    import pipeline
    from pipeline.bundled import MODEL_DIR, SAMPLE_PATH
    from pipeline.config import LabelConfig
    from pipeline.execution.shard_worker import ShardWorker
    from pipeline.solution import Solution
    from pipeline.storage.schema import arrow_schema

    assert (MODEL_DIR / "config.json").exists(), f"the bundled model is part of the repository: {MODEL_DIR}"
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:3]]
    rows = [{k: r[k] for k in ("id", "problem", "answer", "steps")} for r in rows]
    cfg = LabelConfig(k=2, max_new_tokens=24, strategy="binary-search", num_workers=1, seed=3)
    out = pipeline.label_dataset(ray.data.from_items(rows), cfg, batch_size=2)
    got = sorted(out.take_all(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == sorted(r["id"] for r in rows)
    assert set(got[0]) == set(arrow_schema().names)

    worker = ShardWorker(cfg.resolved())
    try:
        labeled, _ = worker.label([Solution(r["id"], r["problem"], r["answer"], tuple(r["steps"])) for r in rows])
    finally:
        worker.close()
    want = sorted(labeled, key=lambda ls: ls.solution.id)
    assert [list(r["labels"]) for r in got] == [list(ls.labels) for ls in want]
    assert [r["first_error"] for r in got] == [ls.first_error for ls in want]
    assert [list(r["mc_correct"]) for r in got] == [[s.correct for s in ls.stats] for ls in want]


def test_bad_row_is_named():
    from pipeline.ray_data import DatasetError, _solution

    with pytest.raises(DatasetError, match="row 'x'.*'answer' is missing"):
        _solution({"id": "x", "problem": "p", "steps": ["a"]}, 0)
    with pytest.raises(DatasetError, match="non-empty list"):
        _solution({"id": "y", "problem": "p", "answer": "1", "steps": "a"}, 0)
