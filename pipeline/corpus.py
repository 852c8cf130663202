"""The corpus reader, the public way to read a labeled corpus: always through its manifest (a consistent
snapshot), never by globbing. ``read_corpus`` (a table), ``iter_corpus`` (batches), ``scan_corpus`` (a lazy polars
frame), ``shard_uris`` (for other readers), ``open_manifest``, ``corpus_stats``; see docs/corpus.md."""

from __future__ import annotations

import contextlib
from collections import Counter

from pipeline.errors import FatalError
from pipeline.storage.store import CorpusStore


class CorpusError(FatalError, ValueError):
    pass


def open_manifest(url: str, version: int | None = None, *,
                  storage_options: dict | None = None) -> tuple[CorpusStore, dict]:
    from pipeline.storage.integrity import ManifestError, current_manifest

    store = CorpusStore(url, storage_options)
    try:
        m = current_manifest(store, follow_newer=True) if version is None else store.version_manifest(version)
    except (ManifestError, RuntimeError) as e:
        raise CorpusError(str(e)) from None
    from pipeline.storage.store import is_fenced

    if is_fenced(m):
        raise CorpusError(f"{url} has no version {version}: that number was claimed at a lock takeover so that "
                          f"the run that lost the lock could not commit it (never a version); versions: "
                          f"{_committed(store)}")
    if m is None:
        if version is None:
            raise CorpusError(f"{url} is not an mcprm corpus (no manifest.json). Run `mcprm label --output {url}` first.")
        raise CorpusError(f"{url} has no version {version} (pruned, or never committed); versions: "
                          f"{_committed(store)}")
    return store, m


def _committed(store: CorpusStore) -> list[int]:
    from pipeline.storage.integrity import read_version

    return [v for v in store.versions() if read_version(store, v) is not None]


def shard_uris(url: str, version: int | None = None) -> list[str]:
    """Full URLs of the shards of a version, e.g. for ``datasets.load_dataset("parquet", data_files=...)``."""
    store, m = open_manifest(url, version)
    return [store.uri(s["path"]) for s in m["shards"]]


DEFAULT_BATCH_ROWS = 65_536


def _damaged(url: str, e: Exception) -> CorpusError:
    return CorpusError(f"{e}. `mcprm verify {url}` lists every damaged file and the command that repairs it.")


def _check_size(store: CorpusStore, s: dict) -> None:
    """A local shard's size against the manifest (cheap: a stat, no read)."""
    from pipeline.storage.store import ShardError

    if store.local and "bytes" in s:
        size = store.size(s["path"])
        if size != int(s["bytes"]):
            raise ShardError(f"shard {store.uri(s['path'])} "
                             + ("is missing" if size is None else
                                f"has {size} bytes, the manifest says {s['bytes']} (truncated or replaced)"))


def _empty(columns: list[str] | None):
    import pyarrow as pa

    from pipeline.storage.schema import arrow_schema

    schema = arrow_schema()
    if columns:
        schema = pa.schema([schema.field(c) for c in columns])
    return schema.empty_table()


def read_corpus(url: str, version: int | None = None, columns: list[str] | None = None, verify: bool = False, *,
                storage_options: dict | None = None):
    """The whole corpus of a version as one pyarrow Table (current version by default): for small corpora.
    A large one is read with :func:`iter_corpus` (batches) or :func:`scan_corpus` (a polars LazyFrame).

    Every shard's size is checked against the manifest on local disk (cheap); ``verify=True`` reads every
    shard whole and checks its sha256, schema and row count first. A damaged shard raises CorpusError naming
    the file (and ``mcprm verify``), never a bare Arrow error. ``storage_options`` (every reader here): passed to
    the store's file system as they are (:mod:`pipeline.storage.fs`), e.g. ``{"endpoint_url": ..., "key": ...}``."""
    import pyarrow as pa

    from pipeline.storage import confidence
    from pipeline.storage.store import ShardError

    store, m = open_manifest(url, version, storage_options=storage_options)
    model = confidence.model_of(m)
    wanted = columns
    columns, project = confidence.read_columns(columns) if model else (columns, False)
    tables = []
    for s in m["shards"]:
        try:
            if verify:
                from pipeline.storage.integrity import load_shard

                t = load_shard(store, s["path"], s, m.get("schema_version") or 1)
                tables.append(t.select(columns) if columns else t)
                continue
            _check_size(store, s)
            tables.append(store.read_table(s["path"], columns=columns))
        except ShardError as e:
            raise _damaged(url, e) from None
    if not tables:
        return _empty(wanted)
    t = confidence.fill(pa.concat_tables(tables), model)
    return t.select(wanted) if project else t


def iter_corpus(url: str, version: int | None = None, columns: list[str] | None = None, *,
                batch_rows: int = DEFAULT_BATCH_ROWS, verify: bool = False, storage_options: dict | None = None):
    """The corpus of a version as a stream of ``pyarrow.RecordBatch`` of at most ``batch_rows`` rows, in
    corpus order (shard by shard, as :func:`read_corpus` concatenates them). Memory is bounded by a batch
    (one shard with ``verify=True``, which reads and checks each shard whole before yielding from it), not by
    the corpus. The same checks and errors as :func:`read_corpus`; a shard found damaged mid-stream raises
    CorpusError naming it (batches already yielded stay valid)."""
    import pyarrow.parquet as pq

    from pipeline.storage.store import ShardError

    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    from pipeline.storage import confidence

    store, m = open_manifest(url, version, storage_options=storage_options)
    model = confidence.model_of(m)
    wanted = columns
    columns, project = confidence.read_columns(columns) if model else (columns, False)

    def done(b):
        b = confidence.fill(b, model) if model else b
        return b.select(wanted) if project else b

    for s in m["shards"]:
        rel = s["path"]
        if verify:
            from pipeline.storage.integrity import load_shard

            try:
                t = load_shard(store, rel, s, m.get("schema_version") or 1)
            except ShardError as e:
                raise _damaged(url, e) from None
            yield from (done(b) for b in (t.select(columns) if columns else t).to_batches(max_chunksize=batch_rows))
            continue
        try:
            _check_size(store, s)
            # a local shard is read by pyarrow natively: its reader threads never call back into a Python file
            # object (which can abort the interpreter at exit: see CorpusStore.read_table)
            f = contextlib.nullcontext(store.path(rel)) if store.local else store.fs.open(store.path(rel), "rb")
        except FileNotFoundError:
            raise _damaged(url, ShardError(f"shard {store.uri(rel)} is missing")) from None
        except ShardError as e:
            raise _damaged(url, e) from None
        with f as src:
            try:
                pf = pq.ParquetFile(src)
                # use_threads=False: see CorpusStore.read_table
                batches = pf.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False)
                while True:
                    try:
                        b = next(batches)
                    except StopIteration:
                        break
                    yield done(b)
            except ShardError:
                raise
            except (GeneratorExit, KeyboardInterrupt):
                raise
            except Exception as e:  # ArrowInvalid, OSError (ZSTD, truncated footer), a missing column, ...
                raise _damaged(url, ShardError(f"shard {store.uri(rel)} is unreadable ({type(e).__name__}: {e})")
                               ) from None


def scan_corpus(url: str, version: int | None = None, *, storage_options: dict | None = None):
    """The corpus of a version as a ``polars.LazyFrame`` over its shards (the manifest's snapshot, never a
    glob), e.g. ``scan_corpus(OUT).filter(pl.col("first_error") >= 0).select("id").collect(engine="streaming")``.
    Local and object-store URLs (``s3://``, ``gs://``, ``az://``: polars' own readers, credentials from the
    environment); other fsspec filesystems, and any store given ``storage_options`` (polars' readers name their
    options differently), are read through pyarrow. No check runs here: ``mcprm verify``."""
    import polars as pl

    store, m = open_manifest(url, version, storage_options=storage_options)
    if not m["shards"]:
        return pl.from_arrow(_empty(None)).lazy()
    uris = [store.uri(s["path"]) for s in m["shards"]]
    lf = _scan(store, m, uris)
    from pipeline.storage import confidence

    model = confidence.model_of(m)
    if model is None:
        return lf
    schema = lf.collect_schema()

    def fill(df):
        return pl.from_arrow(confidence.fill(df.to_arrow(), model))

    # the confidence columns are computed from each row's counts (pipeline.storage.confidence): no projection
    # pushdown past this step, so the counts are read even where only the confidence is selected
    return lf.map_batches(fill, schema=schema, projection_pushdown=False, predicate_pushdown=False,
                          slice_pushdown=False, streamable=True)


def _scan(store: CorpusStore, m: dict, uris: list[str]):
    import polars as pl

    polars_reads = uris[0].split("://", 1)[0] in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https",
                                                   "hf")
    if store.local or polars_reads and not store.storage_options:
        return pl.scan_parquet(uris)
    import pyarrow.dataset as ds

    return pl.scan_pyarrow_dataset(ds.dataset([store.path(s["path"]) for s in m["shards"]], format="parquet",
                                              filesystem=store.fs))


def _has_column(store: CorpusStore, m: dict, name: str) -> bool:
    """Whether the shards of a version have column ``name`` (shards of one version share one schema)."""
    import pyarrow.parquet as pq

    if not m["shards"]:
        return True
    rel = m["shards"][0]["path"]
    try:
        if store.local:
            return name in pq.read_schema(store.path(rel)).names
        with store.fs.open(store.path(rel), "rb") as f:
            return name in pq.read_schema(f).names
    except Exception as e:  # missing, truncated, corrupt footer
        raise CorpusError(f"shard {store.uri(rel)} is unreadable ({type(e).__name__}: {e}). `mcprm verify "
                          f"{store.url}` lists every damaged file and the command that repairs it.") from None


def corpus_stats(url: str, version: int | None = None, verify: bool = False, *,
                 batch_rows: int = DEFAULT_BATCH_ROWS) -> dict:
    """Counts of a corpus (``mcprm stats``), streamed: memory is bounded by ``batch_rows``, not the corpus."""
    import numpy as np
    import pyarrow.compute as pc

    from pipeline.solution import REACH_STATUSES, UNREACHED

    store, m = open_manifest(url, version)
    # mc_no_answer exists from schema version 2 on; an older corpus reports its no-answer count as unknown.
    has_no_answer = _has_column(store, m, "mc_no_answer")
    has_unreadable = _has_column(store, m, "mc_unreadable")  # schema 4 (unreadable answers counted)
    has_status = _has_column(store, m, "label_status")  # schema 3
    cols = ["labels", "first_error", "solution_correct", "rollouts", "rollout_tokens"]
    pos = neg = unl = n = steps = right_wrong = with_error = correct = rollouts = tokens = no_answer = 0
    unreadable = counted = 0
    probed_right = dead_right = dead_right_solutions = 0
    fe_hist: Counter = Counter()
    extra = (["mc_no_answer"] if has_no_answer else []) + (["mc_unreadable"] if has_unreadable else [])
    extra += ["mc_correct", "mc_total"] + (["label_status"] if has_status else [])
    gated = unreached = unreached_right = first_probed = first_dead = 0
    for b in iter_corpus(url, version, cols + extra, batch_rows=batch_rows, verify=verify):
        n += b.num_rows
        flat = b.column("labels").flatten()
        steps += len(flat)
        t = int(pc.sum(flat).as_py() or 0)
        pos += t
        unl += flat.null_count
        neg += len(flat) - flat.null_count - t
        fe = b.column("first_error").to_numpy(zero_copy_only=False)
        err = fe != -1
        with_error += int(err.sum())
        vals, cnt = np.unique(fe[err], return_counts=True)
        fe_hist.update({int(v): int(c) for v, c in zip(vals, cnt)})
        sc = b.column("solution_correct")
        sc_true = sc.fill_null(False).to_numpy(zero_copy_only=False)
        correct += int(sc_true.sum())
        right_wrong += int((sc_true & err).sum())
        rollouts += int(pc.sum(b.column("rollouts")).as_py() or 0)
        tokens += int(pc.sum(b.column("rollout_tokens")).as_py() or 0)
        if has_no_answer:
            no_answer += int(pc.sum(b.column("mc_no_answer").flatten()).as_py() or 0)
        total = b.column("mc_total")
        if has_unreadable:
            unreadable += int(pc.sum(b.column("mc_unreadable").flatten()).as_py() or 0)
            counted += int(pc.sum(total.flatten()).as_py() or 0)
        p, d, ds = _dead_prefixes_of_right_answers(b.column("mc_correct"), total, sc_true)
        if has_status:
            st = b.column("label_status").to_pylist()
            gated += sum(1 for x in st if x in REACH_STATUSES)
            unr = np.array([x == UNREACHED for x in st], dtype=bool)
            unreached += int(unr.sum())
            unreached_right += int((unr & sc_true).sum())
        fp, fd = _first_step_dead(b.column("mc_correct"), total)
        first_probed, first_dead = first_probed + fp, first_dead + fd
        probed_right, dead_right, dead_right_solutions = probed_right + p, dead_right + d, dead_right_solutions + ds
    return {
        "output": url,
        "version": m["version"],
        "strategy": m.get("strategy"),
        "k": m.get("k"),
        "solutions": n,
        "steps": steps,
        "labels": {"positive": pos, "negative": neg, "unlabeled": unl},
        "positive_rate": pos / (pos + neg) if pos + neg else None,
        "solutions_with_error": with_error,
        "first_error_histogram": dict(sorted(fe_hist.items())),
        "solution_correct_rate": (correct / n) if n else None,
        "right_answer_wrong_process": right_wrong,
        # whether right final answers were trusted without rollouts (then the count above is 0 by construction)
        "trust_correct": (m.get("identity_fields") or {}).get("trust_correct", (m.get("config") or {}).get(
            "trust_correct")),
        "rollouts": rollouts,
        # continuations that ended with no final answer (counted as incorrect), and their share of rollouts;
        # None for a corpus written before schema version 2 (no mc_no_answer column)
        "no_answer": no_answer if has_no_answer else None,
        "no_answer_rate": (no_answer / rollouts) if has_no_answer and rollouts else None,
        # continuations whose answer the grader could not read (failures by default: --unreadable), of all the
        # continuations counted at some prefix (own and reused); None before schema 4
        "unreadable": unreadable if has_unreadable else None,
        "unreadable_rate": (unreadable / counted) if has_unreadable and counted else None,
        "rollout_tokens": tokens,
        "rollouts_per_solution": (rollouts / n) if n else None,
        # steps of right-answer solutions whose every continuation missed the gold answer (see the helper); None
        # when no such step was probed (right answers trusted without rollouts)
        "dead_right_prefixes": ({"probed": probed_right, "dead": dead_right, "solutions": dead_right_solutions,
                                 "rate": dead_right / probed_right} if probed_right else None),
        # solutions the completer could not reach (docs/labels.md, "Reach gating"): with --reach-gate, the rows
        # whose bare problem (if drawn) and every probed prefix had 0 of K (label_status unreached, no claim about their
        # steps); in any corpus, the rows whose first step was sampled and had 0 of K, where a Monte Carlo label
        # reads "step 1 is wrong" whatever the steps say
        "unreached": {"gated": gated, "rows": unreached if gated else None,
                      "right_answer": unreached_right if gated else None,
                      "first_step_probed": first_probed, "first_step_dead": first_dead},
        "versions": [h["version"] for h in m.get("history", [])],
    }


def _first_step_dead(correct, total) -> tuple[int, int]:
    """In one batch: the rows whose first step's prefix got continuations, and those of them none of which
    reached the gold answer."""
    import numpy as np
    import pyarrow.compute as pc

    row_of = pc.list_parent_indices(total).to_numpy(zero_copy_only=False)
    if not len(row_of):
        return 0, 0
    t = total.flatten().to_numpy(zero_copy_only=False)
    c = correct.flatten().to_numpy(zero_copy_only=False)
    first = np.ones(len(row_of), dtype=bool)  # each row's first step
    first[1:] = row_of[1:] != row_of[:-1]
    keep = first & (t > 0)
    return int(keep.sum()), int((keep & (c == 0)).sum())


def _dead_prefixes_of_right_answers(correct, total, right) -> tuple[int, int, int]:
    """In one batch (its ``mc_correct`` and ``mc_total`` columns; ``right``: which rows' final answer is right):
    the probed steps (continuations counted) of right-answer solutions, how many of them had not one
    continuation reach the gold answer, and in how many solutions. The solution itself
    went on from each such prefix to the right answer, so a dead one is (mostly) the completer failing where a
    path exists: hard labels call that step wrong. A high rate says the completer is too weak for these
    problems, and the labels read its limits (docs/labels.md)."""
    import numpy as np
    import pyarrow.compute as pc

    row_of = pc.list_parent_indices(total).to_numpy(zero_copy_only=False)  # the row of each flattened step
    t = total.flatten().to_numpy(zero_copy_only=False)
    c = correct.flatten().to_numpy(zero_copy_only=False)
    keep = right[row_of] & (t > 0)
    dead = keep & (c == 0)
    return int(keep.sum()), int(dead.sum()), len(np.unique(row_of[dead]))
