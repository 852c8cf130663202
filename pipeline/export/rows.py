"""The per-step export run of ``mcprm export`` (every format but genprm: :meth:`Exporter.export
<pipeline.export.formats.base.Exporter.export>`): each corpus row's labels under the rule, its holes that the row's own labels settle filled
(:func:`~pipeline.export.common.fill_holes`), cut before its first step still unlabeled and (``drop_after_first_error``) after its first negative one, ``--balance``, the format's
record checked row by row (or whole columns: trl / processbench with the corpus's own labels), staged shards
published only when every record passed. See :mod:`pipeline.export` for the formats and label rules.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from pipeline.export.columns import balance_keep
from pipeline.export.common import (
    COUNT_RULES,
    LABEL_RULES,
    META_FILE,
    ExportError,
    ExportOptions,
    ExportOutput,
    ExportRequest,
    ExportResult,
    Row,
    fill_holes,
)
from pipeline.export.tokens import Encoded, load_tokenizer


def row_labels(labels: Sequence[bool | None], mc_value: Sequence[float | None], opts: ExportOptions
               ) -> tuple[list[Any], list[bool | None], int]:
    """Per-step (exported label, hard decision used for cutting, number of imputed steps)."""
    if opts.label_rule == "hard" and not opts.soft:  # the corpus's own labels, as they are
        if len(labels) != len(mc_value):
            raise ValueError(f"{len(labels)} labels for {len(mc_value)} mc_value entries")
        return list(labels), list(labels), 0
    out: list[Any] = []
    hard: list[bool | None] = []
    imputed = 0
    for lab, v in zip(labels, mc_value, strict=True):
        if opts.label_rule == "hard" or (v is None and lab is not None):
            if opts.label_rule != "hard" and lab is not None:
                imputed += 1
            h = lab
            y = None if lab is None else (float(lab) if opts.soft else bool(lab))
        elif v is None:
            h, y = None, None
        elif opts.label_rule == "threshold":
            h = y = bool(v >= opts.threshold)
        else:  # soft: the hard decision stays the corpus's own
            h = lab if lab is not None else bool(v > 0)
            y = float(v)
        out.append(y)
        hard.append(h)
    return out, hard, imputed


def cut_row(row: Row, hard: list[bool | None], drop_after_first_error: bool, cut: dict[str, int]) -> Row:
    # list.index/in compare with ==: labels are bool/float/None and hard decisions bool/None, so "None" finds
    # exactly the None entries and "False" exactly the False hard decisions (0.0 never enters ``hard``)
    n = len(row.steps)
    labels = row.labels
    end = labels.index(None) if None in labels else n
    if end < n:
        cut["unlabeled"] = cut.get("unlabeled", 0) + n - end
    kept = hard[:end] if end < n else hard
    if drop_after_first_error and False in kept:
        fe = kept.index(False)
        if fe + 1 < end:
            cut["after_first_error"] = cut.get("after_first_error", 0) + end - fe - 1
            end = fe + 1
            kept = hard[:end]
    return Row(row.id, row.problem, row.steps[:end] if end < n else row.steps, labels[:end] if end < n else labels,
               row.solution_correct, has_error=False in kept)


def export_rows(exporter, out_url: str, output_url: str, r: ExportRequest) -> ExportResult:
    """Export corpus ``out_url`` as ``exporter``'s format into folder ``output_url`` (see the module).
    ``exporter``: a :class:`pipeline.export.formats.base.Exporter` (not imported: it imports this module)."""
    fmt = exporter.name
    import pyarrow as pa

    from pipeline.corpus import iter_corpus

    if r.label_rule not in LABEL_RULES:
        raise ExportError(f"--label-rule must be one of {', '.join(LABEL_RULES)}, got {r.label_rule!r}")
    if r.balance not in (None, "downsample"):
        raise ExportError(f"--balance must be 'downsample' or unset, got {r.balance!r}")
    if r.label_rule == "threshold" and not 0 < r.threshold <= 1:
        raise ExportError(f"--threshold must be in (0, 1], got {r.threshold}")
    tag = r.placeholder if (exporter.tag_from_placeholder and r.placeholder) else r.step_tag
    if tag is not None and tag == "" and not exporter.empty_tag_ok:
        raise ExportError("--step-tag/--placeholder must not be empty")
    if r.reward_tokens[0] == r.reward_tokens[1]:
        raise ExportError(f"--reward-tokens must differ, got {r.reward_tokens}")
    opts = ExportOptions(fmt, "hard" if r.label_rule in COUNT_RULES else r.label_rule, r.threshold, tag or "",
                         tuple(r.reward_tokens), r.system_prompt)  # COUNT_RULES: relabeled in stream(), then "hard"
    from pipeline.storage.output import check_output_folder

    check_output_folder(output_url)  # before anything is written (a staging folder beside it)
    tok = load_tokenizer(r.tokenizer)

    cols = ["id", "problem", "steps", "labels", "mc_value", "solution_correct"]
    # rules computed from the stored counts, and the per-row first-error confidence
    by_counts = r.label_rule in COUNT_RULES or r.min_confidence is not None or r.weight_by_confidence
    if r.min_confidence is not None and not 0 <= r.min_confidence <= 1:
        raise ExportError(f"--min-confidence must be in [0, 1], got {r.min_confidence}")
    count_cols = ["mc_correct", "mc_total", "mc_ungradable"] if by_counts else []
    if by_counts:  # own draws and the first-error posterior (schema 4); older corpora: none
        from pipeline.labeling.rules import schema_version

        if schema_version(out_url, r.version) >= 4:
            count_cols += ["mc_reused", "mc_reused_correct", "first_error_posterior", "first_error_confidence"]
    agree, judge_cols = None, []
    if r.consensus is not None:  # rows where MC and an LLM judge agree (pipeline.judge)
        from pipeline.judge.store import ConsensusFilter

        agree = ConsensusFilter(out_url, r.consensus)
        judge_cols = [c for c in agree.columns if c not in cols + count_cols]

    def columns(b, lengths_only: bool):
        for c in cols:
            if c == "steps" and lengths_only:  # a row's steps as range(n): its length, without the texts
                import pyarrow.compute as pc

                yield [None if n is None else range(n) for n in pc.list_value_length(b.column(c)).to_pylist()]
            else:
                yield b.column(c).to_pylist()

    def stream(counts: dict | None, lengths_only: bool = False):
        """Exportable rows in corpus order, batch by batch; ``counts`` (when given) collects what was
        skipped, cut and imputed, and the corpus rows read. ``lengths_only``: each row's ``steps`` is
        ``range(number of steps)`` (what --balance's first pass needs: the class and the rank of a row)."""
        for b in corpus_batches(counts):
            yield from rows_in(b, counts, lengths_only)

    def corpus_batches(counts: dict | None):
        batches = iter_corpus(out_url, r.version, cols + count_cols + judge_cols, batch_rows=r.batch_rows,
                              verify=r.verify)
        for b in (batches if agree is None else agree.batches(batches, counts)):
            if counts is not None:
                counts["corpus_rows"] += b.num_rows
            yield b

    def rows_in(b, counts: dict | None, lengths_only: bool = False):
        """The exportable rows of batch ``b`` (see stream)."""
        skipped = counts["skipped"] if counts is not None else {}
        cut = counts["cut"] if counts is not None else {}
        extra = [b.column(c).to_pylist() for c in count_cols] or [[None] * b.num_rows]
        for rid, problem, steps, lab, mc, sc, *cnt in zip(*columns(b, lengths_only), *extra, strict=True):
            weight = None
            if by_counts:  # a rule computed from the stored counts
                lab, mc, weight = _by_counts(lab, mc, sc, cnt, r.label_rule)
                if r.min_confidence is not None and (weight is None or weight < r.min_confidence):
                    skipped["low_confidence"] = skipped.get("low_confidence", 0) + 1
                    continue
            labels, hard, imp = row_labels(lab, mc, opts)
            filled = fill_holes(labels, hard, 1.0 if opts.soft else True)
            if counts is not None:
                counts["imputed"] += imp
                counts["filled"] += filled
            row = Row(rid, problem, steps, labels, sc)
            if exporter.keeps_all_steps:
                fe = next((i for i, h in enumerate(hard) if h is False), -1)
                if any(h is None for h in (hard if fe == -1 else hard[:fe])):
                    skipped["undecided"] = skipped.get("undecided", 0) + 1
                    continue
                row.labels = ([True] * len(hard) if fe == -1
                              else [True] * fe + [False] + [None] * (len(hard) - fe - 1))
                row.has_error = fe != -1
                row.weight = weight
                yield row
                continue
            row = cut_row(row, hard, r.drop_after_first_error, cut)
            row.weight = weight
            if not row.steps:
                skipped["first_step_unlabeled"] = skipped.get("first_step_unlabeled", 0) + 1
                continue
            yield row

    counts = {"skipped": {}, "cut": {}, "imputed": 0, "filled": 0, "corpus_rows": 0}
    keep = None
    if r.balance == "downsample":
        # pass 1: each exportable row's class and rank (8 bytes a row, not the row); pass 2 writes the kept ones
        keep = balance_keep(stream(None, lengths_only=True), r.seed, balance_skipped := {})

    out = ExportOutput(output_url, r.overwrite)  # records are checked (check) and staged; published at the end
    schema = exporter.schema(opts.soft)
    if r.weight_by_confidence:  # one more column, the row's first-error confidence
        schema = schema.append(pa.field("weight", pa.float64()))
    chunk: list[dict] = []
    n_rows = n_steps = pos = n_labeled = unlabeled = 0

    def flush() -> None:
        out.write_records(chunk, schema, r.file_format)
        chunk.clear()

    text_key = exporter.text_field  # the tagged text whose tokens are checked (None: trl, processbench)
    encoded = Encoded(tok) if tok is not None and text_key is not None else None

    def add(group: list[Row]) -> None:
        nonlocal n_rows, n_steps, pos, n_labeled, unlabeled
        checker = encoded if encoded is not None else tok
        recs = [exporter.record(row, opts, checker) for row in group]
        if encoded is not None and not exporter.needs_ids:  # ids are needed only to count the tag
            encoded.prepare_for_count([r[text_key] for r in recs], exporter.tag(opts))
        elif encoded is not None:
            encoded.prepare([r[text_key] for r in recs] + [r["label"] for r in recs])
        for rec, row in zip(recs, group, strict=True):
            exporter.check(rec, row, opts, checker)
            if r.weight_by_confidence:
                rec["weight"] = row.weight
            chunk.append(rec)
            n_rows += 1
            n_steps += len(row.steps)
            labels = row.labels
            if opts.soft:
                for y in labels:
                    if y is None:
                        unlabeled += 1
                    else:
                        n_labeled += 1
                        pos += y > 0
            else:  # bool or None (row_labels, processbench), so count(True) counts exactly the ``is True``
                none = labels.count(None)
                unlabeled += none
                n_labeled += len(labels) - none
                pos += labels.count(True)
            if len(chunk) >= r.shard_rows:
                flush()

    # trl and processbench with the corpus's own labels: whole columns at a time (trl_columns,
    # processbench_columns), no Python object per row
    fast = exporter.columnar and opts.label_rule == "hard" and not opts.soft and not by_counts
    pending: list = []  # fast_trl: tables not yet written, fewer than shard_rows rows in all

    def put(table) -> None:
        nonlocal pending
        pending.append(table)
        while sum(t.num_rows for t in pending) >= r.shard_rows:
            t = pa.concat_tables(pending)
            out.write_table(t.slice(0, r.shard_rows), r.file_format)
            pending = [t.slice(r.shard_rows)] if t.num_rows > r.shard_rows else []

    def columnar() -> None:
        nonlocal n_rows, n_steps, pos, n_labeled, unlabeled
        seen = 0  # exportable rows so far (the index into --balance's mask)
        for b in corpus_batches(counts):
            got = exporter.columns(b, r.drop_after_first_error, counts["skipped"], counts["cut"], counts)
            if got is None:  # steps, labels and mc_value of some row differ in length: row by row, its errors
                rows = list(rows_in(b, counts))
                if keep is not None:
                    mask = keep[seen:seen + len(rows)]
                    seen += len(rows)
                    rows = [r for r, k in zip(rows, mask, strict=True) if k]
                recs = []
                for row in rows:
                    rec = exporter.record(row, opts, tok)
                    exporter.check(rec, row, opts, tok)
                    recs.append(rec)
                    n_rows += 1
                    n_steps += len(row.steps)
                    none = row.labels.count(None)
                    unlabeled += none
                    n_labeled += len(row.labels) - none
                    pos += row.labels.count(True)
                if recs:
                    put(pa.Table.from_pydict({f.name: [r[f.name] for r in recs] for f in schema}, schema=schema))
                continue
            table, steps, labeled, positives = got
            filled = counts.pop("batch_filled")  # the holes filled, per row of the table
            if keep is not None:
                mask = keep[seen:seen + table.num_rows]
                seen += table.num_rows
                if not mask.all():
                    table = table.filter(pa.array(mask))
                    steps, labeled, positives, filled = steps[mask], labeled[mask], positives[mask], filled[mask]
            counts["filled"] += int(filled.sum())
            if not table.num_rows:
                continue
            # the row-by-row check on the batch's first row: its record parses back, and with a tokenizer the
            # trl step separator (the same for every row) encodes to some token; the other rows' records are
            # their own columns, cut as that row's were
            row = exporter.row_of(table.slice(0, 1).to_pylist()[0])
            exporter.check(exporter.record(row, opts, tok), row, opts, tok)
            n_rows += table.num_rows
            n_steps += int(steps.sum())
            n_labeled += int(labeled.sum())
            unlabeled += int(steps.sum() - labeled.sum())
            pos += int(positives.sum())
            put(table.cast(schema))
        if pending or not out.names:
            out.write_table(pa.concat_tables(pending) if pending else schema.empty_table(), r.file_format)

    # rows checked together; token checks batch-encode a group, whose encodings (offsets, masks) weigh more
    group_rows = min(r.batch_rows, 1024) if encoded is not None else r.batch_rows
    try:
        if fast:
            columnar()
        else:
            group: list[Row] = []
            for i, row in enumerate(stream(counts)):
                if keep is not None and not keep[i]:
                    continue
                group.append(row)
                if len(group) >= group_rows:
                    add(group)
                    group = []
            add(group)
            if chunk or not out.names:
                flush()
        files = out.publish()
    finally:
        out.discard_staging()
    skipped, cut, imputed = counts["skipped"], counts["cut"], counts["imputed"]
    if keep is not None:
        skipped.update(balance_skipped)  # after the rows' own reasons, as before

    notes = []
    if tok is None and exporter.token_checked:
        notes.append("no --tokenizer: only text checks ran (tag once per step, labels == steps, records parse "
                     "back); pass the trainer's tokenizer to check the tag encodes to a single token")
    if agree is not None:
        notes.append(f"consensus with judge {agree.judge_id}: {agree.kept:,} rows where judge and MC agree on the "
                     "first error kept; the rest are counted above as 'consensus: ...'")
    if imputed:
        notes.append(f"{imputed} steps had no MC estimate (labeled without rollouts) and kept their hard label")
    if counts["filled"]:
        notes.append(f"{counts['filled']:,} unlabeled steps exported as positive: each comes before a step that "
                     "reached the answer or before its row's first error, so the row keeps its first error "
                     "instead of being cut at the hole")
    res = ExportResult(output=output_url, format=fmt, file_format=r.file_format, files=files, rows=n_rows,
                       steps=n_steps, positives=pos, negatives=n_labeled - pos,
                       soft=opts.soft, tokenizer_checked=tok is not None and exporter.token_checked,
                       imputed=imputed, filled=counts["filled"], skipped=skipped, cut=cut, notes=notes,
                       unlabeled=unlabeled, corpus_rows=counts["corpus_rows"])
    meta = {"source": out_url, "version": r.version, "format": fmt, "label_rule": r.label_rule,
            "threshold": r.threshold if r.label_rule == "threshold" else None,
            "drop_after_first_error": r.drop_after_first_error, "balance": r.balance, "seed": r.seed,
            "step_tag": exporter.tag(opts), "reward_tokens": list(r.reward_tokens),
            "tokenizer": r.tokenizer if isinstance(r.tokenizer, str) else getattr(tok, "name_or_path", None),
            "rows": res.rows, "steps": res.steps, "positives": res.positives, "negatives": res.negatives,
            "unlabeled": res.unlabeled, "corpus_rows": res.corpus_rows,
            "skipped": skipped, "cut": cut, "imputed": imputed, "filled": counts["filled"], "files": [posixpath.basename(f) for f in files],
            "consensus": None if agree is None else agree.judge_id}
    out.store.write_json(META_FILE, meta)
    return res


def _by_counts(labels, mc_value, solution_correct, counts, rule: str):
    """(labels, mc_value, first-error confidence) of one row under ``rule`` from its stored counts.
    Rules of :data:`COUNT_RULES` give their hard labels (exported as ``hard``); the others keep the corpus's.
    The confidence is the stored posterior probability of the (relabeled) first error (schema 4,
    pipeline.stats.changepoint), or the rule's own (:attr:`RuleResult.confidence`); None where the row has no posterior (no
    rollouts, or a corpus written before schema 4): ``--min-confidence`` then drops the row."""
    from pipeline.labeling.rules import apply_rule, confidence_of

    names = ("mc_correct", "mc_total", "mc_ungradable", "mc_reused", "mc_reused_correct", "first_error_posterior",
             "first_error_confidence")
    row = {"labels": labels, "mc_value": mc_value, "solution_correct": solution_correct,
           **dict(zip(names, counts))}
    if rule in COUNT_RULES:
        res = apply_rule(row, rule)
        own = res.confidence  # a rule that states its own confidence (changepoint)
        return res.labels, mc_value, own if own is not None else confidence_of(row, res.first_error)
    fe = next((i for i, x in enumerate(labels) if x is False), -1)
    return labels, mc_value, confidence_of(row, fe)
