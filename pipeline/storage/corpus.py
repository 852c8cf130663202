"""Reading a labeled corpus: always through its manifest (a consistent snapshot), never by globbing."""

from __future__ import annotations

from collections import Counter

from pipeline.errors import FatalError
from pipeline.storage.store import CorpusStore


class CorpusError(FatalError, ValueError):
    pass


def open_manifest(url: str, version: int | None = None) -> tuple[CorpusStore, dict]:
    from pipeline.storage.integrity import ManifestError, current_manifest

    store = CorpusStore(url)
    try:
        m = current_manifest(store) if version is None else store.version_manifest(version)
    except (ManifestError, RuntimeError) as e:
        raise CorpusError(str(e)) from None
    if m is None:
        if version is None:
            raise CorpusError(f"{url} is not an mcprm corpus (no manifest.json). Run `mcprm label --output {url}` first.")
        raise CorpusError(f"{url} has no version {version} (pruned, or never committed); versions: {store.versions()}")
    return store, m


def shard_uris(url: str, version: int | None = None) -> list[str]:
    """Full URLs of the shards of a version, e.g. for ``datasets.load_dataset("parquet", data_files=...)``."""
    store, m = open_manifest(url, version)
    return [store.uri(s["path"]) for s in m["shards"]]


def read_corpus(url: str, version: int | None = None, columns: list[str] | None = None, verify: bool = False):
    """The whole corpus of a version as one pyarrow Table (current version by default).

    Every shard's size is checked against the manifest on local disk (cheap); ``verify=True`` reads every
    shard whole and checks its sha256, schema and row count first. A damaged shard raises CorpusError naming
    the file (and ``mcprm verify``), never a bare Arrow error."""
    import pyarrow as pa

    from pipeline.storage.schema import arrow_schema
    from pipeline.storage.store import ShardError

    store, m = open_manifest(url, version)
    tables = []
    for s in m["shards"]:
        try:
            if verify:
                from pipeline.storage.integrity import load_shard

                t = load_shard(store, s["path"], s, m.get("schema_version") or 1)
                tables.append(t.select(columns) if columns else t)
                continue
            if store.local and "bytes" in s:
                size = store.size(s["path"])
                if size != int(s["bytes"]):
                    raise ShardError(f"shard {store.uri(s['path'])} "
                                     + ("is missing" if size is None else
                                        f"has {size} bytes, the manifest says {s['bytes']} (truncated or replaced)"))
            tables.append(store.read_table(s["path"], columns=columns))
        except ShardError as e:
            raise CorpusError(f"{e}. `mcprm verify {url}` lists every damaged file and the command that repairs "
                              "it.") from None
    if not tables:
        schema = arrow_schema()
        if columns:
            schema = pa.schema([schema.field(c) for c in columns])
        return schema.empty_table()
    return pa.concat_tables(tables)


def _has_column(store: CorpusStore, m: dict, name: str) -> bool:
    """Whether the shards of a version have column ``name`` (shards of one version share one schema)."""
    import pyarrow.parquet as pq

    if not m["shards"]:
        return True
    rel = m["shards"][0]["path"]
    try:
        with store.fs.open(store.path(rel), "rb") as f:
            return name in pq.read_schema(f).names
    except Exception as e:  # missing, truncated, corrupt footer
        raise CorpusError(f"shard {store.uri(rel)} is unreadable ({type(e).__name__}: {e}). `mcprm verify "
                          f"{store.url}` lists every damaged file and the command that repairs it.") from None


def corpus_stats(url: str, version: int | None = None, verify: bool = False) -> dict:
    store, m = open_manifest(url, version)
    # mc_no_answer exists from schema version 2 on; an older corpus reports its no-answer count as unknown.
    has_no_answer = _has_column(store, m, "mc_no_answer")
    t = read_corpus(url, version, verify=verify, columns=["steps", "labels", "mc_value", "first_error", "solution_correct",
                                           "rollouts", "rollout_tokens", "strategy"]
                    + (["mc_no_answer"] if has_no_answer else []))
    labels = t.column("labels").to_pylist()
    fe = t.column("first_error").to_pylist()
    sc = t.column("solution_correct").to_pylist()
    pos = sum(1 for ls in labels for x in ls if x is True)
    neg = sum(1 for ls in labels for x in ls if x is False)
    unl = sum(1 for ls in labels for x in ls if x is None)
    n = t.num_rows
    steps = sum(len(ls) for ls in labels)
    right_wrong = sum(1 for c, f in zip(sc, fe) if c is True and f != -1)
    rollouts = int(sum(t.column("rollouts").to_pylist()))
    no_answer = (sum(x for xs in t.column("mc_no_answer").to_pylist() for x in xs if x) if has_no_answer
                 else None)
    return {
        "output": url,
        "version": m["version"],
        "strategy": m.get("strategy"),
        "k": m.get("k"),
        "solutions": n,
        "steps": steps,
        "labels": {"positive": pos, "negative": neg, "unlabeled": unl},
        "positive_rate": pos / (pos + neg) if pos + neg else None,
        "solutions_with_error": sum(1 for f in fe if f != -1),
        "first_error_histogram": dict(sorted(Counter(f for f in fe if f != -1).items())),
        "solution_correct_rate": (sum(1 for c in sc if c) / n) if n else None,
        "right_answer_wrong_process": right_wrong,
        "rollouts": rollouts,
        # continuations that ended with no final answer (counted as incorrect), and their share of rollouts;
        # None for a corpus written before schema version 2 (no mc_no_answer column)
        "no_answer": no_answer,
        "no_answer_rate": (no_answer / rollouts) if no_answer is not None and rollouts else None,
        "rollout_tokens": int(sum(t.column("rollout_tokens").to_pylist())),
        "rollouts_per_solution": (sum(t.column("rollouts").to_pylist()) / n) if n else None,
        "versions": [h["version"] for h in m.get("history", [])],
    }
