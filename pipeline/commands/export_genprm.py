r"""``export --format genprm``: training rows for a generative verifier (GenPRM / ThinkPRM / ProcessBench-critic
style): a critique prompt and, as the target, the index of the first wrong step or -1.

Each record: ``id``; ``prompt`` = ProcessBench's critique prompt (the problem, then the steps as
``<paragraph_i>`` ... ``</paragraph_i>`` indexed from 0, then the task: return the earliest wrong paragraph's
index, or -1, in ``\boxed{}``); ``completion`` = a short verdict per paragraph up to the first error ("Paragraph i
is correct." / "Paragraph k contains the first error.") ending with ``\boxed{k}`` (``\boxed{-1}`` for none);
``label`` = that index (int). ``prompt``/``completion`` is the prompt-completion format SFT trainers (TRL's
``SFTTrainer``, OpenRLHF's SFT) read as is; ``label`` is what an RL verifier's reward or an evaluation compares
with the ``\boxed{}`` answer.

Labels: the corpus's stored labels, or any rule of :mod:`pipeline.labeling.rules` from the stored counts
(``--label-rule``); rows whose steps before the first error are not all labeled are skipped (undecided);
``--min-confidence`` drops rows whose first error is less sure than that. Shards are written into a staging folder
and moved in only when every row was built, as the other formats are.
"""

from __future__ import annotations

import io
import json
import posixpath
import re

PROMPT = (
    "The following is a math problem and a solution (split into paragraphs, enclosed with tags and indexed from "
    "0):\n\n[Math Problem]\n\n{problem}\n\n[Solution]\n\n{paragraphs}\n\nYour task is to review and critique the "
    "solution paragraph by paragraph. Once you identify an error in a paragraph, return the index of the "
    "paragraph where the earliest error occurs. Otherwise, return the index of -1 (which typically denotes "
    "\"not found\").\n\nPlease put your final answer (i.e., the index) in \\boxed{{}}."
)
_BOXED = re.compile(r"\\boxed\{(-?\d+)\}\s*$")


def critique_prompt(problem: str, steps: list[str]) -> str:
    paragraphs = "\n\n".join(f"<paragraph_{i}>\n{s}\n</paragraph_{i}>" for i, s in enumerate(steps))
    return PROMPT.format(problem=problem, paragraphs=paragraphs)


def critique_target(first_error: int, n_steps: int) -> str:
    upto = n_steps if first_error == -1 else first_error
    lines = [f"Paragraph {i} is correct." for i in range(upto)]
    if first_error != -1:
        lines.append(f"Paragraph {first_error} contains the first error.")
    else:
        lines.append("No paragraph contains an error.")
    return "\n".join(lines) + f"\n\n\\boxed{{{first_error}}}"


def parse_target(completion: str) -> int:
    """The first-error index a completion ends with (the inverse of :func:`critique_target`)."""
    m = _BOXED.search(completion)
    if not m:
        raise ValueError("no \\boxed{index} at the end of the completion")
    return int(m.group(1))


def export_genprm(out_url: str, output_url: str, *, version: int | None = None, label_rule: str = "hard",
                  min_confidence: float | None = None, file_format: str = "parquet", shard_rows: int = 10_000,
                  overwrite: bool = False, verify: bool = False, batch_rows: int = 8192):
    import pyarrow as pa

    from pipeline.commands.export_common import (
        FILE_FORMATS,
        META_FILE,
        ExportError,
        ExportOutput,
        ExportResult,
    )
    from pipeline.labeling.rules import RULES
    from pipeline.storage.corpus import iter_corpus

    if label_rule not in RULES:
        raise ExportError(f"--label-rule must be one of {', '.join(RULES)}, got {label_rule!r}")
    if file_format not in FILE_FORMATS:
        raise ExportError(f"--file-format must be one of {', '.join(FILE_FORMATS)}, got {file_format!r}")
    if shard_rows < 1:
        raise ExportError(f"--shard-rows must be at least 1, got {shard_rows}")
    out = ExportOutput(output_url, overwrite)
    store, staging = out.store, out.staging
    schema = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("completion", pa.string()),
                        ("label", pa.int32())])
    names: list[str] = []
    chunk: list[dict] = []
    skipped: dict[str, int] = {}
    n_rows = n_steps = corpus_rows = with_error = 0

    def flush() -> None:
        name = f"part-{len(names):05d}.{file_format}"
        if file_format == "parquet":
            import pyarrow.parquet as pq

            buf = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(chunk, schema=schema), buf, compression="zstd")
            staging.write_bytes(name, buf.getvalue())
        else:
            staging.write_bytes(name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk).encode())
        names.append(name)
        chunk.clear()

    try:
        for b in iter_corpus(out_url, version, batch_rows=batch_rows, verify=verify):
            for r in b.to_pylist():
                corpus_rows += 1
                steps = list(r["steps"] or [])
                if not steps:
                    skipped["no_steps"] = skipped.get("no_steps", 0) + 1
                    continue
                labels, conf = _labels(r, label_rule)
                fe = next((i for i, x in enumerate(labels) if x is False), -1)
                if any(x is None for x in (labels if fe == -1 else labels[:fe])):
                    skipped["undecided"] = skipped.get("undecided", 0) + 1
                    continue
                if min_confidence is not None and (conf is None or conf < min_confidence):
                    skipped["low_confidence"] = skipped.get("low_confidence", 0) + 1
                    continue
                rec = {"id": r["id"], "prompt": critique_prompt(r["problem"], steps),
                       "completion": critique_target(fe, len(steps)), "label": fe}
                if parse_target(rec["completion"]) != fe:  # the row check every export format makes
                    raise ExportError(f"row {r['id']!r} (genprm): the target does not read back as {fe}")
                chunk.append(rec)
                n_rows += 1
                n_steps += len(steps)
                with_error += fe != -1
                if len(chunk) >= shard_rows:
                    flush()
        if chunk or not names:
            flush()
        out.publish(names)
    finally:
        out.discard_staging()
    files = [store.uri(n) for n in names]
    res = ExportResult(output=output_url, format="genprm", file_format=file_format, files=files, rows=n_rows,
                       steps=n_steps, positives=n_rows - with_error, negatives=with_error, soft=False,
                       tokenizer_checked=False, skipped=skipped, corpus_rows=corpus_rows,
                       notes=["genprm: one record per solution; 'positive' counts error-free solutions "
                              "(label -1), 'negative' solutions with a first error"])
    store.write_json(META_FILE, {"source": out_url, "version": version, "format": "genprm",
                                 "label_rule": label_rule, "min_confidence": min_confidence, "rows": n_rows,
                                 "with_error": with_error, "corpus_rows": corpus_rows, "skipped": skipped,
                                 "files": [posixpath.basename(f) for f in files]})
    return res


def _labels(row: dict, rule: str) -> tuple[list[bool | None], float | None]:
    """The row's labels under ``rule`` (``hard`` on a scored corpus, or any corpus without counts: the stored
    ones) and the confidence of its first error (None when unknown)."""
    from pipeline.labeling.rules import apply_rule

    if rule == "hard" or row.get("strategy") == "prm":
        labels = list(row["labels"])
        conf = row.get("first_error_confidence")
        return labels, conf
    from pipeline.training.targets import row_confidence

    res = apply_rule(row, rule)
    return list(res.labels), row_confidence(row, rule, res)
