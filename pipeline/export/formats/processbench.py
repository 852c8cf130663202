"""``processbench``: ``problem``, ``steps``, ``label`` = index of the first wrong step or -1,
``final_answer_correct``. All steps are kept (the label says where the error is); no tag, no tokens."""

from __future__ import annotations

from pipeline.export.common import Row
from pipeline.export.formats.base import FirstErrorIndex, first_error, index_labels


class ProcessBench(FirstErrorIndex):
    name = "processbench"
    columnar = True

    def record(self, row, opts, tokenizer=None) -> dict:
        return {"id": row.id, "problem": row.problem, "steps": list(row.steps), "label": first_error(row.labels),
                "final_answer_correct": row.solution_correct}

    def parse(self, record, problem, opts, tokenizer=None):
        """The first-error index as labels ``[True] * label + [False]`` (or all True)."""
        steps, fe = list(record["steps"]), int(record["label"])
        return steps, [True] * len(steps) if fe == -1 else [True] * fe + [False]

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("problem", pa.string()), ("steps", pa.list_(pa.string())),
                          ("label", pa.int32()), ("final_answer_correct", pa.bool_())])

    def columns(self, batch, drop_after_first_error, skipped, cut, counts):
        from pipeline.export.columns import processbench_columns

        return processbench_columns(batch, skipped, counts)

    def row_of(self, record: dict) -> Row:
        return Row(record["id"], record["problem"], record["steps"],
                   index_labels(record["label"], len(record["steps"])), record["final_answer_correct"])
