"""Whole-column exports (trl and processbench with the corpus's own labels: no Python object per row) and
``--balance downsample``'s two-pass mask (:func:`balance_keep`)."""

from __future__ import annotations

import hashlib
from array import array

from pipeline.export.common import (
    Row,
)


def trl_columns(b, drop_after_first_error: bool, skipped: dict[str, int], cut: dict[str, int], counts: dict):
    """Batch ``b``'s exportable rows as a trl table (id, prompt, completions, labels), computed on whole columns:
    the rows, cuts and skips that the row-by-row path (row_labels with the corpus's own labels, cut_row, the
    format's record) gives, counted into ``skipped``/``cut`` the same way, its settled holes filled as fill_holes fills them
    (per row of the table in ``counts["batch_filled"]``, which the caller counts for the rows it keeps). Returns (the table, and per row of
    it: steps, labeled steps, positive steps), or None (nothing counted) when some row's steps, labels and
    mc_value differ in length: that batch goes row by row, whose errors name it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    steps, labels, mc = b.column("steps"), b.column("labels"), b.column("mc_value")
    lens = [pc.list_value_length(c) for c in (steps, labels, mc)]
    if any(x.null_count for x in lens):
        return None
    n, n_lab, n_mc = (x.to_numpy(zero_copy_only=False).astype(np.int64) for x in lens)
    if not (np.array_equal(n, n_lab) and np.array_equal(n, n_mc)):
        return None
    flat = pc.list_flatten(labels)
    parent = pc.list_parent_indices(labels).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]) if len(n) else n
    pos = np.arange(len(flat), dtype=np.int64) - starts[parent]  # a step's position in its row
    valid = flat.is_valid().to_numpy(zero_copy_only=False)
    value = flat.fill_null(False).to_numpy(zero_copy_only=False)

    def first(at):  # per row: the position of the first step where ``at``, else -1
        out = np.full(len(n), -1, dtype=np.int64)
        if at.any():
            rows, i = np.unique(parent[at], return_index=True)  # steps are in row order: first occurrence
            out[rows] = pos[at][i]
        return out

    valid, value, filled = _fill_holes(valid, value, parent, pos, first, len(n))
    if filled.any():
        flat = pa.array(value, type=pa.bool_(), mask=~valid)
    fn = first(~valid)
    end = np.where(fn >= 0, fn, n)  # cut before the first unlabeled step
    fe = first(valid & ~value & (pos < end[parent]))  # the first negative step kept
    if drop_after_first_error:
        new_end = np.where((fe >= 0) & (fe + 1 < end), fe + 1, end)
    else:
        new_end = end
    events = []  # the keys in the order the row-by-row path first meets them (a row's unlabeled cut first)
    for j, (key, amount) in enumerate((("unlabeled", n - end), ("after_first_error", end - new_end))):
        if amount.any():
            events.append((int(np.argmax(amount > 0)), j, key, int(amount.sum())))
    for _, _, key, total in sorted(events):
        cut[key] = cut.get(key, 0) + total
    end = new_end
    ok = end > 0
    if not ok.all():
        skipped["first_step_unlabeled"] = skipped.get("first_step_unlabeled", 0) + int((~ok).sum())
    idx = np.flatnonzero(ok)
    counts["batch_filled"] = np.bincount(parent[filled], minlength=len(n))[idx]  # per row of the table
    keep_step = (pos < end[parent]) & ok[parent]
    ends = end[idx]
    offsets = pa.array(np.concatenate([[0], np.cumsum(ends)]).astype(np.int32), pa.int32())
    kept = pa.array(keep_step)
    take = pa.array(idx)
    table = pa.Table.from_arrays(
        [b.column("id").take(take), b.column("problem").take(take),
         pa.ListArray.from_arrays(offsets, pc.list_flatten(steps).filter(kept)),
         pa.ListArray.from_arrays(offsets, flat.filter(kept))],
        names=["id", "prompt", "completions", "labels"])
    return table, ends, ends, _per_row_sum(value[keep_step], ends)


def processbench_columns(b, skipped: dict[str, int], counts: dict):
    """Batch ``b``'s exportable rows as a processbench table (id, problem, steps, label, final_answer_correct),
    computed on whole columns: label = the first negative step or -1; a row with an unlabeled step before it
    is skipped as "undecided" (row by row: rows_in). Returns as :func:`trl_columns`; None also when a row has
    no steps (row by row, the format's check names it)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    steps, labels, mc = b.column("steps"), b.column("labels"), b.column("mc_value")
    lens = [pc.list_value_length(c) for c in (steps, labels, mc)]
    if any(x.null_count for x in lens):
        return None
    n, n_lab, n_mc = (x.to_numpy(zero_copy_only=False).astype(np.int64) for x in lens)
    if not (np.array_equal(n, n_lab) and np.array_equal(n, n_mc)) or (n == 0).any():
        return None
    flat = pc.list_flatten(labels)
    parent = pc.list_parent_indices(labels).to_numpy(zero_copy_only=False).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]]) if len(n) else n
    pos = np.arange(len(flat), dtype=np.int64) - starts[parent]
    valid = flat.is_valid().to_numpy(zero_copy_only=False)
    value = flat.fill_null(True).to_numpy(zero_copy_only=False)

    def first(at):
        out = np.full(len(n), -1, dtype=np.int64)
        if at.any():
            rows, i = np.unique(parent[at], return_index=True)
            out[rows] = pos[at][i]
        return out

    valid, value, filled = _fill_holes(valid, value, parent, pos, first, len(n))
    fe = first(valid & ~value)
    fn = first(~valid)
    # undecided: an unlabeled step before the first negative one (anywhere, when there is none)
    undecided = (fn >= 0) & ((fe == -1) | (fn < fe))
    if undecided.any():
        skipped["undecided"] = skipped.get("undecided", 0) + int(undecided.sum())
    idx = np.flatnonzero(~undecided)
    counts["batch_filled"] = np.bincount(parent[filled], minlength=len(n))[idx]  # per row of the table
    take = pa.array(idx)
    fe, m = fe[idx], n[idx]
    table = pa.Table.from_arrays(
        [b.column("id").take(take), b.column("problem").take(take), steps.take(take),
         pa.array(fe.astype(np.int32), pa.int32()), b.column("solution_correct").take(take)],
        names=["id", "problem", "steps", "label", "final_answer_correct"])
    return table, m, np.where(fe >= 0, fe + 1, m), np.where(fe >= 0, fe, m)


def _fill_holes(valid, value, parent, pos, first, rows):
    """Whole-column :func:`~pipeline.export.common.fill_holes`: (valid, value, the steps filled)."""
    import numpy as np

    last = np.full(rows, -1, dtype=np.int64)
    reached = valid & value
    if reached.any():
        np.maximum.at(last, parent[reached], pos[reached])
    fe = first(valid & ~value)
    filled = ~valid & ((pos < last[parent]) | (pos < fe[parent]))
    if not filled.any():
        return valid, value, filled
    return valid | filled, value | filled, filled


def _per_row_sum(values, lengths):
    """Sums of consecutive runs of ``values`` of the given ``lengths``."""
    import numpy as np

    if not len(lengths):
        return np.zeros(0, dtype=np.int64)
    c = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    b = np.concatenate([[0], np.cumsum(lengths)])
    return c[b[1:]] - c[b[:-1]]


def _rank64(seed: int, row: Row) -> int:
    return int(hashlib.sha256(f"{seed}:{row.id}:{row.problem}:{len(row.steps)}".encode()).hexdigest()[:16], 16)


def balance_keep(rows, seed: int, skipped: dict[str, int]):
    """The rows the in-memory downsampling keeps, as a boolean mask over the stream ``rows``, holding one bit and one 64-bit
    rank per row (not the rows). The choice: the minority class whole, and the majority's
    rows of smallest rank, ties in corpus order (a stable sort; equal 64-bit prefixes of different sha256 ranks
    are astronomically rare and broken the same way, by order)."""
    import numpy as np

    err, rank = array("b"), array("Q")
    for r in rows:
        err.append(r.has_error)
        rank.append(_rank64(seed, r))
    has_error = np.frombuffer(err, dtype=np.int8).astype(bool)
    ranks = np.frombuffer(rank, dtype=np.uint64)
    n = len(has_error)
    n_neg = int(has_error.sum())
    n_pos = n - n_neg
    keep = np.ones(n, dtype=bool)
    if n_pos == 0 or n_neg == 0:
        return keep
    big = has_error if n_pos <= n_neg else ~has_error  # the other class, the smaller one, is kept whole
    small_n = min(n_pos, n_neg)
    idx = np.flatnonzero(big)
    order = np.argsort(ranks[idx], kind="stable")
    keep[idx] = False
    keep[idx[order[:small_n]]] = True
    skipped["balance"] = n - int(keep.sum())
    return keep
