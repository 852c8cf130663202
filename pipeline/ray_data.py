"""Ray Data in and out: label a ``ray.data.Dataset`` of solutions, read a corpus as one.

In::

    import ray.data
    from pipeline import label_dataset
    from pipeline.config import LabelConfig

    ds = ray.data.read_json("s3://bucket/solutions/")          # rows: id, problem, answer, steps
    labeled = label_dataset(ds, LabelConfig(strategy="binary-search", k=8))
    labeled.write_parquet("s3://bucket/labeled/")                # the corpus schema, one row per solution

Out::

    from pipeline.corpus import shard_uris
    ds = ray.data.read_parquet(shard_uris(OUT))                  # the manifest's snapshot, never a glob

:func:`label_dataset` is a lazy ``map_batches`` over rollout actors (``num_workers`` of them, each with its own
backend, as ``mcprm label`` builds them); each batch of solutions is labeled by the same scheduler and
strategy as a shard of ``mcprm label``, with the same per-solution seeding, so a solution's labels do not
depend on which batch or actor it lands in. Rows are returned in the corpus schema
(:func:`pipeline.storage.schema.arrow_schema`). What a Dataset does not give: resume, versions, the manifest,
the output lock and rejects files; for those, write the rows out and use ``mcprm label`` on files.
"""

from __future__ import annotations

from typing import Any

from pipeline.errors import FatalError


class DatasetError(FatalError, ValueError):
    """A row of the dataset is not a solution (names the row and the field)."""


def _solution(row: dict[str, Any], i: int):
    from pipeline.solution import Solution

    for f in ("problem", "answer", "steps"):
        if row.get(f) is None:
            raise DatasetError(f"dataset row {row.get('id', i)!r}: field {f!r} is missing (need problem, answer, "
                               "steps; id and source optional)")
    steps = row["steps"]
    if isinstance(steps, str) or not all(isinstance(s, str) and s.strip() for s in steps) or not len(steps):
        raise DatasetError(f"dataset row {row.get('id', i)!r}: 'steps' must be a non-empty list of non-empty "
                           "strings")
    sol = Solution(id="", problem=str(row["problem"]), answer=str(row["answer"]), steps=tuple(steps),
                   source=str(row.get("source") or ""))
    rid = row.get("id")
    return Solution(id=str(rid) if rid is not None else sol.key, problem=sol.problem, answer=sol.answer,
                    steps=sol.steps, source=sol.source)


class _Labeler:
    """One rollout actor of :func:`label_dataset`: a backend, built once, labels batch after batch."""

    def __init__(self, config):
        from pipeline.execution.shard_worker import ShardWorker

        self.cfg = config
        self.worker = ShardWorker(config)

    def __call__(self, batch):
        from pipeline.storage.schema import to_table

        sols = [_solution(r, i) for i, r in enumerate(batch.to_pylist())]
        labeled, _ = self.worker.label(sols)
        return to_table(labeled, self.cfg.k)


def label_dataset(ds, config, *, batch_size: int | None = None, concurrency: int | None = None):
    """Label the solutions of Ray Dataset ``ds`` with ``config`` (a :class:`pipeline.config.LabelConfig`);
    returns a Dataset of labeled rows in the corpus schema. Lazy: nothing runs until the result is consumed.

    ``batch_size`` (default ``config.shard_size``) is the number of solutions one actor labels together (the
    scheduler batches their rollouts); ``concurrency`` (default ``config.num_workers``, else 1) the actors."""
    cfg = config.resolved()
    workers = concurrency or cfg.num_workers or 1
    size = batch_size or cfg.shard_size
    gpus = float(cfg.gpus_per_worker)
    kwargs: dict[str, Any] = {"num_gpus": gpus} if gpus else {}
    return ds.map_batches(_Labeler, fn_constructor_kwargs={"config": cfg}, batch_size=size,
                          batch_format="pyarrow", concurrency=workers,
                          num_cpus=float(cfg.cpus_per_worker or 1), **kwargs)
