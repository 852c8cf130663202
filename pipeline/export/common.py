"""What every exporter shares: the format and rule names, the request, the options, a row as exported, the
result, the output folder, the error.

The per-step run (:mod:`pipeline.export.rows`) and genprm's (:mod:`pipeline.export.formats.genprm`)
both build on it, so neither imports the other's internals.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import RowError

FORMATS = ("trl", "math-shepherd", "qwen-prm", "openrlhf", "processbench")  # per-step rows (rows.export_rows)
ALL_FORMATS = (*FORMATS, "genprm")  # every --format: the trainer formats and genprm (formats.genprm)
# the rules of pipeline.labeling.rules beyond these three export their hard labels (bool)
COUNT_RULES = ("relative", "ratio", "advantage", "er-prm", "changepoint")
LABEL_RULES = ("hard", "threshold", "soft", *COUNT_RULES)
FILE_FORMATS = ("parquet", "jsonl")

QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
META_FILE = ".mcprm-export.json"  # hidden: `datasets.load_dataset(folder)` ignores it


class ExportError(RowError, ValueError):
    """A row or an option cannot be exported faithfully; the message names the row or option and the fix."""


@dataclass(frozen=True)
class ExportRequest:
    """What ``export_corpus`` was asked for, beyond the corpus, the format and the output folder: every option,
    as given (the defaults are ``export_corpus``'s own, declared there once); an exporter's run reads it."""

    version: int | None
    label_rule: str
    threshold: float
    drop_after_first_error: bool
    balance: str | None
    seed: int
    step_tag: str | None
    placeholder: str | None
    reward_tokens: tuple[str, str]
    system_prompt: str
    tokenizer: Any
    file_format: str
    shard_rows: int
    overwrite: bool
    verify: bool
    batch_rows: int
    min_confidence: float | None
    weight_by_confidence: bool
    consensus: str | None


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
    weight: float | None = None  # --weight-by-confidence: the row's first-error confidence


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
    filled: int = 0  # unlabeled steps exported as positive (fill_holes: before a step that reached the answer)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows not exported
    cut: dict[str, int] = field(default_factory=dict)  # reason -> steps removed from exported rows
    notes: list[str] = field(default_factory=list)
    # steps exported without a label (ProcessBench: the steps after the first error), so that
    # steps == positives + negatives + unlabeled; and the corpus rows read (rows + sum(skipped) == corpus_rows)
    unlabeled: int = 0
    corpus_rows: int = 0


class ExportOutput:
    """Where an export writes: the output folder and a staging folder beside it. Records are staged shard by
    shard (:meth:`write_records`, :meth:`write_table`); only when every record passed its checks does
    :meth:`publish` move them into the output, so a failed check writes nothing. An output that is not empty is
    refused unless ``overwrite`` (the earlier export's shards and meta then go at :meth:`publish`, not before)."""

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
        self.names: list[str] = []  # the shards staged, in order

    def write_records(self, records: list[dict], schema, file_format: str) -> None:
        """Stage ``records`` as the next shard (Parquet with ``schema``, or one JSON object a line)."""
        if file_format == "parquet":
            import pyarrow as pa

            self.write_table(pa.Table.from_pydict({f.name: [r[f.name] for r in records] for f in schema},
                                                  schema=schema), file_format)
        else:
            self._stage(file_format, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode())

    def write_table(self, table, file_format: str) -> None:
        """Stage an Arrow ``table`` as the next shard."""
        if file_format == "parquet":
            import pyarrow.parquet as pq

            buf = io.BytesIO()
            pq.write_table(table.combine_chunks(), buf, compression="zstd")
            self._stage(file_format, buf.getvalue())
        else:
            self._stage(file_format, "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                             for r in table.to_pylist()).encode())

    def _stage(self, file_format: str, data: bytes) -> None:
        name = f"part-{len(self.names):05d}.{file_format}"
        self.staging.write_bytes(name, data)
        self.names.append(name)

    def publish(self) -> list[str]:
        """Move the staged shards into the output (after removing an earlier export's); their URLs."""
        store = self.store
        for name in self.existing:
            if name.startswith("part-") or name == META_FILE:
                store.delete(name)
        if store.local:
            store.fs.makedirs(store.root, exist_ok=True)
        for name in self.names:
            self.staging.fs.mv(self.staging.path(name), store.path(name))
        return [store.uri(name) for name in self.names]

    def discard_staging(self) -> None:
        self.staging.delete("", recursive=True)


def fill_holes(labels: list, hard: list[bool | None], positive=True) -> int:
    """Unlabeled steps that the row's own labels settle, made positive in place (``labels`` gets
    ``positive``, ``hard`` True); returns how many. A step is settled positive when it comes before a step
    that reached the answer (that step's prefix, which holds this one, can be followed to the gold answer: the
    argument every strategy labels by, e.g. binary search's "every step before a live prefix is alive"), or
    before the row's first negative step (the corpus's first error is that step, so the steps before it are
    not errors). Without this a trainer row, a labeled prefix, would be cut at the hole and lose its first
    error (the row [True, True, None, True, False] would end after its second step). A hole after the first
    error and after every step that reached the answer stays unlabeled."""
    last = -1
    fe = -1
    for i, h in enumerate(hard):
        if h is True:
            last = i
        elif h is False and fe == -1:
            fe = i
    n = 0
    for i in range(max(last, fe)):
        if hard[i] is None and (i < last or i < fe):
            hard[i] = True
            labels[i] = positive
            n += 1
    return n
