"""``first_error_confidence`` of a version: the first-error model fitted once per version, applied on read.

The confidence of a row is its posterior probability under an empirical-Bayes model
(:mod:`pipeline.stats.changepoint`) whose parameters are estimated from the corpus. Fitted per shard, a row's
confidence would depend on which other rows shared its shard (shard sizes shrink towards the end of a run, a
refresh shards only its new rows), so an interrupted-and-resumed run, a refresh and a run from scratch would
disagree on the same row. So the model is fitted **once per version, at commit**, from the version's stored
counts (``mc_deep_correct`` / ``mc_deep_total``, ``solution_correct``), on at most :data:`MAX_FIT_ROWS` rows
chosen by a hash of their content key (a deterministic function of the corpus's content, never of its
sharding), and written to the manifest as ``first_error_model``. The shards a run wrote are then rewritten
with the two columns filled (:func:`write_filled`, before the manifest is committed), so a reader outside mcprm
(``pyarrow``, ``datasets``, ``ray.data``) reads the same values. mcprm's own readers (``read_corpus``,
``iter_corpus``, ``scan_corpus``) still compute them with :func:`fill` from each row's counts under the version's
model: a refresh refits, and the shards it reuses from an earlier version keep the values of the version that
wrote them, which only mcprm's readers bring up to date.
"""

from __future__ import annotations

import hashlib
import heapq

from pipeline.solution import UNREACHED

MAX_FIT_ROWS = 2000
MODEL = "changepoint-eb-3"  # pipeline.stats.changepoint; what fit_model writes
# models whose parameters Params.from_dict reads (eb-2: one mixing distribution for all lengths); a manifest with
# another model is read as stored
READABLE_MODELS = ("changepoint-eb-2", MODEL)
FIT_COLUMNS = ["key", "mc_deep_correct", "mc_deep_total", "solution_correct", "rollouts", "label_status"]
FILLED = ("first_error_confidence", "first_error_posterior")
# How a corpus's confidence reads, measured against the bundled task's exact checker on samples that chose
# nothing (docs/labels.md, "first_error_confidence"): it ranks rows well under every strategy; where every prefix
# is sampled it is also close to a probability, overconfident only near 1; elsewhere (a few probes a row) it is
# overconfident throughout.
NEAR_CALIBRATED_STRATEGIES = ("per-step",)


def reads_as(strategy: str | None) -> str:
    """``"ranking, close to a probability"`` for a corpus of a strategy that samples every prefix, else
    ``"ranking"``: what ``mcprm stats`` tells a user the confidence can be used as."""
    return "ranking, close to a probability" if strategy in NEAR_CALIBRATED_STRATEGIES else "ranking"


def _rank(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def _row_counts(correct, total, solution_correct):
    from pipeline.stats.changepoint import RowCounts

    return RowCounts(tuple((int(c), int(n)) for c, n in zip(correct, total)), solution_correct)


def fit_model(tables) -> dict | None:
    """Fit the first-error model to the rows of ``tables`` (an iterable of pyarrow tables with
    :data:`FIT_COLUMNS`); the parameters as a dict for the manifest, None when no row has rollouts."""
    from pipeline.stats.changepoint import fit

    heap: list[tuple[int, str, object]] = []  # the MAX_FIT_ROWS smallest ranks, as a max-heap
    for t in tables:
        cols = t.select([c for c in FIT_COLUMNS if c in t.schema.names]).to_pydict()
        status = cols.get("label_status") or [None] * t.num_rows
        for key, c, n, sc, r, st in zip(cols["key"], cols["mc_deep_correct"], cols["mc_deep_total"],
                                        cols["solution_correct"], cols["rollouts"], status):
            # an unreached row's counts are the completer's failure on the problem, not evidence about where its
            # steps go wrong: they would teach the model that a dead first step is a first error
            if not r or c is None or st == UNREACHED:
                continue
            item = (-_rank(key), key, (c, n, sc))
            if len(heap) < MAX_FIT_ROWS:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    if not heap:
        return None
    rows = [_row_counts(*v) for _r, _k, v in sorted(heap, reverse=True)]
    return {"model": MODEL, "rows": len(rows), **fit(rows).to_dict()}


def model_of(manifest: dict):
    """The manifest's fitted :class:`~pipeline.stats.changepoint.Params`, or None (no rollouts, or a corpus
    written before the model was fitted per version: its stored columns are read as they are)."""
    m = manifest.get("first_error_model")
    if not m or m.get("model") not in READABLE_MODELS:
        return None
    from pipeline.stats.changepoint import Params

    return Params.from_dict(m)


def fill(table, params):
    """``table`` with ``first_error_confidence`` / ``first_error_posterior`` computed from each row's counts
    under ``params`` (a table without the needed columns is returned as it is)."""
    import pyarrow as pa

    from pipeline.stats.changepoint import posterior

    if isinstance(table, pa.RecordBatch):
        filled = fill(pa.Table.from_batches([table]), params)
        return filled.combine_chunks().to_batches()[0] if filled is not None and filled.num_rows else table
    names = table.schema.names
    need = ("mc_deep_correct", "mc_deep_total", "solution_correct", "rollouts", "first_error")
    if params is None or not any(c in names for c in FILLED) or any(c not in names for c in need):
        return table
    cols = table.select(list(need)).to_pydict()
    status = table.column("label_status").to_pylist() if "label_status" in names else [None] * table.num_rows
    conf, posts = [], []
    for (c, n, sc, r, fe), st in zip(zip(*(cols[k] for k in need)), status):
        if st == UNREACHED and c is not None:
            # no continuation reached the gold answer from the problem or its first step: the counts carry no
            # evidence about the steps, so the row's statement is the model's prior for its length and answer
            # (its posterior given no draws), not a posterior that reads the completer's failure as a first error
            c = n = [0] * len(c)
        if not r or c is None:
            # labeled without rollouts: a right final answer trusted as error-free (trust_correct) is right with
            # the model's 1 - rho (rho: P(a wrong step | right answer), fitted where such rows were sampled,
            # else its prior); anything else has no statement
            conf.append(1.0 - params.rho if sc is True and fe == -1 else None)
            posts.append(None)
            continue
        post = posterior(_row_counts(c, n, sc), params)
        posts.append(post)
        conf.append(post[fe + 1] if 0 <= fe + 1 < len(post) else None)
    out = table
    for name, values in (("first_error_confidence", conf), ("first_error_posterior", posts)):
        if name in names:
            i = out.schema.get_field_index(name)
            field = out.schema.field(i)  # polars hands over large_list: keep the reader's own types
            out = out.set_column(i, field, pa.array(values, type=field.type))
    return out


def read_columns(columns: list[str] | None) -> tuple[list[str] | None, bool]:
    """The columns to read for a requested projection (plus what :func:`fill` needs) and whether the result
    must be projected back afterwards."""
    if columns is None or not any(c in FILLED for c in columns):
        return columns, False
    extra = [c for c in ("mc_deep_correct", "mc_deep_total", "solution_correct", "rollouts", "first_error",
                         "label_status") if c not in columns]
    return list(columns) + extra, bool(extra)


def write_filled(store, rels: list[str], model: dict | None, threads: int = 8) -> dict[str, dict]:
    """Rewrite each shard of ``rels`` with ``first_error_confidence`` / ``first_error_posterior`` filled under
    ``model`` (the manifest's ``first_error_model``): its checksum sidecar first (same counts, keys and
    quarantined rows), then the shard, each atomically. Returns ``{rel: {"bytes", "sha256"}}`` for the manifest.

    Called before the version is committed, on shards only this run's owner id names: a run killed between a
    sidecar and its shard leaves one shard whose checksum disagrees, which a resumed run labels again (never
    records); no committed byte is touched."""
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.storage.store import sidecar_rel

    params = model_of({"first_error_model": model}) if model else None
    if params is None or not rels:
        return {}

    def one(rel: str) -> tuple[str, dict]:
        side = store.read_json(sidecar_rel(rel)) or {}
        table = fill(store.read_table(rel), params)
        extra = {k: v for k, v in side.items() if k not in ("bytes", "sha256", "rows", "counts", "keys")}
        return rel, store.write_table(rel, table, counts=side.get("counts"), extra=extra)

    with ThreadPoolExecutor(max(1, min(threads, len(rels)))) as pool:
        return dict(pool.map(one, rels))


def fit_version_model(store, shards: list[dict]) -> dict | None:
    """A version's first-error model, fitted to the stored counts of all its shards."""
    return fit_model(store.read_table(s["path"], columns=FIT_COLUMNS) for s in shards)


def write_version_confidence(store, version: int, manifest: dict, fence) -> None:
    """Fill the confidence columns into the shards ``version`` wrote (readers outside mcprm see them too) and
    record the rewritten files' checksums in ``manifest``. ``fence()`` raises when the writer lost the output:
    the shards are rewritten only while it still holds it."""
    fence()
    ours = [s for s in manifest["shards"] if s.get("version") == version]
    written = write_filled(store, [s["path"] for s in ours], manifest.get("first_error_model"))
    for s in ours:
        if s["path"] in written:
            s.update(written[s["path"]])
