"""Cut a solution written as one text into steps.

Four modes (``--splitter``):

- ``blank-line`` (default): steps are separated by one or more blank lines (lines holding only whitespace).
- ``step-prefix``: a step starts at every line that begins with ``Step k:`` / ``Step k.`` / ``Step k)``
  (optionally after ``#`` headings or ``**`` bold, any case); the marker is removed. Text before the first
  marker, if any, is kept as a step of its own. A text without any marker is an error (wrong splitter).
- ``newline``: every non-empty line is a step.
- ``regex``: the user's regular expression is the separator between steps (like :func:`re.split`, but
  capture groups are never inserted into the steps).
- ``gsm8k``: GSM8K's worked answers: every non-empty line is a step, calculator annotations ``<<48/2=24>>``
  are removed, and the ``#### 72`` answer line is not a step of its own: it becomes "The answer is 72." at
  the end of the last step (so the solution's own final answer stays gradable).

Every piece is stripped of surrounding whitespace and empty pieces are dropped.
"""

from __future__ import annotations

import functools
import re

from graders.boxes import hash_answer
from pipeline.errors import RowError

SPLIT_MODES: tuple[str, ...] = ("blank-line", "step-prefix", "newline", "regex", "gsm8k")

_CALC = re.compile(r"<<[^<>\n]*>>")

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n\s*")
# "Step 3:", "Step 3.", "## Step 3:", "**Step 3:**", "step 3)" at the start of a line; not "Step 1.5".
_STEP_MARKER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*step[ \t]+\d+[ \t]*(?:\*\*|__)?[ \t]*"
    r"(?:[:.)](?!\d)|-(?!\d)|$)[ \t]*(?:\*\*|__)?[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)


class SplitError(RowError, ValueError):
    """The text cannot be split with the chosen mode (the message says what to change)."""


@functools.lru_cache(maxsize=32)
def compile_split_regex(regex: str) -> re.Pattern[str]:
    """Compile a user separator regex, with an error that says what is wrong with it.

    Rejected: invalid syntax and patterns that match the empty string (they would cut between every
    character).
    """
    if not isinstance(regex, str) or regex == "":
        raise SplitError("the split regex is empty; pass a separator pattern such as '\\n\\n+' or '\\nStep'")
    try:
        pattern = re.compile(regex, re.MULTILINE)
    except re.error as e:
        raise SplitError(f"invalid split regex {regex!r}: {e}") from None
    if pattern.fullmatch("") is not None or pattern.search("") is not None:
        raise SplitError(
            f"split regex {regex!r} matches the empty string, so it would cut the text between every "
            "character; make it match at least one character (e.g. use '+' instead of '*')"
        )
    return pattern


def _clean(pieces) -> list[str]:
    return [s for s in (p.strip() for p in pieces) if s]


def split_solution(text: str, mode: str = "blank-line", regex: str | None = None) -> list[str]:
    """Split ``text`` into stripped, non-empty steps using ``mode`` (one of :data:`SPLIT_MODES`).

    ``regex`` is required for (and only used by) ``mode="regex"``. Raises :class:`SplitError` (a
    ``ValueError``) for an unknown mode, a bad regex, or a ``step-prefix`` text without any ``Step k:`` line.
    """
    if not isinstance(text, str):
        raise TypeError(f"split_solution needs a str, got {type(text).__name__}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if mode == "blank-line":
        return _clean(_BLANK_LINES.split(text))
    if mode == "newline":
        return _clean(text.split("\n"))
    if mode == "gsm8k":
        steps, answer = [], None
        for line in text.split("\n"):
            if line.lstrip(" \t").startswith("####"):  # the answer line; its answer as the graders read it
                answer = hash_answer(line)
                continue
            steps.append(_CALC.sub("", line))
        steps = _clean(steps)
        if answer and steps:
            steps[-1] = f"{steps[-1]} The answer is {answer}."
        elif answer:
            steps = [f"The answer is {answer}."]
        return steps
    if mode == "step-prefix":
        starts = [m for m in _STEP_MARKER.finditer(text)]
        if not starts:
            if not text.strip():
                return []
            raise SplitError(
                "no 'Step k:' line found; use another splitter (blank-line, newline or regex) for this text"
            )
        pieces = [text[: starts[0].start()]]
        for m, nxt in zip(starts, starts[1:] + [None], strict=True):
            pieces.append(text[m.end() : nxt.start() if nxt is not None else len(text)])
        return _clean(pieces)
    if mode == "regex":
        if regex is None:
            raise SplitError("splitter 'regex' needs a regex (--split-regex)")
        pattern = compile_split_regex(regex)
        pieces, pos = [], 0
        for m in pattern.finditer(text):
            pieces.append(text[pos : m.start()])
            pos = m.end()
        pieces.append(text[pos:])
        return _clean(pieces)
    raise SplitError(f"unknown splitter {mode!r}; choose one of {', '.join(SPLIT_MODES)}")
