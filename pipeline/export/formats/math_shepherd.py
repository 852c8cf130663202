"""``math-shepherd``: ``input`` = problem, a space, then ``"{step} ки"`` per step joined by newlines; ``label`` =
the same text with each tag replaced by ``+`` or ``-`` (peiyi9979/Math-Shepherd)."""

from __future__ import annotations

from pipeline.export.formats.base import (
    TaggedText,
    encode_ids,
    parse_tagged_text,
    single_token_id,
    tagged_text,
)


class MathShepherd(TaggedText):
    name = "math-shepherd"
    default_tag = "ки"
    text_field = "input"
    no_soft = "its labels are '+'/'-' characters in the text"
    needs_ids = True  # the label text is checked token by token against the input's ids

    def record(self, row, opts, tokenizer=None) -> dict:
        good, bad = opts.reward_tokens
        return {"id": row.id, "input": tagged_text(row.problem, row.steps, [self.tag(opts)] * len(row.steps)),
                "label": tagged_text(row.problem, row.steps, [good if y else bad for y in row.labels])}

    def parse(self, record, problem, opts, tokenizer=None):
        good, bad = opts.reward_tokens
        steps = parse_tagged_text(record["input"], problem, self.tag(opts))
        label_text, labels, pos = record["label"], [], len(problem) + 1
        for s in steps:
            pos += len(s) + 1
            for mark, y in ((good, True), (bad, False)):
                if label_text.startswith(mark, pos):
                    labels.append(y)
                    pos += len(mark)
                    break
            else:
                raise ValueError(f"label text has no {good!r}/{bad!r} after step {len(labels) + 1}")
            pos += 1  # the newline
        return steps, labels

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("input", pa.string()), ("label", pa.string())])

    def check_reward_tokens(self, record, row, opts, tokenizer, ids, tid, fail) -> None:
        good_id = single_token_id(tokenizer, opts.reward_tokens[0], "reward token", row.id)
        bad_id = single_token_id(tokenizer, opts.reward_tokens[1], "reward token", row.id)
        lab = encode_ids(tokenizer, record["label"])
        # the encoded input with its tag tokens (n of them, checked before) replaced by the labels' tokens
        want = list(ids)
        for i, y in zip([i for i, t in enumerate(ids) if t == tid], row.labels, strict=True):
            want[i] = good_id if y else bad_id
        if not (len(lab) == len(ids) and list(lab) == want):
            fail("the encoded `label` text is not the encoded `input` with the tag tokens replaced by the "
                 f"{opts.reward_tokens} tokens (the reward tokens merge with neighbouring text)")
