"""``openrlhf``: OpenRLHF's process reward dataset (``--input_key input --label_key value --placeholder_token ки
--reward_tokens + -``): ``input`` as in math-shepherd, ``value`` = ``["+", "-", ...]`` or, with soft labels,
floats."""

from __future__ import annotations

from pipeline.export.formats.base import TaggedText, parse_tagged_text, single_token_id, tagged_text


class OpenRlhf(TaggedText):
    name = "openrlhf"
    default_tag = "ки"
    tag_what = "placeholder"
    tag_from_placeholder = True
    text_field = "input"

    def record(self, row, opts, tokenizer=None) -> dict:
        good, bad = opts.reward_tokens
        value = list(row.labels) if opts.soft else [good if y else bad for y in row.labels]
        return {"id": row.id, "input": tagged_text(row.problem, row.steps, [self.tag(opts)] * len(row.steps)),
                "value": value}

    def parse(self, record, problem, opts, tokenizer=None):
        good, bad = opts.reward_tokens
        steps = parse_tagged_text(record["input"], problem, self.tag(opts))
        value = list(record["value"])
        return steps, value if opts.soft else [v == good if v in (good, bad) else None for v in value]

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("input", pa.string()),
                          ("value", pa.list_(pa.float64()) if soft else pa.list_(pa.string()))])

    def check_reward_tokens(self, record, row, opts, tokenizer, ids, tid, fail) -> None:
        if not opts.soft:
            for t in opts.reward_tokens:
                single_token_id(tokenizer, t, "reward token", row.id)
