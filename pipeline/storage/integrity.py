"""Integrity of a corpus: checksummed shards, manifest recovery, and ``mcprm verify``.

* Every shard is written with a checksum sidecar first (``part-00000.sum.json``: bytes, sha256, rows), then
  the shard; a committed version's manifest (and ``versions/vNNNNN.json``) lists ``bytes`` and ``sha256`` of
  every shard. Resume and refresh verify every shard they keep in full (size, sha256, readable with the
  declared schema, rows) and label again what fails.
* ``manifest.json`` is only a copy of the newest ``versions/vNNNNN.json``; when it is missing, unreadable, or
  behind the newest version file (a run killed between the two writes), it is recovered from the newest
  intact version file, never restarted as version 1.
* What counts is the same for readers, ``label`` and ``verify``: the newest intact version file that is not
  a fence (``pipeline.storage.store``: a number a takeover claimed so that an owner that lost its lock cannot
  commit it).
* :func:`verify_corpus` checks every version's manifest and shards and the label invariants, and names the
  command that repairs each problem.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from dataclasses import dataclass

from pipeline.errors import FatalError
from pipeline.storage.store import CorpusStore, ShardError, sidecar_rel
from pipeline.storage.versions import MANIFEST, read_version

log = logging.getLogger("mcprm")


class ManifestError(FatalError, RuntimeError):
    pass


# ------------------------------------------------------------------ shards
def _expected_schema(schema_version: int | None):
    import pyarrow as pa

    from pipeline.storage.schema import ADDED_IN, arrow_schema

    s = arrow_schema()
    v = schema_version or 2
    return pa.schema([f for f in s if ADDED_IN.get(f.name, 1) <= v])


def load_shard(store: CorpusStore, rel: str, expect: dict | None = None, schema_version: int | None = None,
               data: bytes | None = None):
    """Read the whole shard and check it: present, ``bytes`` and ``sha256`` as expected (when given),
    readable, exactly the declared schema, ``rows`` as expected. Returns the table; raises ShardError naming
    the file and what is wrong. ``data``: the shard's bytes, already read."""
    import pyarrow.parquet as pq

    uri = store.uri(rel)
    expect = expect or {}
    if data is None:
        size = store.size(rel)
        if size is None:
            raise ShardError(f"shard {uri} is missing")
        if "bytes" in expect and size != int(expect["bytes"]):
            raise ShardError(f"shard {uri} has {size} bytes, the manifest says {expect['bytes']} (truncated or "
                             "replaced)")
        try:
            data = store.read_bytes(rel)
        except FileNotFoundError:
            raise ShardError(f"shard {uri} is missing") from None
    if "bytes" in expect and len(data) != int(expect["bytes"]):
        raise ShardError(f"shard {uri} has {len(data)} bytes, the manifest says {expect['bytes']} (truncated or "
                         "replaced)")
    if "sha256" in expect and hashlib.sha256(data).hexdigest() != expect["sha256"]:
        raise ShardError(f"shard {uri} does not match its sha256 checksum (corrupted on storage)")
    try:
        table = pq.read_table(io.BytesIO(data), use_threads=False)
    except Exception as e:  # ArrowInvalid, ZSTD errors, ...
        raise ShardError(f"shard {uri} is unreadable ({type(e).__name__}: {e})") from None
    want = _expected_schema(schema_version)
    if not table.schema.equals(want, check_metadata=False):
        raise ShardError(f"shard {uri} does not have the declared corpus schema (schema version "
                         f"{schema_version or 2})")
    if "rows" in expect and table.num_rows != int(expect["rows"]):
        raise ShardError(f"shard {uri} has {table.num_rows} rows, the manifest says {expect['rows']}")
    return table


def check_labels(table, uri: str) -> list[str]:
    """Label invariants of every row; a list of problems (empty when all hold)."""
    cols = {c: table.column(c).to_pylist() for c in ("key", "steps", "labels", "mc_correct", "mc_total",
                                                   "mc_ungradable", "mc_value", "first_error")
            if c in table.column_names}
    na = table.column("mc_no_answer").to_pylist() if "mc_no_answer" in table.column_names else None
    out: list[str] = []
    for i, steps in enumerate(cols["steps"]):
        n = len(steps)
        bad = []
        for c in ("labels", "mc_correct", "mc_total", "mc_ungradable", "mc_value"):
            if len(cols[c][i]) != n:
                bad.append(f"len({c}) {len(cols[c][i])} != len(steps) {n}")
        if na is not None and len(na[i]) != n:
            bad.append(f"len(mc_no_answer) {len(na[i])} != len(steps) {n}")
        if not bad:
            for j in range(n):
                c, t, u = cols["mc_correct"][i][j], cols["mc_total"][i][j], cols["mc_ungradable"][i][j]
                a = na[i][j] if na is not None else 0
                if min(c, t, u, a) < 0 or c > t or a + u > t or c + a + u > t:
                    bad.append(f"step {j + 1}: mc_correct {c}, mc_no_answer {a}, mc_ungradable {u}, mc_total {t}")
                    break
                v = cols["mc_value"][i][j]
                if v is not None and not (0.0 <= v <= 1.0):
                    bad.append(f"step {j + 1}: mc_value {v} outside [0, 1]")
                    break
            fe = cols["first_error"][i]
            labels = cols["labels"][i]
            if fe != -1 and not (0 <= fe < n and labels[fe] is False):  # steps named from 1, as users count
                at = f"step {fe + 1}" if 0 <= fe < n else f"no step of the {n}"
                bad.append(f"first_error {fe} (0-based: {at}) is not a negative step")
        if bad:
            out.append(f"{uri} row {i} (key {cols['key'][i]}): " + "; ".join(bad[:3]))
        if len(out) >= 5:
            out.append(f"{uri}: more rows break label invariants")
            break
    return out


def shard_counts(table, side: dict | None) -> dict:
    """A finished shard's counters as the run that labeled it reported them: from its sidecar, else (sidecars
    of older runs, written without counters) what the rows hold: steps, rollouts and tokens."""
    import pyarrow.compute as pc

    out = {"steps": int(pc.sum(pc.list_value_length(table.column("steps"))).as_py() or 0),
           "rollouts": int(pc.sum(table.column("rollouts")).as_py() or 0),
           "rollout_tokens": int(pc.sum(table.column("rollout_tokens")).as_py() or 0)}
    counts = (side or {}).get("counts")
    if isinstance(counts, dict):
        out.update({k: v for k, v in counts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def kept_shard(store: CorpusStore, rel: str, keys: list[str], into: str | None = None) -> dict | None:
    """An unfinished run's shard, verified in full against its checksum sidecar (written before the shard)
    and the plan's keys. Returns its result entry, or None (missing, no or bad sidecar, corrupt, truncated,
    other keys, other schema): then it is labeled again.

    ``into``: this owner's name for the shard. A shard another owner wrote (a run that was killed or lost its
    lock) is adopted by writing the very bytes verified here under ``into``, never by recording the other
    owner's file: that owner's writes still in flight can then never change what this run records."""
    from pipeline.storage.schema import SCHEMA_VERSION

    if store.size(rel) is None:
        return None
    try:
        side = store.read_json(sidecar_rel(rel))
    except RuntimeError:
        side = None
    try:
        if not side:
            raise ShardError(f"shard {store.uri(rel)} has no checksum sidecar (killed while writing it)")
        try:
            data = store.read_bytes(rel)
        except FileNotFoundError:
            return None
        table = load_shard(store, rel, side, SCHEMA_VERSION, data=data)
        written_by = (table.schema.metadata or {}).get(b"mcprm_schema_version", b"").decode()
        if written_by != str(SCHEMA_VERSION):  # an unfinished run of an older mcprm (other schema)
            raise ShardError(f"shard {store.uri(rel)} was written with schema version {written_by or '?'}")
        quarantined = {r.get("key") for r in side.get("rejects") or []}  # rows its worker failed on (--skip-bad)
        if table.column("key").to_pylist() != [k for k in keys if k not in quarantined]:
            raise ShardError(f"shard {store.uri(rel)} holds other solutions than the plan")
        bad = check_labels(table, store.uri(rel))
        if bad:
            raise ShardError(bad[0])
    except ShardError as e:
        log.warning("%s: labeling it again", e)
        if into is None or rel == into:
            store.delete(rel)
        return None
    counts = shard_counts(table, side)
    path = rel
    if into is not None and into != rel:
        store.write_shard_bytes(into, data, table.num_rows, side.get("counts"), keys=table.column("key").to_pylist(),
                                extra={k: side[k] for k in ("rejects",) if k in side})
        path = into  # the other owner's file stays as it is until the commit removes it (that owner may still read it)
    return {**counts, "shard": None, "path": path, "rows": table.num_rows, "resumed": True,
            "bytes": int(side["bytes"]), "sha256": side["sha256"],
            **({"rejects": side["rejects"]} if side.get("rejects") else {})}


def key_numbers(keys):
    """Content keys (16 hex digits) as a sorted numpy uint64 array without repeats: 8 bytes a key, for
    :func:`pipeline.input.reading.iter_keyed_solutions`' ``known``."""
    import numpy as np

    return np.unique(np.fromiter((int(k, 16) for k in keys), np.uint64))


def base_keys(store: CorpusStore, manifest: dict):
    """Keys of a committed version's shards, each shard verified in full (size, sha256 where recorded,
    schema, rows). Returns (keys of the good shards as a sorted numpy uint64 array, 8 bytes a key:
    :func:`key_numbers`; manifest entries of the bad ones)."""
    import numpy as np

    keys = [np.empty(0, np.uint64)]
    bad: list[dict] = []
    for sh in manifest["shards"]:
        try:
            t = load_shard(store, sh["path"], sh, manifest.get("schema_version") or 1)
        except ShardError as e:
            log.warning("%s; its rows are labeled again where the input still has them", e)
            bad.append(sh)
            continue
        keys.append(key_numbers(t.column("key").to_pylist()))
    return np.unique(np.concatenate(keys)), bad


def damaged_keys(store: CorpusStore, sh: dict) -> list[str] | None:
    """The keys of a damaged shard's rows, or None when nothing tells them: its checksum sidecar (it lists
    them, and its sha256 is the manifest's), else the shard's key column where that still reads whole."""
    try:
        side = store.read_json(sidecar_rel(sh["path"]))
    except (RuntimeError, OSError):
        side = None
    if (isinstance(side, dict) and isinstance(side.get("keys"), list)
            and side.get("sha256") == sh.get("sha256", side.get("sha256"))
            and len(side["keys"]) == int(sh.get("rows", len(side["keys"])))):
        return [str(k) for k in side["keys"]]
    try:
        keys = store.read_table(sh["path"], columns=["key"]).column("key").to_pylist()
    except (ShardError, KeyError):
        return None
    if len(keys) != int(sh.get("rows", -1)) or not all(isinstance(k, str) and len(k) == 16 for k in keys):
        return None
    return keys


def verified_base(store: CorpusStore, base: dict | None):
    """The base version with its damaged shards left out (their rows are labeled again where the input still
    holds them), and its content keys (a sorted numpy uint64 array, None without a base). ``base["_damaged"]``:
    per damaged shard its manifest entry and its keys (None: unknown), for the check that no row is dropped
    unasked (``pipeline.run``)."""
    if not base:
        return base, None
    keys, bad = base_keys(store, base)
    if bad:
        base = dict(base, shards=[s for s in base["shards"] if s not in bad],
                    _damaged=[{"shard": s, "keys": damaged_keys(store, s)} for s in bad])
    return base, keys


# ------------------------------------------------------------------ manifests

def newest_intact_version(store: CorpusStore) -> dict | None:
    for v in reversed(store.versions()):
        m = read_version(store, v)
        if m is not None:
            return m
    return None


def current_manifest(store: CorpusStore, repair: bool = False, follow_newer: bool = False) -> dict | None:
    """The current manifest. ``manifest.json`` when it is intact and not behind the newest version file;
    otherwise the newest intact ``versions/vNNNNN.json``, written back as ``manifest.json`` when ``repair``
    (under the output lock), or a ManifestError naming the command that does it.

    ``follow_newer`` (readers): an intact ``manifest.json`` behind an intact newer version file, or none at all
    beside one, is a commit caught between its two writes (or a run killed, or taken over, there): the version
    file is the commit, whole, so a reader gets that version instead of an error, never a mix."""
    try:
        m = store.manifest()
        problem = None if m is None or (isinstance(m, dict) and isinstance(m.get("version"), int)) else "unreadable"
    except RuntimeError as e:
        m, problem = None, f"unreadable ({e})"
    newest = newest_intact_version(store)
    top = max(store.versions(), default=0)
    vouched = problem is None and m is not None and m["version"] >= top
    if top and (newest is None or newest["version"] < top) and not vouched and not store.is_fence(top):
        # the newest version file is unreadable and manifest.json does not hold that version: falling back to an
        # older version would pass it off as current (and a rerun would call the corpus up to date)
        rel = f"versions/v{top:05d}.json"
        said = "is unreadable" if problem else ("is missing" if m is None else f"is at version {m['version']}")
        back = (f"; or, to go back to version {newest['version']} knowingly, move {store.uri(rel)} aside and run "
                f"`mcprm verify {store.url} --repair`" if newest is not None else "")
        raise ManifestError(f"{store.uri(rel)}, the newest committed version ({top}), is unreadable, and "
                            f"{store.uri(MANIFEST)} {said}: the current version cannot be read. Restore either "
                            f"file from a backup{back}")
    if problem is None and m is not None and (newest is None or newest["version"] <= m["version"]):
        if newest is None or m["version"] not in store.versions():
            if repair:  # the version file was lost: manifest.json is the same content
                try:
                    store.create_json(f"versions/v{m['version']:05d}.json", m)
                except FileExistsError:
                    pass
        return m
    if newest is None:
        if problem:
            raise ManifestError(f"{store.uri(MANIFEST)} is {problem} and no intact versions/vNNNNN.json is left to "
                                "recover it from")
        return None
    if m is None and problem is None:
        why = "is missing"
    elif problem:
        why = f"is {problem}"
    else:
        why = (f"is at version {m['version']} but version {newest['version']} was committed (a run stopped "
               "between its two writes)")
    if follow_newer and not problem:  # behind, or missing (a commit whose copy was not written yet)
        return newest
    if not repair:
        raise ManifestError(f"{store.uri(MANIFEST)} {why}. Recover it from the newest intact version "
                            f"(version {newest['version']}) with `mcprm verify {store.url} --repair`, or rerun "
                            "`mcprm label` on this output, which does the same.")
    log.warning("%s %s: recovered from versions/v%05d.json", store.uri(MANIFEST), why, newest["version"])
    store.write_manifest(newest)  # never over a newer copy another run wrote meanwhile
    return newest


# ------------------------------------------------------------------ verify
def _key_array(keys):
    """Content keys as a numpy uint64 array, in order and with repeats (8 bytes a key)."""
    import numpy as np

    return np.fromiter((int(k, 16) for k in keys), np.uint64, len(keys))


def _duplicate_keys(shards: list[dict], shard_keys: dict) -> str | None:
    """What a version's shards hold more than once (a key in two shards, or twice in one), or None."""
    import numpy as np

    parts = [(sh["path"], shard_keys[sh["path"]]) for sh in shards if sh["path"] in shard_keys]
    if not parts:
        return None
    allk = np.concatenate([k for _, k in parts])
    uniq, counts = np.unique(allk, return_counts=True)
    dups = uniq[counts > 1]
    if not len(dups):
        return None
    first = dups[:3]
    where = []
    for d in first:
        paths = [f"{p} ({int(np.count_nonzero(k == d))}x)" if np.count_nonzero(k == d) > 1 else p
                 for p, k in parts if np.count_nonzero(k == d)]
        where.append(f"key {int(d):016x} in {', '.join(paths)}")
    return (f"{len(dups)} solution keys are held more than once: " + "; ".join(where)
            + ("; ..." if len(dups) > 3 else ""))


@dataclass
class Problem:
    where: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}\n    fix: {self.fix}"


def _label_fix(store: CorpusStore, m: dict | None) -> str:
    cfg = (m or {}).get("config") or {}
    inp = " ".join(f"--input {i}" for i in cfg.get("input") or []) or "--input ..."
    return (f"rerun the same `mcprm label {inp} --output {store.url} ...` command: it labels the damaged "
            "shard's rows again into a new version (earlier versions are never rewritten)")


def verify_corpus(url: str, full: bool = True, repair: bool = False) -> tuple[list[Problem], dict]:
    """Check every version's manifest and every shard it lists. Returns (problems, summary)."""
    from pipeline.storage.lock import corpus_lock

    store = CorpusStore(url)
    problems: list[Problem] = []
    summary = {"versions": [], "shards": 0, "rows": 0, "current": None}
    if repair:
        with corpus_lock(store):
            current_manifest(store, repair=True)
    try:
        cur = current_manifest(store)
    except ManifestError as e:
        what, sep, fix = str(e).partition(". Restore either file")
        if sep:  # the newest version cannot be read: no repair from here, a backup
            problems.append(Problem(store.uri(MANIFEST), what, "restore either file" + fix))
        else:
            problems.append(Problem(store.uri(MANIFEST), str(e).split(". Recover")[0],
                                    f"`mcprm verify {url} --repair` (restores it from the newest intact version)"))
        cur = None
    versions = store.versions()
    if cur is None and not versions and not problems:
        if store.exists(MANIFEST) or store.is_empty():
            problems.append(Problem(url, "not an mcprm corpus (no manifest.json, no versions/)",
                                    f"`mcprm label --output {url}`"))
            return problems, summary
    if cur is not None:
        summary["current"] = cur["version"]
        vm = read_version(store, cur["version"])
        if vm is None:
            problems.append(Problem(store.uri(f"versions/v{cur['version']:05d}.json"),
                                    "the current version's manifest file is missing or unreadable",
                                    f"`mcprm verify {url} --repair` (rewrites it from manifest.json)"))
        elif json.dumps(vm, sort_keys=True, default=str) != json.dumps(cur, sort_keys=True, default=str):
            problems.append(Problem(store.uri(MANIFEST), f"differs from versions/v{cur['version']:05d}.json",
                                    f"`mcprm verify {url} --repair` after checking which one is right"))
    checked: dict[str, str | None] = {}
    shard_keys: dict = {}  # path -> its keys (numpy uint64), for the duplicate check across a version's shards
    damaged_versions: list[int] = []
    latest = max(versions) if versions else 0
    summary["fenced_versions"] = []
    for v in versions:
        m = read_version(store, v)
        rel = f"versions/v{v:05d}.json"
        if m is None and store.is_fence(v):
            summary["fenced_versions"].append(v)  # a number claimed at a takeover: no version, nothing to check
            continue
        if m is None:
            problems.append(Problem(store.uri(rel), "missing or unreadable version manifest",
                                    f"restore it from a backup, or drop the version with `mcprm prune {url} --keep "
                                    f"{max(1, latest - v)}`"))
            damaged_versions.append(v)
            continue
        summary["versions"].append(v)
        rows = 0
        ok = True
        for sh in m["shards"]:
            path = sh["path"]
            if path not in checked:
                checked[path] = None
                try:
                    if full:
                        t = load_shard(store, path, sh, m.get("schema_version") or 1)
                        shard_keys[path] = _key_array(t.column("key").to_pylist())
                        bad = check_labels(t, store.uri(path))
                        if bad:
                            checked[path] = "label invariants broken: " + bad[0]
                    else:
                        size = store.size(path)
                        if size is None:
                            raise ShardError(f"shard {store.uri(path)} is missing")
                        if "bytes" in sh and size != int(sh["bytes"]):
                            raise ShardError(f"shard {store.uri(path)} has {size} bytes, the manifest says "
                                             f"{sh['bytes']}")
                except ShardError as e:
                    checked[path] = str(e)
                if "sha256" not in sh and checked[path] is None and full:
                    pass  # written before checksums were recorded: size, schema, rows and labels still checked
            if checked[path] is not None:
                ok = False
                fix = (_label_fix(store, m) if cur is not None and v == cur["version"]
                       else f"`mcprm prune {url} --keep {max(1, latest - v)}` drops version {v} and older "
                            "(or restore the file from a backup)")
                problems.append(Problem(f"version {v}", checked[path], fix))
            rows += int(sh.get("rows", 0))
        if full and ok:
            dup = _duplicate_keys(m["shards"], shard_keys)
            if dup:
                problems.append(Problem(
                    f"version {v}", dup,
                    "readers see these solutions more than once; label the input into a new output "
                    f"(`mcprm label ... --output NEW`), then replace {url} with it (or restore it from a backup)"))
                ok = False
        if m.get("counts", {}).get("solutions") not in (None, rows):
            problems.append(Problem(store.uri(rel), f"counts.solutions {m['counts']['solutions']} != sum of shard "
                                    f"rows {rows}", "restore it from a backup"))
        if not ok:
            damaged_versions.append(v)
    if cur is not None:
        from pipeline.storage.leftovers import find, recorded_paths

        extra = find(store, cur["version"], recorded_paths(store))
        summary["uncommitted_files"] = extra
        for rel in extra:
            problems.append(Problem(store.uri(rel), "a file no committed version records (an uncommitted shard or "
                                    "leftover of a killed, retried or fenced attempt): a reader that globs "
                                    "data/**/*.parquet reads it too", f"`mcprm prune {url}` removes it"))
    summary["shards"] = len(checked)
    summary["rows"] = sum(int(s.get("rows", 0)) for s in (cur or {}).get("shards", []))
    summary["damaged_versions"] = damaged_versions
    return problems, summary
