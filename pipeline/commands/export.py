"""Export a labeled corpus in the formats PRM trainers read, checking every row before it is written.

Formats (one record per solution; every record also carries the corpus ``id``):

* ``trl``: TRL stepwise supervision, ``prompt`` / ``completions`` (the steps) / ``labels`` (bool per step).
  TRL's ``PRMTrainer`` tokenizes each step, appends ``step_separator`` and puts the label on the separator's
  last token. It casts labels with ``int()``, so soft labels are refused (they would silently become 0).
* ``math-shepherd``: ``input`` = problem, a space, then ``"{step} ки"`` per step joined by newlines;
  ``label`` = the same text with each tag replaced by ``+`` or ``-`` (peiyi9979/Math-Shepherd).
* ``qwen-prm``: ``text`` = the chat-formatted conversation (Qwen2.5-Math-PRM system prompt, the problem as
  user turn, the steps each followed by ``<extra_0>`` as assistant turn); ``labels`` per step (bool, or
  float with ``label_rule="soft"``).
* ``openrlhf``: OpenRLHF's process reward dataset (``--input_key input --label_key value
  --placeholder_token ки --reward_tokens + -``): ``input`` as in math-shepherd, ``value`` = ``["+", "-", ...]``
  or, with soft labels, floats.
* ``processbench``: ``problem``, ``steps``, ``label`` = index of the first wrong step or -1,
  ``final_answer_correct``. All steps are kept (the label says where the error is).

Label rules: ``hard`` = the corpus's hard label (``mc_value > 0``: some continuation reached the answer);
``threshold`` = ``mc_value >= threshold``; ``soft`` = ``mc_value`` itself. Steps labeled by inference without
rollouts (``trust_correct``, binary-search positives) have no ``mc_value``; they keep their hard label (1.0
as a soft label) and are counted in :attr:`ExportResult.imputed`.

Rows are cut before their first unlabeled step (trainers cannot take a null label), and, with
``drop_after_first_error`` (the PRM800K / ProcessBench / Qwen convention), after their first negative step.
``balance="downsample"`` keeps as many all-positive solutions as solutions with an error (seeded by
content key), the other way round when errors are the majority.

Every record is checked before anything is written (:func:`check_row`): the record is parsed back and must
give the same steps and labels; the tag must occur exactly once per step; and with a tokenizer, the tag /
placeholder / separator must encode to the single token the trainer looks for, occurring once per step in
the encoded row. A violation raises :class:`ExportError` naming the row; nothing is written.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import uuid
from array import array
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pipeline.commands.export_common import (
    ALL_FORMATS,
    COUNT_RULES,
    DEFAULT_TAG,
    FILE_FORMATS,
    FORMATS,
    LABEL_RULES,
    META_FILE,
    QWEN_SYSTEM,
    SOFT_OK,
    ExportError,
    ExportOptions,
    ExportResult,
    Row,
)


# ------------------------------------------------------------------------------------------------ labels
def row_labels(labels: Sequence[bool | None], mc_value: Sequence[float | None], opts: ExportOptions
               ) -> tuple[list[Any], list[bool | None], int]:
    """Per-step (exported label, hard decision used for cutting, number of imputed steps)."""
    if opts.label_rule == "hard" and not opts.soft:  # the corpus's own labels, as they are
        if len(labels) != len(mc_value):
            raise ValueError(f"{len(labels)} labels for {len(mc_value)} mc_value entries")
        return list(labels), list(labels), 0
    out: list[Any] = []
    hard: list[bool | None] = []
    imputed = 0
    for lab, v in zip(labels, mc_value, strict=True):
        if opts.label_rule == "hard" or (v is None and lab is not None):
            if opts.label_rule != "hard" and lab is not None:
                imputed += 1
            h = lab
            y = None if lab is None else (float(lab) if opts.soft else bool(lab))
        elif v is None:
            h, y = None, None
        elif opts.label_rule == "threshold":
            h = y = bool(v >= opts.threshold)
        else:  # soft: the hard decision stays the corpus's own
            h = lab if lab is not None else bool(v > 0)
            y = float(v)
        out.append(y)
        hard.append(h)
    return out, hard, imputed


def _cut(row: Row, hard: list[bool | None], drop_after_first_error: bool, cut: dict[str, int]) -> Row:
    # list.index/in compare with ==: labels are bool/float/None and hard decisions bool/None, so "None" finds
    # exactly the None entries and "False" exactly the False hard decisions (0.0 never enters ``hard``)
    n = len(row.steps)
    labels = row.labels
    end = labels.index(None) if None in labels else n
    if end < n:
        cut["unlabeled"] = cut.get("unlabeled", 0) + n - end
    kept = hard[:end] if end < n else hard
    if drop_after_first_error and False in kept:
        fe = kept.index(False)
        if fe + 1 < end:
            cut["after_first_error"] = cut.get("after_first_error", 0) + end - fe - 1
            end = fe + 1
            kept = hard[:end]
    return Row(row.id, row.problem, row.steps[:end] if end < n else row.steps, labels[:end] if end < n else labels,
               row.solution_correct, has_error=False in kept)


# ------------------------------------------------------------------------------------------------ formats
def _tag(opts: ExportOptions) -> str:
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
    fmt, tag = opts.fmt, _tag(opts)
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
    fmt, tag = opts.fmt, _tag(opts)
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


# ------------------------------------------------------------------------------------------------ checks
def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class _Encoded:
    """A tokenizer whose encodings of given texts were computed ahead in one batched call (a fast tokenizer
    encodes a batch in Rust, many times faster than text by text; the ids are the same). Everything else is the
    wrapped tokenizer's; texts not prepared are encoded on demand and remembered while few."""

    def __init__(self, tokenizer, texts: Sequence[str] = ()):
        self._tok = tokenizer
        self._ids: dict[str, list[int]] = {}
        self._small: dict[str, list[int]] = {}
        self._chat: dict[tuple, str] = {}
        self._backend = None  # the Rust tokenizer, once shown to give the wrapper's ids (see _batch)
        self.chat_template = getattr(tokenizer, "chat_template", None)  # read per row: not via __getattr__
        self._tried_backend = False
        self.prepare(texts)

    def _batch(self, texts: list[str]) -> list[list[int]]:
        """Ids of ``texts`` as ``tokenizer(texts, add_special_tokens=False)["input_ids"]`` gives them. A fast
        tokenizer's Rust backend encodes them through ``encode_batch_fast`` (no offsets: about twice as fast,
        and no per-row Python objects of the wrapper) when its truncation and padding are off and its ids for
        the first texts equal the wrapper's; otherwise the wrapper encodes them."""
        if not self._tried_backend:
            self._tried_backend = True
            bk = getattr(self._tok, "_tokenizer", None)
            if (bk is not None and hasattr(bk, "encode_batch_fast") and getattr(bk, "truncation", 1) is None
                    and getattr(bk, "padding", 1) is None):
                sample = texts[:16]
                try:
                    same = [e.ids for e in bk.encode_batch_fast(sample, add_special_tokens=False)] == [
                        list(x) for x in self._tok(sample, add_special_tokens=False)["input_ids"]]
                except Exception:  # a backend that differs in any way is not used
                    same = False
                self._backend = bk if same else None
        if self._backend is not None:
            return [e.ids for e in self._backend.encode_batch_fast(texts, add_special_tokens=False)]
        return self._tok(texts, add_special_tokens=False)["input_ids"]

    def prepare(self, texts: Sequence[str]) -> None:
        self._ids = {}
        texts = list(dict.fromkeys(texts))
        if texts:
            self._ids = dict(zip(texts, self._batch(texts), strict=True))

    # An added token that the tokenizer does not normalize is split out of any text before the model's own
    # tokenization (HF tokenizers match added tokens first), so it always encodes to its id, once per
    # occurrence: counting it in the encoded text is counting it in the text. For such a tag, rows need no
    # encoding; the first text of every batch is still encoded and both counts compared, and any difference
    # turns the shortcut off for good.
    _atomic: dict[str, bool]

    def atomic_tag(self, tag: str) -> bool:
        memo = self.__dict__.setdefault("_atomic", {})
        if tag not in memo:
            ok = False
            try:
                for t in (getattr(self._tok, "added_tokens_decoder", None) or {}).values():
                    if getattr(t, "content", None) == tag:
                        normalizer = getattr(getattr(self._tok, "_tokenizer", None), "normalizer", None)
                        ok = ((not getattr(t, "normalized", True) or normalizer is None)
                              and not getattr(t, "single_word", False))  # single_word: only between spaces
                        break
            except Exception:  # noqa: BLE001 - an unusual tokenizer: encode every row
                ok = False
            memo[tag] = ok
        return memo[tag]

    def tag_count(self, text: str, tag: str, tid: int) -> int:
        """How often ``tag`` (token id ``tid``) occurs in the encoded ``text``."""
        if self.atomic_tag(tag) and text not in self._ids:
            return text.count(tag)
        n = list(self(text)["input_ids"]).count(tid)
        if self.atomic_tag(tag) and n != text.count(tag):
            self._atomic[tag] = False  # the tokenizer does not keep the tag whole: encode every row from now on
        return n

    def prepare_for_count(self, texts: Sequence[str], tag: str) -> None:
        """Encode what :meth:`tag_count` will need: every text, or only the first one for an atomic tag."""
        self.prepare(texts[:1] if self.atomic_tag(tag) else texts)

    def __call__(self, text, add_special_tokens=False, **kw):
        if isinstance(text, str) and add_special_tokens is False and not kw:
            ids = self._ids.get(text)
            if ids is None:
                ids = self._small.get(text)
            if ids is None:
                ids = list(self._tok(text, add_special_tokens=False)["input_ids"])
                if len(text) <= 64 and len(self._small) < 1024:  # tags, reward tokens
                    self._small[text] = ids
            return {"input_ids": ids}
        return self._tok(text, add_special_tokens=add_special_tokens, **kw)

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=False, **kw):
        if tokenize or kw:
            return self._tok.apply_chat_template(msgs, tokenize=tokenize, add_generation_prompt=add_generation_prompt,
                                                 **kw)
        key = (tuple((m["role"], m["content"]) for m in msgs), add_generation_prompt)
        text = self._chat.get(key)
        if text is None:
            text = self._tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=add_generation_prompt)
            if len(self._chat) > 4096:
                self._chat.clear()
            self._chat[key] = text
        return text

    def __getattr__(self, name):
        return getattr(self._tok, name)


def single_token_id(tokenizer, token: str, what: str, row_id: str | None = None) -> int:
    """The id ``token`` encodes to on its own; ExportError when it is not exactly one token."""
    ids = _encode(tokenizer, token)
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids) if ids else []
        where = f"row {row_id!r}: " if row_id is not None else ""
        raise ExportError(
            f"{where}the {what} {token!r} encodes to {len(ids)} tokens {pieces} with this tokenizer, not to one; "
            f"the trainer would find no (or a misplaced) label position. Add it as a special token "
            f"(tokenizer.add_special_tokens) or choose a {what} that is a single token in this vocabulary.")
    return ids[0]


def check_row(record: dict, row: Row, opts: ExportOptions, tokenizer=None) -> None:
    """Raise :class:`ExportError` naming ``row.id`` unless ``record`` carries exactly ``row``'s steps and labels.

    Text checks always run; token checks (tag = one token, once per step in the encoded row, label tokens
    single tokens, TRL separator non-empty) run when ``tokenizer`` is given.
    """
    n, fmt, tag = len(row.steps), opts.fmt, _tag(opts)
    rid = row.id

    def fail(msg: str) -> None:
        raise ExportError(f"row {rid!r} ({fmt}): {msg}")

    if len(row.labels) != n:
        fail(f"{len(row.labels)} labels for {n} steps")
    if n == 0:
        fail("no steps to export")
    if fmt in ("math-shepherd", "openrlhf", "qwen-prm") and (tag in row.problem or any(tag in s for s in row.steps)):
        for where, text in [("problem", row.problem)] + [(f"step {i}", s) for i, s in enumerate(row.steps, 1)]:
            if tag in text:
                fail(f"the {where} contains the step tag {tag!r}; it must appear exactly once per step. "
                     "Choose another --step-tag/--placeholder.")
    try:
        steps, labels = parse_record(record, row.problem, opts, tokenizer)
    except (ValueError, KeyError) as e:
        fail(f"the written record does not parse back ({e})")
    if steps != list(row.steps):
        fail(f"steps read back from the record differ from the corpus ({len(steps)} vs {n} steps)")
    if fmt == "processbench":
        fe = next((i for i, y in enumerate(row.labels) if y is False), -1)
        if record["label"] != fe or not (-1 <= fe < n):
            fail(f"first-error index {record['label']} does not match the labels")
    elif labels != list(row.labels):
        fail("labels read back from the record differ from the corpus labels")
    if opts.soft and any(not isinstance(y, float) for y in labels):
        fail("soft labels must be floats")
    if tokenizer is None or fmt == "processbench":
        return
    if fmt == "trl":
        sep = _encode(tokenizer, tag)
        if not sep:
            fail(f"the step separator {tag!r} encodes to no tokens; PRMTrainer would put labels on the steps' "
                 "last tokens or misalign them. Pass a --step-tag that the tokenizer keeps.")
        return
    if fmt == "qwen-prm":
        tid = single_token_id(tokenizer, tag, "step separator", rid)
        text = record["text"]
    else:
        tid = single_token_id(tokenizer, tag, "step tag" if fmt == "math-shepherd" else "placeholder", rid)
        text = record["input"]
    counted = getattr(tokenizer, "tag_count", None)
    if fmt != "math-shepherd" and counted is not None:  # an atomic tag is counted in the text (see _Encoded)
        count = counted(text, tag, tid)
    else:
        ids = _encode(tokenizer, text)
        count = ids.count(tid)
    if count != n:
        fail(f"the tag {tag!r} (token id {tid}) occurs {count} times in the encoded row, expected {n} (one per "
             "step): the text around it merges with it into other tokens. Choose another tag or tokenizer.")
    if fmt == "openrlhf" and not opts.soft:
        for t in opts.reward_tokens:
            single_token_id(tokenizer, t, "reward token", rid)
    if fmt == "math-shepherd":
        good_id = single_token_id(tokenizer, opts.reward_tokens[0], "reward token", rid)
        bad_id = single_token_id(tokenizer, opts.reward_tokens[1], "reward token", rid)
        lab = _encode(tokenizer, record["label"])
        # the encoded input with its tag tokens (n of them, checked above) replaced by the labels' tokens
        want = list(ids)
        for i, y in zip([i for i, t in enumerate(ids) if t == tid], row.labels, strict=True):
            want[i] = good_id if y else bad_id
        aligned = len(lab) == len(ids) and list(lab) == want
        if not aligned:
            fail("the encoded `label` text is not the encoded `input` with the tag tokens replaced by the "
                 f"{opts.reward_tokens} tokens (the reward tokens merge with neighbouring text)")


# ------------------------------------------------------------------------------------------------ writing
def _schema(fmt: str, soft: bool):
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


def load_tokenizer(tokenizer):
    """A tokenizer object from a path / hub name, or the object itself."""
    if tokenizer is None or not isinstance(tokenizer, str):
        return tokenizer
    from rollouts.base import require

    transformers = require("transformers", "pip install transformers")
    try:
        return transformers.AutoTokenizer.from_pretrained(tokenizer)
    except OSError as e:
        raise ExportError(f"--tokenizer {tokenizer}: cannot load a tokenizer there ({e})") from None


def _balance(rows: list[Row], seed: int, skipped: dict[str, int]) -> list[Row]:
    def rank(r: Row) -> str:
        return hashlib.sha256(f"{seed}:{r.id}:{r.problem}:{len(r.steps)}".encode()).hexdigest()

    neg = [r for r in rows if r.has_error]
    pos = [r for r in rows if not r.has_error]
    if not pos or not neg:
        return rows
    small, big = (pos, neg) if len(pos) <= len(neg) else (neg, pos)
    keep = {id(r) for r in sorted(big, key=rank)[:len(small)]} | {id(r) for r in small}
    skipped["balance"] = len(rows) - len(keep)
    return [r for r in rows if id(r) in keep]


def _trl_columns(b, drop_after_first_error: bool, skipped: dict[str, int], cut: dict[str, int]):
    """Batch ``b``'s exportable rows as a trl table (id, prompt, completions, labels), computed on whole columns:
    the rows, cuts and skips that the row-by-row path (row_labels with the corpus's own labels, _cut,
    format_row) gives, counted into ``skipped``/``cut`` the same way. Returns (the table, and per row of
    it: steps, labeled steps, positive steps), or None (nothing counted) when some row's steps, labels and
    mc_value differ in length: that batch goes row by row, whose errors name it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    steps, labels, mc = b.column("steps"), b.column("labels"), b.column("mc_value")
    lens = [pc.list_value_length(c) for c in (steps, labels, mc)]
    if any(x.null_count for x in lens):
        return None
    n, n_lab, n_mc = (x.to_numpy(zero_copy_only=False).astype(np.int64) for x in lens)
    if not (np.array_equal(n, n_lab) and np.array_equal(n, n_mc)):
        return None
    flat = pc.list_flatten(labels)
    parent = pc.list_parent_indices(labels).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]) if len(n) else n
    pos = np.arange(len(flat), dtype=np.int64) - starts[parent]  # a step's position in its row
    valid = flat.is_valid().to_numpy(zero_copy_only=False)
    value = flat.fill_null(False).to_numpy(zero_copy_only=False)

    def first(at):  # per row: the position of the first step where ``at``, else -1
        out = np.full(len(n), -1, dtype=np.int64)
        if at.any():
            rows, i = np.unique(parent[at], return_index=True)  # steps are in row order: first occurrence
            out[rows] = pos[at][i]
        return out

    fn = first(~valid)
    end = np.where(fn >= 0, fn, n)  # cut before the first unlabeled step
    fe = first(valid & ~value & (pos < end[parent]))  # the first negative step kept
    if drop_after_first_error:
        new_end = np.where((fe >= 0) & (fe + 1 < end), fe + 1, end)
    else:
        new_end = end
    events = []  # the keys in the order the row-by-row path first meets them (a row's unlabeled cut first)
    for j, (key, amount) in enumerate((("unlabeled", n - end), ("after_first_error", end - new_end))):
        if amount.any():
            events.append((int(np.argmax(amount > 0)), j, key, int(amount.sum())))
    for _, _, key, total in sorted(events):
        cut[key] = cut.get(key, 0) + total
    end = new_end
    ok = end > 0
    if not ok.all():
        skipped["first_step_unlabeled"] = skipped.get("first_step_unlabeled", 0) + int((~ok).sum())
    idx = np.flatnonzero(ok)
    keep_step = (pos < end[parent]) & ok[parent]
    ends = end[idx]
    offsets = pa.array(np.concatenate([[0], np.cumsum(ends)]).astype(np.int32), pa.int32())
    kept = pa.array(keep_step)
    take = pa.array(idx)
    table = pa.Table.from_arrays(
        [b.column("id").take(take), b.column("problem").take(take),
         pa.ListArray.from_arrays(offsets, pc.list_flatten(steps).filter(kept)),
         pa.ListArray.from_arrays(offsets, flat.filter(kept))],
        names=["id", "prompt", "completions", "labels"])
    return table, ends, ends, _per_row_sum(value[keep_step], ends)


def _processbench_columns(b, skipped: dict[str, int]):
    """Batch ``b``'s exportable rows as a processbench table (id, problem, steps, label, final_answer_correct),
    computed on whole columns: label = the first negative step or -1; a row with an unlabeled step before it
    is skipped as "undecided" (row by row: rows_in). Returns as :func:`_trl_columns`; None also when a row has
    no steps (row by row, check_row names it)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    steps, labels, mc = b.column("steps"), b.column("labels"), b.column("mc_value")
    lens = [pc.list_value_length(c) for c in (steps, labels, mc)]
    if any(x.null_count for x in lens):
        return None
    n, n_lab, n_mc = (x.to_numpy(zero_copy_only=False).astype(np.int64) for x in lens)
    if not (np.array_equal(n, n_lab) and np.array_equal(n, n_mc)) or (n == 0).any():
        return None
    flat = pc.list_flatten(labels)
    parent = pc.list_parent_indices(labels).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]) if len(n) else n
    pos = np.arange(len(flat), dtype=np.int64) - starts[parent]
    valid = flat.is_valid().to_numpy(zero_copy_only=False)
    value = flat.fill_null(True).to_numpy(zero_copy_only=False)

    def first(at):
        out = np.full(len(n), -1, dtype=np.int64)
        if at.any():
            rows, i = np.unique(parent[at], return_index=True)
            out[rows] = pos[at][i]
        return out

    fe = first(valid & ~value)
    fn = first(~valid)
    # undecided: an unlabeled step before the first negative one (anywhere, when there is none)
    undecided = (fn >= 0) & ((fe == -1) | (fn < fe))
    if undecided.any():
        skipped["undecided"] = skipped.get("undecided", 0) + int(undecided.sum())
    idx = np.flatnonzero(~undecided)
    take = pa.array(idx)
    fe, m = fe[idx], n[idx]
    table = pa.Table.from_arrays(
        [b.column("id").take(take), b.column("problem").take(take), steps.take(take),
         pa.array(fe.astype(np.int32), pa.int32()), b.column("solution_correct").take(take)],
        names=["id", "problem", "steps", "label", "final_answer_correct"])
    return table, m, np.where(fe >= 0, fe + 1, m), np.where(fe >= 0, fe, m)


def _per_row_sum(values, lengths):
    """Sums of consecutive runs of ``values`` of the given ``lengths``."""
    import numpy as np

    if not len(lengths):
        return np.zeros(0, dtype=np.int64)
    c = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    b = np.concatenate([[0], np.cumsum(lengths)])
    return c[b[1:]] - c[b[:-1]]


def _rank64(seed: int, row: Row) -> int:
    return int(hashlib.sha256(f"{seed}:{row.id}:{row.problem}:{len(row.steps)}".encode()).hexdigest()[:16], 16)


def _balance_keep(rows, seed: int, skipped: dict[str, int]):
    """The rows :func:`_balance` keeps, as a boolean mask over the stream ``rows``, holding one bit and one 64-bit
    rank per row (not the rows). Same choice as :func:`_balance`: the minority class whole, and the majority's
    rows of smallest rank, ties in corpus order (a stable sort; equal 64-bit prefixes of different sha256 ranks
    are astronomically rare and broken the same way, by order)."""
    import numpy as np

    err, rank = array("b"), array("Q")
    for r in rows:
        err.append(r.has_error)
        rank.append(_rank64(seed, r))
    has_error = np.frombuffer(err, dtype=np.int8).astype(bool)
    ranks = np.frombuffer(rank, dtype=np.uint64)
    n = len(has_error)
    n_neg = int(has_error.sum())
    n_pos = n - n_neg
    keep = np.ones(n, dtype=bool)
    if n_pos == 0 or n_neg == 0:
        return keep
    big = has_error if n_pos <= n_neg else ~has_error  # the other class, the smaller one, is kept whole
    small_n = min(n_pos, n_neg)
    idx = np.flatnonzero(big)
    order = np.argsort(ranks[idx], kind="stable")
    keep[idx] = False
    keep[idx[order[:small_n]]] = True
    skipped["balance"] = n - int(keep.sum())
    return keep


def export_corpus(
    out_url: str,
    fmt: str,
    output_url: str,
    *,
    version: int | None = None,
    label_rule: str = "hard",
    threshold: float = 0.5,
    drop_after_first_error: bool = True,
    balance: str | None = None,
    seed: int = 0,
    step_tag: str | None = None,
    placeholder: str | None = None,
    reward_tokens: tuple[str, str] = ("+", "-"),
    system_prompt: str = QWEN_SYSTEM,
    tokenizer: Any = None,
    file_format: str = "parquet",
    shard_rows: int = 10_000,
    overwrite: bool = False,
    verify: bool = False,
    batch_rows: int = 8192,
    min_confidence: float | None = None,
    weight_by_confidence: bool = False,
    consensus: str | None = None,
) -> ExportResult:
    """Export corpus ``out_url`` (current version by default) as ``fmt`` into folder ``output_url``.

    ``step_tag`` overrides the per-format marker (math-shepherd tag, qwen-prm separator, trl
    ``step_separator``); ``placeholder`` is the same for openrlhf. ``tokenizer`` (a path or a tokenizer)
    enables the token checks. Writes ``part-NNNNN.parquet|jsonl`` shards and a hidden ``.mcprm-export.json``.
    """
    import pyarrow as pa

    from pipeline.storage.corpus import iter_corpus
    from pipeline.storage.store import CorpusStore

    if fmt == "genprm":  # issue 28: generative verifiers (critique prompt -> first-error index)
        from pipeline.commands.export_genprm import export_genprm

        return export_genprm(out_url, output_url, version=version, label_rule=label_rule,
                             min_confidence=min_confidence, file_format=file_format, shard_rows=shard_rows,
                             overwrite=overwrite, verify=verify, batch_rows=batch_rows)
    if fmt not in FORMATS:
        raise ExportError(f"--format must be one of {', '.join(ALL_FORMATS)}, got {fmt!r}")
    if label_rule not in LABEL_RULES:
        raise ExportError(f"--label-rule must be one of {', '.join(LABEL_RULES)}, got {label_rule!r}")
    if file_format not in FILE_FORMATS:
        raise ExportError(f"--file-format must be one of {', '.join(FILE_FORMATS)}, got {file_format!r}")
    if balance not in (None, "downsample"):
        raise ExportError(f"--balance must be 'downsample' or unset, got {balance!r}")
    if label_rule == "threshold" and not 0 < threshold <= 1:
        raise ExportError(f"--threshold must be in (0, 1], got {threshold}")
    if shard_rows < 1:
        raise ExportError(f"--shard-rows must be at least 1, got {shard_rows}")
    if label_rule == "soft" and fmt not in SOFT_OK:
        why = {"trl": "TRL's PRMTrainer casts labels with int(), so 0.75 would silently become 0",
               "math-shepherd": "its labels are '+'/'-' characters in the text",
               "processbench": "its label is a first-error index"}[fmt]
        raise ExportError(f"--label-rule soft cannot be exported as {fmt}: {why}. Use --label-rule hard or "
                          f"threshold, or a format that takes soft labels ({', '.join(SOFT_OK)}).")
    tag = placeholder if (fmt == "openrlhf" and placeholder) else step_tag
    if tag is not None and tag == "" and fmt != "processbench":
        raise ExportError("--step-tag/--placeholder must not be empty")
    if reward_tokens[0] == reward_tokens[1]:
        raise ExportError(f"--reward-tokens must differ, got {reward_tokens}")
    opts = ExportOptions(fmt, "hard" if label_rule in COUNT_RULES else label_rule, threshold, tag or "",
                         tuple(reward_tokens), system_prompt)  # COUNT_RULES: relabeled in stream(), then "hard"
    from pipeline.commands.outputs import check_output_folder

    check_output_folder(output_url)  # issue 25: before anything is written (a staging folder beside it)
    tok = load_tokenizer(tokenizer)

    cols = ["id", "problem", "steps", "labels", "mc_value", "solution_correct"]
    # issue 16: rules computed from the stored counts, and the per-row first-error confidence
    by_counts = label_rule in COUNT_RULES or min_confidence is not None or weight_by_confidence
    if min_confidence is not None and not 0 <= min_confidence <= 1:
        raise ExportError(f"--min-confidence must be in [0, 1], got {min_confidence}")
    count_cols = ["mc_correct", "mc_total", "mc_ungradable"] if by_counts else []
    if by_counts:  # issue 24: own draws and the first-error posterior (schema 4); older corpora: none
        from pipeline.labeling.rules import schema_version

        if schema_version(out_url, version) >= 4:
            count_cols += ["mc_reused", "mc_reused_correct", "first_error_posterior", "first_error_confidence"]
    agree, judge_cols = None, []
    if consensus is not None:  # issue 16: rows where MC and an LLM judge agree (pipeline.commands.judge)
        from pipeline.commands.judge_store import ConsensusFilter

        agree = ConsensusFilter(out_url, consensus)
        judge_cols = [c for c in agree.columns if c not in cols + count_cols]

    def columns(b, lengths_only: bool):
        for c in cols:
            if c == "steps" and lengths_only:  # a row's steps as range(n): its length, without the texts
                import pyarrow.compute as pc

                yield [None if n is None else range(n) for n in pc.list_value_length(b.column(c)).to_pylist()]
            else:
                yield b.column(c).to_pylist()

    def stream(counts: dict | None, lengths_only: bool = False):
        """Exportable rows in corpus order, batch by batch; ``counts`` (when given) collects what was
        skipped, cut and imputed, and the corpus rows read. ``lengths_only``: each row's ``steps`` is
        ``range(number of steps)`` (what --balance's first pass needs: the class and the rank of a row)."""
        for b in corpus_batches(counts):
            yield from rows_in(b, counts, lengths_only)

    def corpus_batches(counts: dict | None):
        batches = iter_corpus(out_url, version, cols + count_cols + judge_cols, batch_rows=batch_rows, verify=verify)
        for b in (batches if agree is None else agree.batches(batches, counts)):
            if counts is not None:
                counts["corpus_rows"] += b.num_rows
            yield b

    def rows_in(b, counts: dict | None, lengths_only: bool = False):
        """The exportable rows of batch ``b`` (see stream)."""
        skipped = counts["skipped"] if counts is not None else {}
        cut = counts["cut"] if counts is not None else {}
        extra = [b.column(c).to_pylist() for c in count_cols] or [[None] * b.num_rows]
        for rid, problem, steps, lab, mc, sc, *cnt in zip(*columns(b, lengths_only), *extra, strict=True):
            weight = None
            if by_counts:  # issue 16
                lab, mc, weight = _by_counts(lab, mc, sc, cnt, label_rule)
                if min_confidence is not None and (weight is None or weight < min_confidence):
                    skipped["low_confidence"] = skipped.get("low_confidence", 0) + 1
                    continue
            labels, hard, imp = row_labels(lab, mc, opts)
            if counts is not None:
                counts["imputed"] += imp
            row = Row(rid, problem, steps, labels, sc)
            if fmt == "processbench":
                fe = next((i for i, h in enumerate(hard) if h is False), -1)
                if any(h is None for h in (hard if fe == -1 else hard[:fe])):
                    skipped["undecided"] = skipped.get("undecided", 0) + 1
                    continue
                row.labels = ([True] * len(hard) if fe == -1
                              else [True] * fe + [False] + [None] * (len(hard) - fe - 1))
                row.has_error = fe != -1
                row.weight = weight
                yield row
                continue
            row = _cut(row, hard, drop_after_first_error, cut)
            row.weight = weight
            if not row.steps:
                skipped["first_step_unlabeled"] = skipped.get("first_step_unlabeled", 0) + 1
                continue
            yield row

    counts = {"skipped": {}, "cut": {}, "imputed": 0, "corpus_rows": 0}
    keep = None
    if balance == "downsample":
        # pass 1: each exportable row's class and rank (8 bytes a row, not the row); pass 2 writes the kept ones
        keep = _balance_keep(stream(None, lengths_only=True), seed, balance_skipped := {})

    store = CorpusStore(output_url)
    existing = []
    if not store.is_empty():
        existing = [posixpath.basename(p) for p in store.fs.ls(store.root, detail=False)]
        if not overwrite:
            raise ExportError(f"{output_url} is not empty ({', '.join(sorted(existing)[:3])}...); pass --overwrite "
                              "to replace an earlier export, or choose another --output")
    # Records are checked (check_row) and written shard by shard into a staging folder beside the output; only
    # when every record passed do they replace the output's shards, so a failed check still writes nothing.
    staging = CorpusStore(output_url.rstrip("/") + f".mcprm-staging-{uuid.uuid4().hex[:12]}")
    schema = _schema(fmt, opts.soft)
    if weight_by_confidence:  # issue 16: one more column, the row's first-error confidence
        schema = schema.append(pa.field("weight", pa.float64()))
    names: list[str] = []
    chunk: list[dict] = []
    n_rows = n_steps = pos = n_labeled = unlabeled = 0

    def flush() -> None:
        name = f"part-{len(names):05d}.{file_format}"
        if file_format == "parquet":
            import pyarrow.parquet as pq

            buf = io.BytesIO()
            table = pa.Table.from_pydict({f.name: [r[f.name] for r in chunk] for f in schema}, schema=schema)
            pq.write_table(table, buf, compression="zstd")
            staging.write_bytes(name, buf.getvalue())
        else:
            staging.write_bytes(name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk).encode())
        names.append(name)
        chunk.clear()

    encoded = _Encoded(tok) if tok is not None and fmt not in ("processbench", "trl") else None
    text_key = "text" if fmt == "qwen-prm" else "input"

    def add(group: list[Row]) -> None:
        nonlocal n_rows, n_steps, pos, n_labeled, unlabeled
        checker = encoded if encoded is not None else tok
        recs = [format_row(row, opts, checker) for row in group]
        if encoded is not None and fmt != "math-shepherd":  # ids are needed only to count the tag
            encoded.prepare_for_count([r[text_key] for r in recs], _tag(opts))
        elif encoded is not None:
            encoded.prepare([r[text_key] for r in recs] + [r["label"] for r in recs])
        for rec, row in zip(recs, group, strict=True):
            check_row(rec, row, opts, checker)
            if weight_by_confidence:
                rec["weight"] = row.weight
            chunk.append(rec)
            n_rows += 1
            n_steps += len(row.steps)
            labels = row.labels
            if opts.soft:
                for y in labels:
                    if y is None:
                        unlabeled += 1
                    else:
                        n_labeled += 1
                        pos += y > 0
            else:  # bool or None (row_labels, processbench), so count(True) counts exactly the ``is True``
                none = labels.count(None)
                unlabeled += none
                n_labeled += len(labels) - none
                pos += labels.count(True)
            if len(chunk) >= shard_rows:
                flush()

    # trl and processbench with the corpus's own labels: whole columns at a time (_trl_columns,
    # _processbench_columns), no Python object per row
    fast = fmt in ("trl", "processbench") and opts.label_rule == "hard" and not opts.soft and not by_counts
    pending: list = []  # fast_trl: tables not yet written, fewer than shard_rows rows in all

    def put(table) -> None:
        nonlocal pending
        pending.append(table)
        while sum(t.num_rows for t in pending) >= shard_rows:
            t = pa.concat_tables(pending)
            write_shard(t.slice(0, shard_rows))
            pending = [t.slice(shard_rows)] if t.num_rows > shard_rows else []

    def write_shard(table) -> None:
        name = f"part-{len(names):05d}.{file_format}"
        if file_format == "parquet":
            import pyarrow.parquet as pq

            buf = io.BytesIO()
            pq.write_table(table.combine_chunks(), buf, compression="zstd")
            staging.write_bytes(name, buf.getvalue())
        else:
            staging.write_bytes(name, "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                              for r in table.to_pylist()).encode())
        names.append(name)

    def columnar() -> None:
        nonlocal n_rows, n_steps, pos, n_labeled, unlabeled
        seen = 0  # exportable rows so far (the index into --balance's mask)
        for b in corpus_batches(counts):
            got = (_trl_columns(b, drop_after_first_error, counts["skipped"], counts["cut"]) if fmt == "trl"
                   else _processbench_columns(b, counts["skipped"]))
            if got is None:  # steps, labels and mc_value of some row differ in length: row by row, its errors
                rows = list(rows_in(b, counts))
                if keep is not None:
                    mask = keep[seen:seen + len(rows)]
                    seen += len(rows)
                    rows = [r for r, k in zip(rows, mask, strict=True) if k]
                recs = []
                for row in rows:
                    rec = format_row(row, opts, tok)
                    check_row(rec, row, opts, tok)
                    recs.append(rec)
                    n_rows += 1
                    n_steps += len(row.steps)
                    none = row.labels.count(None)
                    unlabeled += none
                    n_labeled += len(row.labels) - none
                    pos += row.labels.count(True)
                if recs:
                    put(pa.Table.from_pydict({f.name: [r[f.name] for r in recs] for f in schema}, schema=schema))
                continue
            table, steps, labeled, positives = got
            if keep is not None:
                mask = keep[seen:seen + table.num_rows]
                seen += table.num_rows
                if not mask.all():
                    table = table.filter(pa.array(mask))
                    steps, labeled, positives = steps[mask], labeled[mask], positives[mask]
            if not table.num_rows:
                continue
            # the row-by-row check on the batch's first row: its record parses back, and with a tokenizer the
            # trl step separator (the same for every row) encodes to some token; the other rows' records are
            # their own columns, cut as that row's were
            first = table.slice(0, 1).to_pylist()[0]
            if fmt == "trl":
                row = Row(first["id"], first["prompt"], first["completions"], first["labels"])
            else:
                fe, m = first["label"], len(first["steps"])
                row = Row(first["id"], first["problem"], first["steps"],
                          [True] * m if fe == -1 else [True] * fe + [False] + [None] * (m - fe - 1),
                          first["final_answer_correct"])
            check_row(format_row(row, opts, tok), row, opts, tok)
            n_rows += table.num_rows
            n_steps += int(steps.sum())
            n_labeled += int(labeled.sum())
            unlabeled += int(steps.sum() - labeled.sum())
            pos += int(positives.sum())
            put(table.cast(schema))
        if pending or not names:
            write_shard(pa.concat_tables(pending) if pending else schema.empty_table())

    # rows checked together; token checks batch-encode a group, whose encodings (offsets, masks) weigh more
    group_rows = min(batch_rows, 1024) if encoded is not None else batch_rows
    try:
        if fast:
            columnar()
        else:
            group: list[Row] = []
            for i, row in enumerate(stream(counts)):
                if keep is not None and not keep[i]:
                    continue
                group.append(row)
                if len(group) >= group_rows:
                    add(group)
                    group = []
            add(group)
            if chunk or not names:
                flush()
        if existing:  # --overwrite: the earlier export's shards go only now
            for name in existing:
                if name.startswith("part-") or name == META_FILE:
                    store.delete(name)
        if store.local:
            store.fs.makedirs(store.root, exist_ok=True)
        for name in names:
            staging.fs.mv(staging.path(name), store.path(name))
    finally:
        staging.delete("", recursive=True)
    files = [store.uri(name) for name in names]
    skipped, cut, imputed = counts["skipped"], counts["cut"], counts["imputed"]
    if keep is not None:
        skipped.update(balance_skipped)  # after the rows' own reasons, as before

    notes = []
    if tok is None and fmt != "processbench":
        notes.append("no --tokenizer: only text checks ran (tag once per step, labels == steps, records parse "
                     "back); pass the trainer's tokenizer to check the tag encodes to a single token")
    if agree is not None:
        notes.append(f"consensus with judge {agree.judge_id}: {agree.kept:,} rows where judge and MC agree on the "
                     "first error kept; the rest are counted above as 'consensus: ...'")
    if imputed:
        notes.append(f"{imputed} steps had no MC estimate (labeled without rollouts) and kept their hard label")
    res = ExportResult(output=output_url, format=fmt, file_format=file_format, files=files, rows=n_rows,
                       steps=n_steps, positives=pos, negatives=n_labeled - pos,
                       soft=opts.soft, tokenizer_checked=tok is not None and fmt != "processbench",
                       imputed=imputed, skipped=skipped, cut=cut, notes=notes,
                       unlabeled=unlabeled, corpus_rows=counts["corpus_rows"])
    meta = {"source": out_url, "version": version, "format": fmt, "label_rule": label_rule,
            "threshold": threshold if label_rule == "threshold" else None,
            "drop_after_first_error": drop_after_first_error, "balance": balance, "seed": seed,
            "step_tag": _tag(opts), "reward_tokens": list(reward_tokens),
            "tokenizer": tokenizer if isinstance(tokenizer, str) else getattr(tok, "name_or_path", None),
            "rows": res.rows, "steps": res.steps, "positives": res.positives, "negatives": res.negatives,
            "unlabeled": res.unlabeled, "corpus_rows": res.corpus_rows,
            "skipped": skipped, "cut": cut, "imputed": imputed, "files": [posixpath.basename(f) for f in files],
            "consensus": None if agree is None else agree.judge_id}
    store.write_json(META_FILE, meta)
    return res


def _by_counts(labels, mc_value, solution_correct, counts, rule: str):
    """Issue 16: (labels, mc_value, first-error confidence) of one row under ``rule`` from its stored counts.
    Rules of :data:`COUNT_RULES` give their hard labels (exported as ``hard``); the others keep the corpus's.
    The confidence is the stored posterior probability of the (relabeled) first error (schema 4,
    pipeline.stats.changepoint), or the changepoint rule's own; None where the row has no posterior (no
    rollouts, or a corpus written before schema 4): ``--min-confidence`` then drops the row."""
    from pipeline.labeling.rules import apply_rule, confidence_of

    names = ("mc_correct", "mc_total", "mc_ungradable", "mc_reused", "mc_reused_correct", "first_error_posterior",
             "first_error_confidence")
    row = {"labels": labels, "mc_value": mc_value, "solution_correct": solution_correct,
           **dict(zip(names, counts))}
    if rule in COUNT_RULES:
        res = apply_rule(row, rule)
        if rule == "changepoint":
            return res.labels, mc_value, res.extra["confidence"]
        return res.labels, mc_value, confidence_of(row, res.first_error)
    fe = next((i for i, x in enumerate(labels) if x is False), -1)
    return labels, mc_value, confidence_of(row, fe)
