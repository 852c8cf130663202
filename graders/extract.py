"""Find the final answer in a model response.

Order (first that matches wins; within each, the *last* occurrence in the text):

1. ``\\boxed{...}`` / ``\\fbox{...}`` with brace matching (also ``\\boxed 5``); a box left unclosed by a
   truncated response is skipped;
2. GSM8K ``#### 42`` (rest of the line);
3. "The (final) answer is ...", "Final answer: ...", "Answer: ..." (rest of the sentence);
4. only when asked (``last_number=True``, used when the gold is a plain number): the last number.
"""

from __future__ import annotations

import re

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*")
_HASH_RE = re.compile(r"####\s*([^\n]*)")
_PHRASE_RE = re.compile(
    r"(?:final\s+answer|the\s+answer|\banswer)\s*(?:is|:|=)\s*(?:is\s*)?:?\s*([^\n]+)", re.IGNORECASE
)
_NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+")
# A sentence ends at ". " / "." at the end, not at a decimal point.
_SENTENCE_END_RE = re.compile(r"\.(?!\d)(?:\s|$)")


_MAX_BOX_SCAN = 100_000  # characters scanned for a box's closing brace
_MAX_BOXES_TRIED = 5


def _match_brace(text: str, open_pos: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_pos`` (escaped ``\\{``/``\\}`` ignored), or None."""
    depth = 0
    i = open_pos
    n = min(len(text), open_pos + _MAX_BOX_SCAN)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n if n < len(text) else None  # n: gave up on a huge box (its content is refused later)


def _last_boxed(text: str) -> str | None:
    starts = [m.end() for m in _BOX_RE.finditer(text)]
    for start in reversed(starts[-_MAX_BOXES_TRIED:]):
        if start < len(text) and text[start] == "{":
            end = _match_brace(text, start)
            if end is not None:
                return text[start + 1 : end].strip()
        else:  # \boxed 5
            m = re.match(r"[^\s$]+", text[start:])
            if m:
                return m.group(0).rstrip(".,;")
    return None


def _clean_phrase(s: str) -> str:
    s = s.strip()
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(open_):
            end = s.find(close, len(open_))
            if end != -1:
                return s[len(open_) : end].strip()
    m = _SENTENCE_END_RE.search(s)
    if m:
        s = s[: m.start()]
    return s.strip().rstrip(".,;:!").strip()


def extract_answer(response: str, last_number: bool = False) -> str | None:
    """The final answer written in ``response``, or None when none is found (see module docstring)."""
    if not response:
        return None
    if "box" in response:
        boxed = _last_boxed(response)
        if boxed is not None:
            return boxed or None
    if "####" in response:
        ms = _HASH_RE.findall(response)
        if ms and ms[-1].strip():
            return _clean_phrase(ms[-1]) or None
    if "nswer" in response or "NSWER" in response:
        ms = _PHRASE_RE.findall(response)
        for m in reversed(ms):
            ans = _clean_phrase(m)
            if ans:
                return ans
    if last_number:
        ms = _NUMBER_RE.findall(response)
        if ms:
            return ms[-1].replace(" ", "")
    return None


def prepare_gold(gold: str) -> str:
    """Gold answers are usually bare (``"112"``); a gold that is a whole solution is reduced to its answer."""
    if "box" in gold or "####" in gold:
        ans = extract_answer(gold)
        if ans is not None:
            return ans
    return gold.strip()
