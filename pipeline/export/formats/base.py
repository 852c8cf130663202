"""The exporter interface of ``mcprm export``: one class per format, declaring what the export run and the
checks need to know of it (its default tag, whether it takes soft labels, where its tagged text is, whether
tokens are checked, whether whole columns can be written) and doing what differs (its record, the record read
back, its Arrow schema, its token checks, and where a format needs one, its own run: :meth:`Exporter.export`).
The registry is :mod:`pipeline.export.formats`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from pipeline.export.common import ExportError, ExportOptions, ExportRequest, ExportResult, Row
from pipeline.export.tokens import Encoded

Fail = Callable[[str], None]  # raises ExportError naming the row


def encode_ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def single_token_id(tokenizer, token: str, what: str, row_id: str | None = None) -> int:
    """The id ``token`` encodes to on its own; ExportError when it is not exactly one token."""
    ids = encode_ids(tokenizer, token)
    if len(ids) != 1:
        pieces = tokenizer.convert_ids_to_tokens(ids) if ids else []
        where = f"row {row_id!r}: " if row_id is not None else ""
        raise ExportError(
            f"{where}the {what} {token!r} encodes to {len(ids)} tokens {pieces} with this tokenizer, not to one; "
            f"the trainer would find no (or a misplaced) label position. Add it as a special token "
            f"(tokenizer.add_special_tokens) or choose a {what} that is a single token in this vocabulary.")
    return ids[0]


def first_error(labels: Sequence[Any]) -> int:
    return next((i for i, y in enumerate(labels) if y is False), -1)


class Exporter(ABC):
    """One trainer format. Subclasses set the declarations and implement :meth:`record`, :meth:`parse` and
    :meth:`schema` (and, where :attr:`columnar`, :meth:`columns` and :meth:`row_of`); the defaults fit a format
    whose labels are a per-step list."""

    name: ClassVar[str] = ""
    default_tag: ClassVar[str] = ""  # the step tag / separator when --step-tag is not given
    tag_what: ClassVar[str] = "step tag"  # how messages name the tag
    tag_from_placeholder: ClassVar[bool] = False  # --placeholder sets the tag (openrlhf), else --step-tag
    empty_tag_ok: ClassVar[bool] = False  # a format that writes no tag (processbench)
    no_soft: ClassVar[str | None] = None  # why soft labels cannot be written; None: they can
    tag_in_text: ClassVar[bool] = False  # the tag is written into the text: it must not occur in problem / steps
    text_field: ClassVar[str | None] = None  # the record's tagged text (token checks count the tag there)
    token_checked: ClassVar[bool] = True  # --tokenizer checks apply (not to processbench: no tokens)
    keeps_all_steps: ClassVar[bool] = False  # no row is cut; the label says where the error is (processbench)
    needs_ids: ClassVar[bool] = False  # the token check needs the text's ids, not only the tag's count
    columnar: ClassVar[bool] = False  # whole columns at a time with the corpus's own hard labels (columns())

    def tag(self, opts: ExportOptions) -> str:
        return opts.step_tag or self.default_tag

    @abstractmethod
    def record(self, row: Row, opts: ExportOptions, tokenizer=None) -> dict:
        """The format's record of one corpus row."""

    @abstractmethod
    def parse(self, record: dict, problem: str, opts: ExportOptions, tokenizer=None) -> tuple[list[str], list[Any]]:
        """Steps and labels read back out of ``record`` (the inverse of :meth:`record`); ``ValueError`` where
        the record is not what :meth:`record` would write."""

    def export(self, out_url: str, output_url: str, request: ExportRequest) -> ExportResult:
        """Export corpus ``out_url`` into folder ``output_url`` in this format: the per-step run of
        :mod:`pipeline.export.rows` (labels, cuts, --balance, checks, shards), which a format with a run
        of its own (genprm) overrides."""
        from pipeline.export.rows import export_rows

        return export_rows(self, out_url, output_url, request)

    def check(self, record: dict, row: Row, opts: ExportOptions, tokenizer=None) -> None:
        """Raise :class:`ExportError` naming ``row.id`` unless ``record`` carries exactly ``row``'s steps and
        labels. Text checks always run; token checks (:meth:`check_tokens`: tag = one token, once per step in the
        encoded row, label tokens single tokens, TRL separator non-empty) run when ``tokenizer`` is given."""
        n, fmt, tag = len(row.steps), opts.fmt, self.tag(opts)
        rid = row.id

        def fail(msg: str) -> None:
            raise ExportError(f"row {rid!r} ({fmt}): {msg}")

        if len(row.labels) != n:
            fail(f"{len(row.labels)} labels for {n} steps")
        if n == 0:
            fail("no steps to export")
        if self.tag_in_text and (tag in row.problem or any(tag in s for s in row.steps)):
            for where, text in [("problem", row.problem)] + [(f"step {i}", s) for i, s in enumerate(row.steps, 1)]:
                if tag in text:
                    fail(f"the {where} contains the step tag {tag!r}; it must appear exactly once per step. "
                         "Choose another --step-tag/--placeholder.")
        try:
            steps, labels = self.parse(record, row.problem, opts, tokenizer)
        except (ValueError, KeyError) as e:
            fail(f"the written record does not parse back ({e})")
        if steps != list(row.steps):
            fail(f"steps read back from the record differ from the corpus ({len(steps)} vs {n} steps)")
        self.check_labels(record, row, labels, fail)
        if opts.soft and any(not isinstance(y, float) for y in labels):
            fail("soft labels must be floats")
        if tokenizer is not None and self.token_checked:
            self.check_tokens(record, row, opts, tokenizer, fail)

    def schema(self, soft: bool):
        """The Arrow schema of the records (``soft``: float labels): every format that is exported needs one."""
        raise TypeError(f"the {self.name} exporter declares no Arrow schema (Exporter.schema): it cannot write")

    def check_labels(self, record: dict, row: Row, labels: list[Any], fail: Fail) -> None:
        if labels != list(row.labels):
            fail("labels read back from the record differ from the corpus labels")

    def check_tokens(self, record: dict, row: Row, opts: ExportOptions, tokenizer, fail: Fail) -> None:
        """With a tokenizer: the tag is what the trainer looks for (the default checks nothing)."""
        return None

    def columns(self, batch, drop_after_first_error: bool, skipped: dict, cut: dict, counts: dict):
        """Where :attr:`columnar`: (the records' table, and per row steps, labeled steps, positives) of a corpus
        batch, or None where the batch must go row by row (pipeline.export.columns)."""
        raise TypeError(f"{self.name} is not a columnar format (columnar = False): export it row by row")

    def row_of(self, record: dict) -> Row:
        """The row a whole-column record was written from (checked row by row on a batch's first record)."""
        raise TypeError(f"{self.name} is not a columnar format (columnar = False): it has no whole-column records")


class FirstErrorIndex(Exporter):
    """A format whose label is the index of the first wrong step, or -1 (processbench, genprm): every step is
    kept (a row's labels are ``[True] * k + [False] + [None] * ...``), no soft labels, no tag, no tokens."""

    default_tag = ""
    empty_tag_ok = True
    no_soft = "its label is a first-error index"
    token_checked = False
    keeps_all_steps = True

    def check_labels(self, record: dict, row: Row, labels: list[Any], fail: Fail) -> None:
        fe = first_error(row.labels)
        if record["label"] != fe or not (-1 <= fe < len(row.steps)):
            fail(f"first-error index {record['label']} does not match the labels")


def index_labels(first_error: int, n_steps: int) -> list[bool | None]:
    """A row's labels from its first-error index (``-1``: none): True before it, False at it, None after."""
    if first_error == -1:
        return [True] * n_steps
    return [True] * first_error + [False] + [None] * (n_steps - first_error - 1)


class TaggedText(Exporter):
    """A format whose record is a text with the tag once after each step (math-shepherd, openrlhf, qwen-prm)."""

    tag_in_text = True

    def check_tokens(self, record: dict, row: Row, opts: ExportOptions, tokenizer, fail: Fail) -> None:
        tag, n = self.tag(opts), len(row.steps)
        tid = single_token_id(tokenizer, tag, self.tag_what, row.id)
        text = record[self.text_field]
        ids = None
        if not self.needs_ids and isinstance(tokenizer, Encoded):  # it counts an atomic tag in the text itself
            count = tokenizer.tag_count(text, tag, tid)
        else:
            ids = encode_ids(tokenizer, text)
            count = ids.count(tid)
        if count != n:
            fail(f"the tag {tag!r} (token id {tid}) occurs {count} times in the encoded row, expected {n} (one per "
                 "step): the text around it merges with it into other tokens. Choose another tag or tokenizer.")
        self.check_reward_tokens(record, row, opts, tokenizer, ids, tid, fail)

    def check_reward_tokens(self, record, row, opts, tokenizer, ids, tid, fail: Fail) -> None:
        """The label tokens, for a format that writes them (math-shepherd, openrlhf); ``ids``: the encoded text
        where :attr:`needs_ids`."""


def tagged_text(problem: str, steps: Sequence[str], marks: Sequence[str]) -> str:
    return f"{problem} " + "\n".join(f"{s} {m}" for s, m in zip(steps, marks, strict=True))


def parse_tagged_text(text: str, problem: str, tag: str) -> list[str]:
    """The steps of a math-shepherd / openrlhf ``input`` (problem, a space, ``"{step} {tag}"`` joined by newlines)."""
    if not text.startswith(problem + " "):
        raise ValueError("input does not start with the problem")
    pieces = text[len(problem) + 1:].split(f" {tag}")
    if pieces[-1] != "":
        raise ValueError(f"input does not end with the step tag {tag!r}")
    if any(i and not p.startswith("\n") for i, p in enumerate(pieces[:-1])):
        raise ValueError("steps are not separated by a newline after the step tag")
    return [p[1:] if i else p for i, p in enumerate(pieces[:-1])]
