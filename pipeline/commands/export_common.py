"""What every exporter shares: the format and rule names, the options, a row as exported, the result, the error.

:mod:`pipeline.commands.export` (the five trainer formats) and :mod:`pipeline.commands.export_genprm` both build
on it, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import RowError

FORMATS = ("trl", "math-shepherd", "qwen-prm", "openrlhf", "processbench")  # per-step rows (commands.export)
ALL_FORMATS = (*FORMATS, "genprm")  # every --format: the trainer formats and genprm (commands.export_genprm)
# issue 16: the rules of pipeline.labeling.rules beyond these three export their hard labels (bool)
COUNT_RULES = ("relative", "ratio", "advantage", "er-prm", "changepoint")
LABEL_RULES = ("hard", "threshold", "soft", *COUNT_RULES)
FILE_FORMATS = ("parquet", "jsonl")

QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
META_FILE = ".mcprm-export.json"  # hidden: `datasets.load_dataset(folder)` ignores it


class ExportError(RowError, ValueError):
    """A row or an option cannot be exported faithfully; the message names the row or option and the fix."""


@dataclass
class ExportOptions:
    fmt: str
    label_rule: str = "hard"
    threshold: float = 0.5
    step_tag: str = ""  # the format's default when empty (its exporter's default_tag)
    reward_tokens: tuple[str, str] = ("+", "-")
    system_prompt: str = QWEN_SYSTEM

    @property
    def soft(self) -> bool:
        return self.label_rule == "soft"


@dataclass
class Row:
    """One solution as exported: the steps kept and their labels (bool, or float for soft labels)."""

    id: str
    problem: str
    steps: list[str]
    labels: list[Any]
    solution_correct: bool | None = None
    has_error: bool = False  # a kept step's hard label is False
    weight: float | None = None  # --weight-by-confidence: the row's first-error confidence (issue 16)


@dataclass
class ExportResult:
    output: str
    format: str
    file_format: str
    files: list[str]
    rows: int
    steps: int
    positives: int
    negatives: int
    soft: bool
    tokenizer_checked: bool
    imputed: int = 0  # steps without an MC estimate that kept their hard label
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows not exported
    cut: dict[str, int] = field(default_factory=dict)  # reason -> steps removed from exported rows
    notes: list[str] = field(default_factory=list)
    # steps exported without a label (ProcessBench: the steps after the first error), so that
    # steps == positives + negatives + unlabeled; and the corpus rows read (rows + sum(skipped) == corpus_rows)
    unlabeled: int = 0
    corpus_rows: int = 0


class ExportOutput:
    """Where an export writes: the output folder and a staging folder beside it. Records are written shard by
    shard into the staging folder; only when every record passed its checks does :meth:`publish` move them into
    the output, so a failed check writes nothing. An output that is not empty is refused unless ``overwrite``
    (the earlier export's shards and meta then go at :meth:`publish`, not before)."""

    def __init__(self, output_url: str, overwrite: bool):
        import posixpath
        import uuid

        from pipeline.storage.store import CorpusStore

        self.store = CorpusStore(output_url)
        self.existing: list[str] = []
        if not self.store.is_empty():
            self.existing = [posixpath.basename(p) for p in self.store.fs.ls(self.store.root, detail=False)]
            if not overwrite:
                raise ExportError(f"{output_url} is not empty ({', '.join(sorted(self.existing)[:3])}...); pass "
                                  "--overwrite to replace an earlier export, or choose another --output")
        self.staging = CorpusStore(output_url.rstrip("/") + f".mcprm-staging-{uuid.uuid4().hex[:12]}")

    def publish(self, names: list[str]) -> None:
        """Move the staged shards ``names`` into the output (after removing an earlier export's)."""
        store = self.store
        for name in self.existing:
            if name.startswith("part-") or name == META_FILE:
                store.delete(name)
        if store.local:
            store.fs.makedirs(store.root, exist_ok=True)
        for name in names:
            self.staging.fs.mv(self.staging.path(name), store.path(name))

    def discard_staging(self) -> None:
        self.staging.delete("", recursive=True)
