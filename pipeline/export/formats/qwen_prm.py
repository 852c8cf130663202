"""``qwen-prm``: ``text`` = the chat-formatted conversation (Qwen2.5-Math-PRM system prompt, the problem as user
turn, the steps each followed by ``<extra_0>`` as assistant turn); ``labels`` per step (bool, or float with
``label_rule="soft"``)."""

from __future__ import annotations

from functools import lru_cache

from pipeline.export.common import ExportError
from pipeline.export.formats.base import TaggedText

_MARKER = "\x00MCPRM\x00"


class QwenPrm(TaggedText):
    name = "qwen-prm"
    default_tag = "<extra_0>"
    tag_what = "step separator"
    text_field = "text"

    def record(self, row, opts, tokenizer=None) -> dict:
        before, after = qwen_frame(row.problem, opts.system_prompt, tokenizer)
        tag = self.tag(opts)
        return {"id": row.id, "text": before + "".join(s + tag for s in row.steps) + after,
                "labels": list(row.labels)}

    def parse(self, record, problem, opts, tokenizer=None):
        before, after = qwen_frame(problem, opts.system_prompt, tokenizer)
        text, tag = record["text"], self.tag(opts)
        if not (text.startswith(before) and text.endswith(after)):
            raise ValueError("text is not the chat-formatted conversation of this problem")
        pieces = text[len(before):len(text) - len(after)].split(tag)
        if pieces[-1] != "":
            raise ValueError(f"the assistant turn does not end with {tag!r}")
        return pieces[:-1], list(record["labels"])

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("text", pa.string()),
                          ("labels", pa.list_(pa.float64() if soft else pa.bool_()))])


def qwen_frame(problem: str, system_prompt: str, tokenizer=None) -> tuple[str, str]:
    """(text before, text after) the assistant content of the Qwen-PRM conversation."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return _chatml_frame(system_prompt, problem)
    msgs = [{"role": "system", "content": system_prompt}, {"role": "user", "content": problem},
            {"role": "assistant", "content": _MARKER}]
    return _split_frame(tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False))


@lru_cache(maxsize=1024)  # a row's frame is computed for its record and again when it is read back
def _chatml_frame(system_prompt: str, problem: str) -> tuple[str, str]:
    """Qwen2.5's ChatML template around the assistant content."""
    return _split_frame(f"<|im_start|>system\n{system_prompt}<|im_end|>\n<|im_start|>user\n{problem}<|im_end|>\n"
                        f"<|im_start|>assistant\n{_MARKER}<|im_end|>\n")


def _split_frame(text: str) -> tuple[str, str]:
    if text.count(_MARKER) != 1:
        raise ExportError("the tokenizer's chat template does not render the assistant turn verbatim; "
                          "export qwen-prm without --tokenizer or with a tokenizer whose template does")
    before, after = text.split(_MARKER)
    return before, after
