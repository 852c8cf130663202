"""``trl``: TRL stepwise supervision, ``prompt`` / ``completions`` (the steps) / ``labels`` (bool per step). TRL's
``PRMTrainer`` tokenizes each step, appends ``step_separator`` and puts the label on the separator's last token."""

from __future__ import annotations

from pipeline.export.common import Row
from pipeline.export.formats.base import Exporter, encode_ids


class Trl(Exporter):
    name = "trl"
    default_tag = "\n"
    tag_what = "step separator"
    columnar = True
    no_soft = "TRL's PRMTrainer casts labels with int(), so 0.75 would silently become 0"

    def record(self, row, opts, tokenizer=None) -> dict:
        return {"id": row.id, "prompt": row.problem, "completions": list(row.steps), "labels": list(row.labels)}

    def parse(self, record, problem, opts, tokenizer=None):
        return list(record["completions"]), list(record["labels"])

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("prompt", pa.string()), ("completions", pa.list_(pa.string())),
                          ("labels", pa.list_(pa.float64() if soft else pa.bool_()))])

    def check_tokens(self, record, row, opts, tokenizer, fail) -> None:
        tag = self.tag(opts)
        if not encode_ids(tokenizer, tag):
            fail(f"the step separator {tag!r} encodes to no tokens; PRMTrainer would put labels on the steps' "
                 "last tokens or misalign them. Pass a --step-tag that the tokenizer keeps.")

    def columns(self, batch, drop_after_first_error, skipped, cut, counts):
        from pipeline.export.columns import trl_columns

        return trl_columns(batch, drop_after_first_error, skipped, cut, counts)

    def row_of(self, record: dict) -> Row:
        return Row(record["id"], record["prompt"], record["completions"], record["labels"])
