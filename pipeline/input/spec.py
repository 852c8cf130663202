"""What to read and how (:class:`InputSpec`), and what a row is as read (:class:`RawRow`)
or as refused (:class:`Reject`). The room's overview is in :mod:`pipeline.input`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pipeline.errors import FatalError
from pipeline.input.split import SPLIT_MODES, SplitError, compile_split_regex
from pipeline.solution import Solution

FORMATS: tuple[str, ...] = ("jsonl", "json", "parquet")
ANSWER_EXTRACTORS: tuple[str, ...] = ("gsm8k", "boxed")
RAW_CHARS = 2000  # raw row text kept in a reject

class InputError(FatalError, ValueError):
    """Input that cannot be labeled; the message names file, row and field and says what to do."""

    def __init__(self, message: str, rejects: Iterable[Reject] = ()):
        super().__init__(message)
        self.rejects: list[Reject] = list(rejects)


MAX_LINE_BYTES = 64 << 20  # a JSON line longer than this is rejected without being held in memory, whatever the limits


@dataclass(frozen=True)
class InputSpec:
    """Where the solutions are and how to read them (see the module docstring)."""

    paths: tuple[str, ...]
    problem_field: str = "problem"
    answer_field: str = "answer"
    steps_field: str = "steps"
    solution_field: str = "solution"
    id_field: str = "id"
    splitter: str = "blank-line"
    split_regex: str | None = None
    max_step_chars: int = 20000
    max_steps: int = 200
    # the longest problem (and gold-answer field) taken, in characters: checked right after the row is decoded,
    # before anything (the prompt check's tokenizer) makes copies of it; a math problem is far shorter, and the
    # model's context far smaller, so a longer one is a broken row, not a problem to label
    max_problem_chars: int = 100_000
    format: str | None = None  # None: by extension; "jsonl" | "json" | "parquet" forces one for all files
    # How to get the gold answer from the answer field: None (as is), "gsm8k" (text after the last "####"),
    # "boxed" (content of the last \boxed{...}).
    answer_extract: str | None = None
    # Reads the gold answers of a batch of valid rows (e.g. a :class:`GoldCheck` around
    # ``graders.check_golds``): one reason per gold why the grader cannot read it, None when it can. A row
    # whose gold cannot be read is rejected (field: the answer field) before any rollout. None: no check.
    gold_check: Callable[[list[str]], list[str | None]] | None = field(default=None, compare=False)
    # Checks that a batch of valid solutions fits the model (e.g. :class:`pipeline.run.prompt_check.PromptCheck`:
    # prompt tokens + max_new_tokens within the context): one reason per solution, None when it fits. A row
    # that does not fit is rejected (field: the steps/solution field) before any rollout. None: no check.
    prompt_check: Callable[[list[Solution]], list[str | None]] | None = field(default=None, compare=False)

    def __post_init__(self):
        paths = (self.paths,) if isinstance(self.paths, str) else tuple(self.paths)
        object.__setattr__(self, "paths", paths)
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise InputError("no input given: pass one or more files, folders or globs")
        if self.splitter not in SPLIT_MODES:
            raise InputError(f"unknown splitter {self.splitter!r}; choose one of {', '.join(SPLIT_MODES)}")
        if self.splitter == "regex":
            if not self.split_regex:
                raise InputError("splitter 'regex' needs a split regex (--split-regex)")
            try:
                compile_split_regex(self.split_regex)
            except SplitError as e:
                raise InputError(str(e)) from None
        if self.format is not None and self.format not in FORMATS:
            raise InputError(f"unknown input format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if self.answer_extract is not None and self.answer_extract not in ANSWER_EXTRACTORS:
            raise InputError(
                f"unknown answer_extract {self.answer_extract!r}; choose one of {', '.join(ANSWER_EXTRACTORS)}"
            )
        for name in ("max_step_chars", "max_steps", "max_problem_chars"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"{name} must be a positive integer, got {getattr(self, name)!r}")

    def max_line_bytes(self) -> int:
        """The longest JSON line a valid row can take with these limits (problem and answer field at their limit,
        every step at its limit, each character as a 6-byte JSON escape, 64 KiB for the other fields), at most
        :data:`MAX_LINE_BYTES`: a longer line is refused as it streams in, never decoded."""
        chars = 2 * self.max_problem_chars + self.max_steps * (self.max_step_chars + 2)
        return min(MAX_LINE_BYTES, 6 * chars + (64 << 10))


def row_where(file: str, row: int | None, kind: str) -> str:
    if row is None:
        return file
    return f"{file} line {row + 1}" if kind == "jsonl" else f"{file} row {row}"


def flag_name(spec: InputSpec, name: str) -> str:
    for attr in ("problem", "answer", "steps", "solution", "id"):
        if getattr(spec, f"{attr}_field") == name:
            return attr
    return "steps"


@dataclass(frozen=True)
class RawRow:
    """One input row as read: decoded ``data``, or ``error`` saying why it could not be decoded.

    ``row`` is the 0-based line (JSON Lines), row (Parquet) or item (JSON array) index; None for a problem
    with the whole file (unreadable, wrong Parquet schema). ``text`` is the line as read, when there is one.
    """

    file: str
    row: int | None
    data: object = None
    error: str | None = None
    field: str | None = None
    text: str | None = None
    kind: str = "jsonl"  # "jsonl" | "json" | "parquet": how rows are named in messages

    @property
    def where(self) -> str:
        return row_where(self.file, self.row, self.kind)


@dataclass(frozen=True)
class Reject:
    """A row (or a whole file, ``row=None``) that cannot be labeled, and why."""

    file: str
    row: int | None
    field: str | None
    reason: str
    raw: str = ""
    kind: str = "jsonl"

    @property
    def where(self) -> str:
        return row_where(self.file, self.row, self.kind)

    @property
    def message(self) -> str:
        return (
            f"{self.where}, field '{self.field}': {self.reason}"
            if self.field
            else f"{self.where}: {self.reason}"
        )

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "row": self.row,
            "where": self.where,
            "field": self.field,
            "reason": self.reason,
            "raw": self.raw,
        }
