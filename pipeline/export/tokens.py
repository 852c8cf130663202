"""The tokenizer side of the export checks: :func:`load_tokenizer` and :class:`Encoded`, a tokenizer that batch-encodes
a group of records ahead (the token checks of :mod:`pipeline.export.formats` count the tag in it)."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.export.common import ExportError


class Encoded:
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
