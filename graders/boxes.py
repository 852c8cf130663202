"""Boxed answers: every ``\\boxed{...}`` / ``\\fbox{...}`` of a text (brace matched, with a cap on how far a
box is scanned and how many are looked at), several boxes written side by side as one list answer, a box a
truncated response left open, and GSM8K's ``####`` answer. Used by :func:`graders.extract.extract_answer` and
by input validation (a gold answer written as a solution)."""

from __future__ import annotations

import re

_MAX_SCAN = 100_000  # characters scanned for a box's closing brace
_MAX_BOXES = 24  # boxes looked at, from the end
BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])\s*")
# Separators between boxes written side by side: "\boxed{1}, \boxed{4} and \boxed{9}".
_BOX_SEP_RE = re.compile(
    r"^(?:\s|\$|\\\)|\\\(|\\\]|\\\[|,|;|\band\b|\bor\b|\\quad|\\qquad|\\text\{[^{}]{0,30}\}"
    r"|(?:[a-zA-Z]+\s+){1,3}(?:and|or)\b)*$"
)


def match_brace(text: str, open_pos: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_pos`` (escaped ``\\{``/``\\}`` skipped), or None."""
    depth = 0
    i = open_pos
    n = min(len(text), open_pos + _MAX_SCAN)
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


def _box_at(text: str, m: re.Match) -> tuple[int, int, str] | None:
    start = m.end()
    if start < len(text) and text[start] == "{":
        end = match_brace(text, start)
        if end is not None:
            return m.start(), end + 1, text[start + 1 : end].strip()
    elif start < len(text):  # \boxed 5
        w = re.match(r"[^\s$\\{}]+", text[start : start + 200])
        if w:
            return m.start(), start + w.end(), w.group(0).rstrip(".,;")
    return None


def find_boxes(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of the last complete boxes, in text order (at most ``_MAX_BOXES``; a box
    left unclosed by a truncated response is skipped)."""
    matches = list(BOX_RE.finditer(text))
    out: list[tuple[int, int, str]] = []
    for m in reversed(matches[-_MAX_BOXES:]):
        box = _box_at(text, m)
        if box is not None:
            if out and box[0] < out[-1][0] and box[1] >= out[-1][1]:
                out[-1] = box  # \boxed{\boxed{9}}: the outer box, once
                continue
            out.append(box)
    return out[::-1]


def last_box(text: str) -> str | None:
    """The content of the last complete ``\\boxed{}``/``\\fbox{}`` in ``text`` (None when there is none)."""
    boxes = find_boxes(text) if "box" in text else []
    return boxes[-1][2] if boxes else None


def hash_answer(text: str) -> str | None:
    """GSM8K's marked answer: the text after the last ``####``, stripped (None when there is no ``####``).
    Used for gold answers and solution lines written in GSM8K's format (``pipeline.input``)."""
    k = text.rfind("####")
    return None if k < 0 else text[k + 4 :].strip()


def unclosed_last_box(text: str, boxes: list[tuple[int, int, str]]) -> str | None:
    """The content of a ``\\boxed{`` left open at the end of ``text`` after every closed box ("" when it is
    empty), or None when the last box is closed."""
    last = None
    for m in BOX_RE.finditer(text, boxes[-1][1] if boxes else 0):
        last = m
    if last is None or last.end() >= len(text) or text[last.end()] != "{" or len(text) - last.end() > 2000:
        return None
    if match_brace(text, last.end()) is not None:
        return None
    content = text[last.end() + 1 :].strip().rstrip(".").rstrip("$").strip().rstrip("\\]").strip()
    depth = content.count("{") - content.count("}")
    return content if depth == 0 and not content.endswith(("^", "_", "\\")) else ""  # cut off inside: none


def box_group(text: str, boxes: list[tuple[int, int, str]], last: int) -> tuple[int, str]:
    """The box ``last`` joined with the boxes written just before it (``\\boxed{1}, \\boxed{4}``)."""
    first = last
    while first > 0 and _BOX_SEP_RE.match(text[boxes[first - 1][1] : boxes[first][0]][:80]):
        first -= 1
    items = [b[2] for b in boxes[first : last + 1] if b[2]]
    return boxes[first][0], ", ".join(items)
