"""One row at a time: a decoded :class:`~pipeline.input.spec.RawRow` becomes a :class:`Solution` or a
:class:`~pipeline.input.spec.Reject` naming the field and the reason."""

from __future__ import annotations

import json
import math
from decimal import Decimal

from graders.boxes import hash_answer, last_box
from pipeline.input.spec import RAW_CHARS, InputSpec, RawRow, Reject, flag_name
from pipeline.input.split import SplitError, split_solution
from pipeline.solution import Solution, content_key


def _bad_text(s: str) -> str | None:
    """Why ``s`` cannot be stored as UTF-8 (lone surrogates from JSON escapes), or None."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"holds an invalid character (lone surrogate {s[e.start]!r} at {e.start}), not UTF-8 text"
    return None


def _number_text(x) -> str | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return str(int(x)) if x.is_integer() and abs(x) < 1e16 else repr(x)
    if isinstance(x, Decimal):
        return str(x) if x.is_finite() else None
    return None


def raw_text(raw: RawRow) -> str:
    if raw.text is not None:
        return raw.text[:RAW_CHARS]
    if raw.data is None:
        return ""
    try:
        return json.dumps(raw.data, ensure_ascii=False, default=str)[:RAW_CHARS]
    except (TypeError, ValueError):
        return repr(raw.data)[:RAW_CHARS]


def _type_name(x) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(x), type(x).__name__
    )


def validate(raw: RawRow, spec: InputSpec) -> Solution | Reject:
    """Turn one :class:`RawRow` into a :class:`Solution`, or a :class:`Reject` saying what is wrong."""

    def reject(field: str | None, reason: str) -> Reject:
        return Reject(raw.file, raw.row, field, reason, raw_text(raw), raw.kind)

    if raw.error is not None:
        return reject(raw.field, raw.error)
    data = raw.data
    if not isinstance(data, dict):
        return reject(None, f"the row is {_type_name(data)}, expected an object with fields")

    def missing(name: str, what: str) -> Reject:
        have = ", ".join(list(data)[:12]) or "none"
        return reject(
            name,
            f"missing {what} (the row has fields: {have}); map the field with "
            f"--{flag_name(spec, name)}-field if it has another name",
        )

    def present(name: str, what: str, null: str):
        """The field's value, or the Reject for a field that is absent or null."""
        if name not in data:
            return missing(name, what)
        value = data[name]
        return reject(name, null) if value is None else value

    # problem
    pf = spec.problem_field
    problem = present(pf, "problem", "problem is null")
    if isinstance(problem, Reject):
        return problem
    if not isinstance(problem, str):
        return reject(pf, f"expected the problem as text, got {_type_name(problem)}")
    if len(problem) > spec.max_problem_chars:  # before any copy of it is made
        return reject(pf, f"problem has {len(problem):,} characters, over the limit of {spec.max_problem_chars:,}")
    problem = problem.strip()
    if not problem:
        return reject(pf, "problem is empty")
    if why := _bad_text(problem):
        return reject(pf, f"problem {why}")

    # gold answer
    af = spec.answer_field
    answer = present(af, "gold answer", "missing gold answer (null)")
    if isinstance(answer, Reject):
        return answer
    if not isinstance(answer, str):
        num = _number_text(answer)
        if num is None:
            return reject(af, f"expected the gold answer as text or a number, got {_type_name(answer)}")
        answer = num
    if len(answer) > spec.max_problem_chars:
        return reject(af, f"gold answer field has {len(answer):,} characters, over the limit of "
                          f"{spec.max_problem_chars:,}")
    if spec.answer_extract == "gsm8k":
        answer = hash_answer(answer)
        if answer is None:
            return reject(af, "no '#### <answer>' marker in the answer (answer_extract='gsm8k')")
    elif spec.answer_extract == "boxed":
        boxed = last_box(answer)
        if boxed is None:
            return reject(af, "no \\boxed{...} in the answer (answer_extract='boxed')")
        answer = boxed
    answer = answer.strip()
    if not answer:
        return reject(af, "gold answer is empty")
    if why := _bad_text(answer):
        return reject(af, f"gold answer {why}")

    # steps
    sf, tf = spec.steps_field, spec.solution_field
    steps_value = data.get(sf)
    if steps_value is not None:
        if isinstance(steps_value, str):
            return reject(
                sf,
                "expected a list of step strings, got one text; if this field holds the whole "
                f"solution, map it with --solution-field {sf} and choose a --splitter",
            )
        if not isinstance(steps_value, list | tuple):
            return reject(sf, f"expected a list of step strings, got {_type_name(steps_value)}")
        if not steps_value:
            return reject(sf, "empty steps list")
        steps = []
        for i, s in enumerate(steps_value):
            if not isinstance(s, str):
                return reject(sf, f"step {i + 1} (steps[{i}]) is {_type_name(s)}, expected text")
            s = s.strip()
            if not s:
                return reject(sf, f"step {i + 1} (steps[{i}]) is empty")
            steps.append(s)
        where_field = sf
    else:
        text = data.get(tf)
        if text is None:
            if sf in data or tf in data:
                return reject(
                    sf, f"both '{sf}' and '{tf}' are null; need the steps (list) or the solution text"
                )
            have = ", ".join(list(data)[:12]) or "none"
            return reject(
                sf,
                f"missing steps: need '{sf}' (list of strings) or '{tf}' (text) (the row has "
                "fields: " + have + "); map them with --steps-field / --solution-field",
            )
        if not isinstance(text, str):
            return reject(tf, f"expected the solution as text, got {_type_name(text)}")
        longest = spec.max_steps * (spec.max_step_chars + 2)  # every step at its limit, with its separator
        if len(text) > longest:  # before it is split (a copy per step)
            return reject(tf, f"the solution has {len(text):,} characters, more than {spec.max_steps} steps "
                              f"(--max-steps) of {spec.max_step_chars} characters (--max-step-chars) can hold")
        try:
            steps = split_solution(text, spec.splitter, spec.split_regex)
        except SplitError as e:
            return reject(tf, str(e))
        if not steps:
            return reject(tf, "the solution is empty (no steps after splitting)")
        where_field = tf
    if len(steps) > spec.max_steps:
        return reject(where_field, f"{len(steps)} steps, over the limit of {spec.max_steps} (--max-steps)")
    for i, s in enumerate(steps, 1):  # steps count from 1 in every message, as a reader counts them
        if len(s) > spec.max_step_chars:
            return reject(
                where_field,
                f"step {i} has {len(s)} characters, over the limit of "
                f"{spec.max_step_chars} (--max-step-chars)",
            )
        if why := _bad_text(s):
            return reject(where_field, f"step {i} {why}")

    # id
    idf = spec.id_field
    sid = data.get(idf)
    if sid is None:
        sid = content_key(problem, answer, steps)
    elif isinstance(sid, str):
        sid = sid.strip()
        if not sid:
            return reject(idf, "id is empty; remove it to derive one from the content")
        if why := _bad_text(sid):
            return reject(idf, f"id {why}")
    elif isinstance(sid, int) and not isinstance(sid, bool):
        sid = str(sid)
    else:
        return reject(idf, f"expected the id as text or an integer, got {_type_name(sid)}")
    return Solution(
        id=sid, problem=problem, answer=answer, steps=tuple(steps), source=f"{raw.file}:{raw.row}"
    )
