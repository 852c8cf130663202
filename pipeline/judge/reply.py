"""The judge's prompt and the reading of its replies (:mod:`pipeline.judge` says what a judge run does).

:data:`CRITIQUE_TEMPLATE` is the ProcessBench critique prompt; :func:`parse_reply` reads one reply into a
first-error index and a status; :func:`majority` combines several samples' indices."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

# The ProcessBench critique prompt (Zheng et al. 2024, "ProcessBench", code/templates/critique_template.txt).
# {problem} and {tagged_response} are replaced literally (no str.format: problems contain braces).
CRITIQUE_TEMPLATE = (
    "The following is a math problem and a solution (split into paragraphs, enclosed with tags and indexed from 0):"
    "\n\n[Math Problem]\n\n{problem}\n\n[Solution]\n\n{tagged_response}\n\n"
    "Your task is to review and critique the solution paragraph by paragraph. Once you identify an error in a "
    "paragraph, return the index of the paragraph where the earliest error occurs. Otherwise, return the index "
    "of -1 (which typically denotes \"not found\").\n\n"
    "Please put your final answer (i.e., the index) in \\boxed{}."
)

# statuses of a judgment (the ``status`` column); every one but "ok" has a null index
OK, UNPARSEABLE, OUT_OF_RANGE, NO_MAJORITY = "ok", "unparseable", "out_of_range", "no_majority"
TOO_LONG = "too_long"  # the prompt does not fit the judge's context: not sent (see judge_corpus)


# ------------------------------------------------------------------------------------------------ prompt
_PLACEHOLDER = re.compile(r"\{problem\}|\{tagged_response\}")


def tagged_paragraphs(steps: Sequence[str]) -> str:
    """The steps as ProcessBench's tagged paragraphs, indexed from 0, separated by blank lines."""
    return "\n\n".join(f"<paragraph_{i}>\n{s}\n</paragraph_{i}>" for i, s in enumerate(steps))


def critique_prompt(problem: str, steps: Sequence[str], template: str = CRITIQUE_TEMPLATE) -> str:
    """The judge's request for one solution (the user message; the prompt format wraps it), and genprm's exported
    prompt. Both placeholders are replaced in one pass, so a problem that contains ``{tagged_response}`` is kept
    as it is."""
    values = {"{problem}": problem, "{tagged_response}": tagged_paragraphs(steps)}
    return _PLACEHOLDER.sub(lambda m: values[m.group()], template)


# ------------------------------------------------------------------------------------------------ parser
_NO_ERROR = (r"-\s*1|none|no\s+errors?(?:\s+found)?|not\s+found|n/?a|null|"
             r"all(?:\s+(?:the\s+)?(?:paragraphs|steps))?\s+(?:are\s+)?correct|there\s+is\s+no\s+error|"
             r"no\s+incorrect\s+(?:paragraphs?|steps?)|no\s+(?:erroneous|wrong)\s+(?:paragraphs?|steps?)")
_INDEX = r"(?:paragraph[\s_#-]*)?(?:index\s*)?(-?\d+)"
_ANSWER_LINE = re.compile(
    r"^(?:(?:so|thus|therefore|hence|in\s+conclusion),?\s+)?(?:the\s+)?(?:"
    r"final\s+answer|answer|final\s+index|index\s+of\s+the\s+(?:earliest|first)\s+(?:error|erroneous\s+paragraph|"
    r"incorrect\s+paragraph|wrong\s+paragraph)|(?:earliest|first)\s+(?:error|erroneous\s+paragraph|"
    r"incorrect\s+paragraph|wrong\s+paragraph)(?:\s+(?:is|occurs|appears))?(?:\s+in)?)"
    r"\s*(?:is\b|:|=)?\s*(?P<rest>.*)$", re.I)


def _boxed(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces kept), in order."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end():i - 1])
    return out


def _clean(s: str) -> str:
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf|texttt)\s*\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\_", "_").replace("$", "").replace("**", "").replace("`", "")
    s = re.sub(r"[<>]", " ", s)
    return " ".join(s.split()).strip(" .,;:!\"'()[]")


def _value(s: str) -> int | None | str:
    """An index from a short answer text: an int, "none" for -1 phrases, or None (not an answer)."""
    s = _clean(s)
    if re.fullmatch(rf"(?:{_NO_ERROR})", s, re.I):
        return -1
    m = re.fullmatch(rf"{_INDEX}", s, re.I)
    if m:
        return int(m.group(1))
    return None


def parse_reply(text: str | None, n_steps: int) -> tuple[int | None, str]:
    """(index, status) of a judge's reply for a solution of ``n_steps`` paragraphs.

    The index is the earliest wrong paragraph (0-based) or -1 (no error). Read, in order, from: the text after
    the last ``</think>`` (a reasoning model's answer); the last ``\\boxed{}`` (its whole content must be an index,
    ``paragraph_3`` or a no-error phrase, else the reply is unparseable, with no look elsewhere); a reply that is
    only an index / ``paragraph_3`` / no-error phrase; the last line that says "answer: ...", "the earliest error is
    in paragraph 3", ... (its value, or the last integer of that line). Anything else is ``unparseable``; an
    index outside ``-1 .. n_steps-1`` is ``out_of_range``. Both give a null index; nothing is guessed."""
    if not text or not text.strip():
        return None, UNPARSEABLE
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    value: int | None = None
    boxed = _boxed(text)
    if boxed:
        value = _value(boxed[-1])
    else:
        value = _value(text)
        lines = [ln.strip().lstrip("#*->•").strip() for ln in text.splitlines() if ln.strip()]
        if value is None and lines:  # a last line that is only the answer ("Therefore, all steps are correct.")
            value = _value(re.sub(r"^(?:so|thus|therefore|hence|in\s+conclusion)\b,?", "", lines[-1], flags=re.I))
        if value is None:
            for line in reversed(lines):
                m = _ANSWER_LINE.search(_clean(re.sub(r"\([^)]*\)", " ", line)))  # "(0-indexed)" out
                if not m:
                    continue
                rest = m.group("rest")
                value = _value(rest)
                if value is None:  # the value must open the rest; a second number makes it ambiguous
                    head = re.match(rf"\s*(?:{_NO_ERROR})\b", rest, re.I)
                    ints = re.findall(r"-?\d+", rest)
                    if head and not ints:
                        value = -1
                    elif len(ints) == 1 and re.match(rf"\s*{_INDEX}\b", rest, re.I):
                        value = int(ints[0])
                break
    if value is None:
        return None, UNPARSEABLE
    if not -1 <= value < n_steps:
        return None, OUT_OF_RANGE
    return value, OK


def majority(votes: Sequence[int | None]) -> tuple[int | None, str]:
    """The most frequent parsed index of several samples (unparseable ones left out); a tie is ``no_majority``."""
    c = Counter(v for v in votes if v is not None)
    if not c:
        return None, UNPARSEABLE
    top = c.most_common()
    if len(top) > 1 and top[0][1] == top[1][1]:
        return None, NO_MAJORITY
    return top[0][0], OK
