"""The five trainer formats of ``mcprm export``: a row as each trainer reads it (:func:`format_row`), read back
(:func:`parse_record`), and each format's Arrow schema (:func:`record_schema`). See :mod:`pipeline.commands.export`
for the formats themselves."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pipeline.commands.export_common import (
    DEFAULT_TAG,
    FORMATS,
    ExportError,
    ExportOptions,
    Row,
)


def tag_of(opts: ExportOptions) -> str:
    return opts.step_tag or DEFAULT_TAG[opts.fmt]


def _tagged_text(problem: str, steps: Sequence[str], marks: Sequence[str]) -> str:
    return f"{problem} " + "\n".join(f"{s} {m}" for s, m in zip(steps, marks, strict=True))


def _qwen_frame(problem: str, opts: ExportOptions, tokenizer=None) -> tuple[str, str]:
    """(text before, text after) the assistant content of the Qwen-PRM conversation."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return _chatml_frame(opts.system_prompt, problem)
    msgs = [{"role": "system", "content": opts.system_prompt}, {"role": "user", "content": problem},
            {"role": "assistant", "content": _MARKER}]
    return _split_frame(tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False))


_MARKER = "\x00MCPRM\x00"


@lru_cache(maxsize=1024)  # a row's frame is computed for format_row and again for parse_record
def _chatml_frame(system_prompt: str, problem: str) -> tuple[str, str]:
    """Qwen2.5's ChatML template around the assistant content."""
    return _split_frame(f"<|im_start|>system\n{system_prompt}<|im_end|>\n<|im_start|>user\n{problem}<|im_end|>\n"
                        f"<|im_start|>assistant\n{_MARKER}<|im_end|>\n")


def _split_frame(text: str) -> tuple[str, str]:
    marker = _MARKER
    if text.count(marker) != 1:
        raise ExportError("the tokenizer's chat template does not render the assistant turn verbatim; "
                          "export qwen-prm without --tokenizer or with a tokenizer whose template does")
    before, after = text.split(marker)
    return before, after


def format_row(row: Row, opts: ExportOptions, tokenizer=None) -> dict:
    """The trainer-facing record of one row."""
    fmt, tag = opts.fmt, tag_of(opts)
    good, bad = opts.reward_tokens
    if fmt == "trl":
        return {"id": row.id, "prompt": row.problem, "completions": list(row.steps), "labels": list(row.labels)}
    if fmt == "math-shepherd":
        return {"id": row.id, "input": _tagged_text(row.problem, row.steps, [tag] * len(row.steps)),
                "label": _tagged_text(row.problem, row.steps, [good if y else bad for y in row.labels])}
    if fmt == "openrlhf":
        value = list(row.labels) if opts.soft else [good if y else bad for y in row.labels]
        return {"id": row.id, "input": _tagged_text(row.problem, row.steps, [tag] * len(row.steps)), "value": value}
    if fmt == "qwen-prm":
        before, after = _qwen_frame(row.problem, opts, tokenizer)
        return {"id": row.id, "text": before + "".join(s + tag for s in row.steps) + after,
                "labels": list(row.labels)}
    if fmt == "processbench":
        fe = next((i for i, y in enumerate(row.labels) if y is False), -1)
        return {"id": row.id, "problem": row.problem, "steps": list(row.steps), "label": fe,
                "final_answer_correct": row.solution_correct}
    raise ExportError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def parse_record(record: dict, problem: str, opts: ExportOptions, tokenizer=None) -> tuple[list[str], list[Any]]:
    """Read steps and labels back out of a record (the inverse of :func:`format_row`).

    ``processbench`` gives its first-error index as labels ``[True] * label + [False]`` (or all True).
    Raises ``ValueError`` where the record is not what :func:`format_row` would write.
    """
    fmt, tag = opts.fmt, tag_of(opts)
    good, bad = opts.reward_tokens
    if fmt == "trl":
        return list(record["completions"]), list(record["labels"])
    if fmt == "processbench":
        steps, fe = list(record["steps"]), int(record["label"])
        return steps, [True] * len(steps) if fe == -1 else [True] * fe + [False]
    if fmt == "qwen-prm":
        before, after = _qwen_frame(problem, opts, tokenizer)
        text = record["text"]
        if not (text.startswith(before) and text.endswith(after)):
            raise ValueError("text is not the chat-formatted conversation of this problem")
        content = text[len(before):len(text) - len(after)]
        pieces = content.split(tag)
        if pieces[-1] != "":
            raise ValueError(f"the assistant turn does not end with {tag!r}")
        return pieces[:-1], list(record["labels"])
    if fmt in ("math-shepherd", "openrlhf"):
        text = record["input"]
        if not text.startswith(problem + " "):
            raise ValueError("input does not start with the problem")
        pieces = text[len(problem) + 1:].split(f" {tag}")
        if pieces[-1] != "":
            raise ValueError(f"input does not end with the step tag {tag!r}")
        steps = [p[1:] if i else p for i, p in enumerate(pieces[:-1])]
        if any(i and not p.startswith("\n") for i, p in enumerate(pieces[:-1])):
            raise ValueError("steps are not separated by a newline after the step tag")
        if fmt == "openrlhf":
            value = list(record["value"])
            labels = value if opts.soft else [v == good if v in (good, bad) else None for v in value]
            return steps, labels
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
    raise ExportError(f"unknown format {fmt!r}")


def record_schema(fmt: str, soft: bool):
    import pyarrow as pa

    lab = pa.list_(pa.float64() if soft else pa.bool_())
    return {
        "trl": pa.schema([("id", pa.string()), ("prompt", pa.string()), ("completions", pa.list_(pa.string())),
                          ("labels", lab)]),
        "math-shepherd": pa.schema([("id", pa.string()), ("input", pa.string()), ("label", pa.string())]),
        "openrlhf": pa.schema([("id", pa.string()), ("input", pa.string()),
                               ("value", pa.list_(pa.float64()) if soft else pa.list_(pa.string()))]),
        "qwen-prm": pa.schema([("id", pa.string()), ("text", pa.string()), ("labels", lab)]),
        "processbench": pa.schema([("id", pa.string()), ("problem", pa.string()), ("steps", pa.list_(pa.string())),
                                   ("label", pa.int32()), ("final_answer_correct", pa.bool_())]),
    }[fmt]
