r"""``export --format genprm``: training rows for a generative verifier (GenPRM / ThinkPRM / ProcessBench-critic
style): a critique prompt and, as the target, the index of the first wrong step or -1.

Each record: ``id``; ``prompt`` = ProcessBench's critique prompt (the problem, then the steps as
``<paragraph_i>`` ... ``</paragraph_i>`` indexed from 0, then the task: return the earliest wrong paragraph's
index, or -1, in ``\boxed{}``); ``completion`` = a short verdict per paragraph up to the first error ("Paragraph i
is correct." / "Paragraph k contains the first error.") ending with ``\boxed{k}`` (``\boxed{-1}`` for none);
``label`` = that index (int). The prompt is the one an LLM judge is sent (:mod:`pipeline.judge.reply`).
``prompt``/``completion`` is the prompt-completion format SFT trainers (TRL's ``SFTTrainer``, OpenRLHF's SFT) read
as is; ``label`` is what an RL verifier's reward or an evaluation compares with the ``\boxed{}`` answer.

Labels: the corpus's stored labels, or any rule of :mod:`pipeline.labeling.rules` from the stored counts
(``--label-rule``); rows whose steps before the first error are not all labeled are skipped (undecided);
``--min-confidence`` drops rows whose first error is less sure than that. Shards are written into a staging folder
and moved in only when every row was built and read back, as the other formats are. The
exporter, :class:`GenPrm`, has a run of its own: a row is kept whole or skipped (no steps, undecided, below
``--min-confidence``), and the result counts solutions (positive: no error).
"""

from __future__ import annotations

import posixpath
import re

from pipeline.export.common import (
    META_FILE,
    ExportError,
    ExportOptions,
    ExportOutput,
    ExportRequest,
    ExportResult,
    Row,
    fill_holes,
)
from pipeline.export.formats.base import FirstErrorIndex, first_error, index_labels
from pipeline.judge.reply import CRITIQUE_TEMPLATE, critique_prompt

_BOXED = re.compile(r"\\boxed\{(-?\d+)\}\s*$")


def critique_target(first_error: int, n_steps: int) -> str:
    upto = n_steps if first_error == -1 else first_error
    lines = [f"Paragraph {i} is correct." for i in range(upto)]
    if first_error != -1:
        lines.append(f"Paragraph {first_error} contains the first error.")
    else:
        lines.append("No paragraph contains an error.")
    return "\n".join(lines) + f"\n\n\\boxed{{{first_error}}}"


def parse_prompt(prompt: str, problem: str) -> list[str]:
    """The steps a critique prompt of ``problem`` holds (the inverse of :func:`critique_prompt`)."""
    head, tail = CRITIQUE_TEMPLATE.split("{tagged_response}")
    head, tail = head.replace("{problem}", problem), tail.replace("{problem}", problem)
    if not prompt.startswith(head) or not prompt.endswith(tail) or len(prompt) < len(head) + len(tail):
        raise ValueError("the prompt is not the critique prompt of this problem")
    body, steps, pos = prompt[len(head):len(prompt) - len(tail)], [], 0
    while pos < len(body):
        i = len(steps)
        start, close = f"<paragraph_{i}>\n", f"\n</paragraph_{i}>"
        end = body.find(close, pos + len(start))
        if not body.startswith(start, pos) or end == -1:
            raise ValueError(f"paragraph {i} is not enclosed in <paragraph_{i}> tags")
        steps.append(body[pos + len(start):end])
        pos = end + len(close)
        if pos < len(body):
            if not body.startswith("\n\n", pos):
                raise ValueError(f"paragraph {i} is not followed by a blank line")
            pos += 2
    return steps


def parse_target(completion: str) -> int:
    """The first-error index a completion ends with (the inverse of :func:`critique_target`)."""
    m = _BOXED.search(completion)
    if not m:
        raise ValueError("no \\boxed{index} at the end of the completion")
    return int(m.group(1))


class GenPrm(FirstErrorIndex):
    name = "genprm"
    no_soft = "its target is the index of the first wrong step"

    def record(self, row, opts, tokenizer=None) -> dict:
        fe = first_error(row.labels)
        return {"id": row.id, "prompt": critique_prompt(row.problem, list(row.steps)),
                "completion": critique_target(fe, len(row.steps)), "label": fe}

    def parse(self, record, problem, opts, tokenizer=None):
        """The steps out of the prompt and the completion's boxed index as labels ``[True] * k + [False]``."""
        steps, fe = parse_prompt(record["prompt"], problem), parse_target(record["completion"])
        if fe != record["label"]:
            raise ValueError(f"the completion's boxed index {fe} is not the label {record['label']}")
        return steps, [True] * len(steps) if fe == -1 else [True] * fe + [False]

    def schema(self, soft: bool):
        import pyarrow as pa

        return pa.schema([("id", pa.string()), ("prompt", pa.string()), ("completion", pa.string()),
                          ("label", pa.int32())])

    def export(self, out_url: str, output_url: str, request: ExportRequest) -> ExportResult:
        from pipeline.corpus import iter_corpus
        from pipeline.labeling.rules import RULES

        r = request
        if r.label_rule not in RULES:
            raise ExportError(f"--label-rule must be one of {', '.join(RULES)}, got {r.label_rule!r}")
        opts = ExportOptions(self.name)
        out = ExportOutput(output_url, r.overwrite)
        schema = self.schema(False)
        chunk: list[dict] = []
        skipped: dict[str, int] = {}
        n_rows = n_steps = corpus_rows = with_error = filled = 0
        try:
            for b in iter_corpus(out_url, r.version, batch_rows=r.batch_rows, verify=r.verify):
                for c in b.to_pylist():
                    corpus_rows += 1
                    steps = list(c["steps"] or [])
                    if not steps:
                        skipped["no_steps"] = skipped.get("no_steps", 0) + 1
                        continue
                    labels, conf = _labels(c, r.label_rule)
                    filled += fill_holes(labels, labels)
                    fe = first_error(labels)
                    if any(x is None for x in (labels if fe == -1 else labels[:fe])):
                        skipped["undecided"] = skipped.get("undecided", 0) + 1
                        continue
                    if r.min_confidence is not None and (conf is None or conf < r.min_confidence):
                        skipped["low_confidence"] = skipped.get("low_confidence", 0) + 1
                        continue
                    row = Row(c["id"], c["problem"], steps, index_labels(fe, len(steps)), c.get("solution_correct"))
                    rec = self.record(row, opts)
                    self.check(rec, row, opts)  # the row check every export format makes: it reads back
                    chunk.append(rec)
                    n_rows += 1
                    n_steps += len(steps)
                    with_error += fe != -1
                    if len(chunk) >= r.shard_rows:
                        out.write_records(chunk, schema, r.file_format)
                        chunk.clear()
            if chunk or not out.names:
                out.write_records(chunk, schema, r.file_format)
            files = out.publish()
        finally:
            out.discard_staging()
        res = ExportResult(output=output_url, format=self.name, file_format=r.file_format, files=files, rows=n_rows,
                           steps=n_steps, positives=n_rows - with_error, negatives=with_error, soft=False,
                           tokenizer_checked=False, skipped=skipped, corpus_rows=corpus_rows, filled=filled,
                           notes=["genprm: one record per solution; 'positive' counts error-free solutions "
                                  "(label -1), 'negative' solutions with a first error"]
                           + ([f"{filled:,} unlabeled steps before a step that reached the answer or before the "
                                "row's first error counted as correct, so those rows keep their first error"]
                              if filled else []))
        out.store.write_json(META_FILE, {"source": out_url, "version": r.version, "format": self.name,
                                         "label_rule": r.label_rule, "min_confidence": r.min_confidence,
                                         "rows": n_rows, "with_error": with_error, "corpus_rows": corpus_rows,
                                         "skipped": skipped, "files": [posixpath.basename(f) for f in files]})
        return res


def _labels(row: dict, rule: str) -> tuple[list[bool | None], float | None]:
    """The row's labels under ``rule`` (``hard`` on a scored corpus, or any corpus without counts: the stored
    ones) and the confidence of its first error (None when unknown)."""
    from pipeline.labeling.rules import apply_rule
    from pipeline.training.score import STRATEGY as SCORED  # a scored corpus: a PRM's labels, no MC counts

    if rule == "hard" or row.get("strategy") == SCORED:
        return list(row["labels"]), row.get("first_error_confidence")
    from pipeline.training.targets import row_confidence

    res = apply_rule(row, rule)
    return list(res.labels), row_confidence(row, res)
