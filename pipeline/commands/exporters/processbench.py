"""``processbench``: ``problem``, ``steps``, ``label`` = index of the first wrong step or -1,
``final_answer_correct``. All steps are kept (the label says where the error is); no tag, no tokens."""

from __future__ import annotations

from pipeline.commands.export_common import Row
from pipeline.commands.exporters.base import Exporter, first_error


class ProcessBench(Exporter):
    name = "processbench"
    default_tag = ""
    empty_tag_ok = True
    no_soft = "its label is a first-error index"
    token_checked = False
    keeps_all_steps = True
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

    def check_labels(self, record, row, labels, fail) -> None:
        fe = first_error(row.labels)
        if record["label"] != fe or not (-1 <= fe < len(row.steps)):
            fail(f"first-error index {record['label']} does not match the labels")

    def columns(self, batch, drop_after_first_error, skipped, cut):
        from pipeline.commands.export_columns import processbench_columns

        return processbench_columns(batch, skipped)

    def row_of(self, record: dict) -> Row:
        fe, m = record["label"], len(record["steps"])
        return Row(record["id"], record["problem"], record["steps"],
                   [True] * m if fe == -1 else [True] * fe + [False] + [None] * (m - fe - 1),
                   record["final_answer_correct"])
