"""Where judgments live and how they are read (:mod:`pipeline.judge` says what a judge run does):
``OUT/judge/<judge-id>/`` (judge.json, checksummed parts), the per-judge summary against MC's first error, and
``export --consensus``'s filter."""

from __future__ import annotations

import hashlib
import io
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from pipeline.errors import FatalError
from pipeline.judge.reply import OK, TOO_LONG

JUDGE_DIR = "judge"
JUDGE_META = "judge.json"
JUDGE_SCHEMA_VERSION = 1

# the reasons export counts in ``skipped`` for the rows --consensus drops
DROP_DISAGREE = "consensus: judge disagrees with MC"
DROP_NULL = "consensus: judge reply unparseable"
DROP_TOO_LONG = "consensus: prompt too long for the judge"
DROP_MISSING = "consensus: not judged"

JUDGE_COLUMNS = ["key", "id", "corpus_version", "n_steps", "judge_first_error", "status", "votes", "replies",
                 "mc_first_error", "generated_tokens"]


class JudgeError(FatalError, ValueError):
    """A judge option, a judge folder or a judge part that cannot be used; the message says what to do."""


def judge_schema():
    import pyarrow as pa

    return pa.schema([
        pa.field("key", pa.string(), nullable=False),  # the corpus row's content key
        pa.field("id", pa.string(), nullable=False),
        pa.field("corpus_version", pa.int32(), nullable=False),  # the version that was judged
        pa.field("n_steps", pa.int32(), nullable=False),
        pa.field("judge_first_error", pa.int32(), nullable=True),  # -1: no error; null: see status
        pa.field("status", pa.string(), nullable=False),
        pa.field("votes", pa.list_(pa.int32()), nullable=False),  # one parsed index per sample (null: unparseable)
        pa.field("replies", pa.list_(pa.string()), nullable=False),  # the raw replies
        pa.field("mc_first_error", pa.int32(), nullable=False),  # MC's first_error when judged (provenance)
        pa.field("generated_tokens", pa.int64(), nullable=False),
    ], metadata={b"mcprm_judge_schema_version": str(JUDGE_SCHEMA_VERSION).encode()})


def check_judge_id(judge_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", judge_id or ""):
        raise JudgeError(f"judge id {judge_id!r} must be letters, digits, '.', '_' or '-' (a folder name)")
    return judge_id


# ------------------------------------------------------------------------------------------------ storage
_PART = re.compile(r"part-(\d{5,})\.parquet$")


def judge_url(url: str, judge_id: str) -> str:
    return url.rstrip("/") + f"/{JUDGE_DIR}/{judge_id}"


def open_store(url: str):
    from pipeline.storage.store import CorpusStore

    return CorpusStore(url)


def list_judges(url: str) -> list[str]:
    """The judge ids of the corpus at ``url`` (folders of ``OUT/judge`` with a ``judge.json``)."""
    store = open_store(url)
    try:
        names = store.fs.ls(store.path(JUDGE_DIR), detail=False)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        b = posixpath.basename(n.rstrip("/"))
        if store.exists(f"{JUDGE_DIR}/{b}/{JUDGE_META}"):
            out.append(b)
    return sorted(out)


def resolve_judge(url: str, judge_id: str | None) -> str:
    """A judge id that exists at ``url``: ``judge_id`` itself, or (None / "auto") the only judge there."""
    judges = list_judges(url)
    if judge_id in (None, "", "auto"):
        if len(judges) == 1:
            return judges[0]
        if not judges:
            raise JudgeError(f"{url} has no judge results ({url}/{JUDGE_DIR}/ is empty); run `mcprm judge {url} "
                             "--backend ... --model ...` first")
        raise JudgeError(f"{url} has several judges ({', '.join(judges)}); name one")
    check_judge_id(judge_id)
    if judge_id not in judges:
        have = f"judges there: {', '.join(judges)}" if judges else "it has none yet"
        raise JudgeError(f"no judge {judge_id!r} at {url}/{JUDGE_DIR}/ ({have}); run `mcprm judge {url} --judge-id "
                         f"{judge_id} --backend ... --model ...` first")
    return judge_id


def part_names(jstore) -> list[tuple[int, str]]:
    try:
        names = jstore.fs.ls(jstore.root, detail=False)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        m = _PART.fullmatch(posixpath.basename(n))
        if m:
            out.append((int(m.group(1)), posixpath.basename(n)))
    return sorted(out)


def load_part(jstore, name: str, columns: list[str] | None = None):
    """A part, checked against its checksum sidecar (size, sha256, schema, rows); JudgeError naming it else."""
    import pyarrow.parquet as pq

    from pipeline.storage.store import sidecar_rel

    uri = jstore.uri(name)
    try:
        side = jstore.read_json(sidecar_rel(name))
    except RuntimeError:
        side = None
    if not isinstance(side, dict) or "sha256" not in side:
        raise JudgeError(f"judge part {uri} has no readable checksum ({sidecar_rel(name)})")
    data = jstore.read_bytes(name)
    if len(data) != int(side.get("bytes", -1)) or hashlib.sha256(data).hexdigest() != side["sha256"]:
        raise JudgeError(f"judge part {uri} does not match its checksum (truncated or corrupted)")
    try:
        t = pq.read_table(io.BytesIO(data), use_threads=False)
    except Exception as e:  # noqa: BLE001 - ArrowInvalid, ZSTD errors
        raise JudgeError(f"judge part {uri} is unreadable ({type(e).__name__}: {e})") from None
    if not t.schema.equals(judge_schema(), check_metadata=False) or t.num_rows != int(side.get("rows", -1)):
        raise JudgeError(f"judge part {uri} does not have the judge schema or its recorded rows")
    return t.select(columns) if columns else t


def key64(key: str) -> int:
    """A content key as a 64-bit int (keys are 16 hex digits; anything else is hashed)."""
    if len(key) == 16:
        try:
            return int(key, 16)
        except ValueError:
            pass
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


class Judgments:
    """A judge's answers by content key, held as two sorted numpy arrays (12 bytes a judged row); a null index is
    :attr:`NULL` (unparseable, out of range, no majority) or :attr:`TOO_LONG` (the prompt was not sent)."""

    NULL = -(2**31)
    TOO_LONG = -(2**31) + 1

    def __init__(self, keys: Iterable[int], index: Iterable[int | None], status: Iterable[str] | None = None):
        import numpy as np

        k = np.fromiter(keys, dtype=np.uint64)
        st = status if status is not None else iter(lambda: OK, None)
        v = np.fromiter(((self.TOO_LONG if s == TOO_LONG else self.NULL) if i is None else i
                         for i, s in zip(index, st)), dtype=np.int32, count=len(k))
        k, first = np.unique(k, return_index=True)  # sorted; a key in two parts keeps its first judgment
        self.keys, self.index = k, v[first]

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, keys: Sequence[str]):
        """(found mask, index array with NULL where null) for ``keys``."""
        import numpy as np

        q = np.fromiter((key64(k) for k in keys), dtype=np.uint64, count=len(keys))
        pos = np.searchsorted(self.keys, q)
        pos_c = np.minimum(pos, max(len(self.keys) - 1, 0))
        found = (pos < len(self.keys)) & (self.keys[pos_c] == q) if len(self.keys) else np.zeros(len(q), bool)
        idx = np.where(found, self.index[pos_c] if len(self.keys) else self.NULL, self.NULL)
        return found, idx


def load_judgments(url: str, judge_id: str) -> Judgments:
    """Every judgment of ``judge_id`` at ``url``, each part checked against its checksum."""
    jstore = open_store(judge_url(url, judge_id))
    keys: list[int] = []
    idx: list[int | None] = []
    status: list[str] = []
    for _, name in part_names(jstore):
        t = load_part(jstore, name, ["key", "judge_first_error", "status"])
        keys.extend(key64(k) for k in t.column("key").to_pylist())
        idx.extend(t.column("judge_first_error").to_pylist())
        status.extend(t.column("status").to_pylist())
    return Judgments(keys, idx, status)


def judge_meta(url: str, judge_id: str) -> dict:
    m = open_store(judge_url(url, judge_id)).read_json(JUDGE_META)
    if not isinstance(m, dict):
        raise JudgeError(f"{judge_url(url, judge_id)}/{JUDGE_META} is missing")
    return m


def verify_judges(url: str) -> tuple[list[str], dict]:
    """Check every part of every judge at ``url`` against its checksum. (problems, {judge id: rows})."""
    problems: list[str] = []
    rows: dict[str, int] = {}
    for jid in list_judges(url):
        jstore = open_store(judge_url(url, jid))
        rows[jid] = 0
        seen: set[str] = set()
        for _, name in part_names(jstore):
            try:
                t = load_part(jstore, name, ["key"])
            except JudgeError as e:
                problems.append(f"{e}; fix: rerun `mcprm judge {url} --judge-id {jid} ...` (it judges that part's "
                                "rows again)")
                continue
            keys = t.column("key").to_pylist()
            dup = seen.intersection(keys)
            if dup:
                problems.append(f"judge part {jstore.uri(name)} repeats {len(dup)} solution(s) of an earlier part")
            seen.update(keys)
            rows[jid] += len(keys)
    return problems, rows


# ------------------------------------------------------------------------------------------------ summary
def judge_summary(url: str, judge_id: str, version: int | None = None) -> dict:
    """How a judge's answers compare with MC's ``first_error`` on the rows of a corpus version: judged, not
    judged, agree / disagree (and how: judge earlier / later / no error / an error where MC has none),
    unparseable (null: unparseable, out of range, no majority), and the agreement rate (agree / (agree +
    disagree)) and its share of all judged rows."""
    import numpy as np

    from pipeline.corpus import iter_corpus, open_manifest

    judge_id = resolve_judge(url, judge_id)
    _, m = open_manifest(url, version)
    j = load_judgments(url, judge_id)
    c = Counter()
    for b in iter_corpus(url, m["version"], ["key", "first_error"]):
        found, idx = j.lookup(b.column("key").to_pylist())
        fe = b.column("first_error").to_numpy(zero_copy_only=False).astype(np.int64)
        c["rows"] += len(fe)
        c["not_judged"] += int((~found).sum())
        null = found & (idx == Judgments.NULL)
        long = found & (idx == Judgments.TOO_LONG)
        c["unparseable"] += int(null.sum())
        c["too_long"] += int(long.sum())
        ok = found & ~null & ~long
        agree = ok & (idx == fe)
        c["agree"] += int(agree.sum())
        c["agree_no_error"] += int((agree & (fe == -1)).sum())
        dis = ok & ~agree
        c["disagree"] += int(dis.sum())
        c["judge_no_error_mc_error"] += int((dis & (idx == -1)).sum())
        c["judge_error_mc_no_error"] += int((dis & (fe == -1)).sum())
        both = dis & (idx != -1) & (fe != -1)
        c["judge_earlier"] += int((both & (idx < fe)).sum())
        c["judge_later"] += int((both & (idx > fe)).sum())
    decided = c["agree"] + c["disagree"]
    judged = decided + c["unparseable"] + c["too_long"]
    meta = judge_meta(url, judge_id)
    statuses: Counter = Counter()
    jstore = open_store(judge_url(url, judge_id))
    for _, name in part_names(jstore):
        statuses.update(load_part(jstore, name, ["status"]).column("status").to_pylist())
    return {"judge_id": judge_id, "model": meta.get("model"), "version": m["version"], "rows": c["rows"],
            "judged": judged, "not_judged": c["not_judged"], "agree": c["agree"],
            "agree_no_error": c["agree_no_error"], "disagree": c["disagree"], "unparseable": c["unparseable"],
            "too_long": c["too_long"],
            "agreement_rate": c["agree"] / decided if decided else None,
            "agreement_rate_of_judged": c["agree"] / judged if judged else None,
            "disagreement": {k: c[k] for k in ("judge_earlier", "judge_later", "judge_no_error_mc_error",
                                               "judge_error_mc_no_error")},
            "statuses_all_parts": dict(sorted(statuses.items()))}


def judge_summaries(url: str, version: int | None = None) -> list[dict]:
    """:func:`judge_summary` of every judge of the corpus (empty without judges)."""
    return [judge_summary(url, jid, version) for jid in list_judges(url)]


# ------------------------------------------------------------------------------------------------ consensus
class ConsensusFilter:
    """``export --consensus``: keeps a corpus row only when the judge's first-error index equals MC's
    ``first_error`` (both -1 agree). Built before anything is written (an unknown judge id is a JudgeError);
    :meth:`batches` filters a stream of corpus record batches (they need :attr:`columns`)."""

    columns = ["key", "first_error"]

    def __init__(self, url: str, judge_id: str | None):
        self.judge_id = resolve_judge(url, judge_id)
        self.judgments = load_judgments(url, self.judge_id)
        self.kept = 0
        self.dropped: Counter = Counter()

    def mask(self, batch):
        """(keep mask, {reason: rows dropped}) of one record batch."""
        import numpy as np

        found, idx = self.judgments.lookup(batch.column("key").to_pylist())
        fe = batch.column("first_error").to_numpy(zero_copy_only=False).astype(np.int64)
        null = found & (idx == Judgments.NULL)
        long = found & (idx == Judgments.TOO_LONG)
        keep = found & ~null & ~long & (idx == fe)
        why = {DROP_MISSING: int((~found).sum()), DROP_NULL: int(null.sum()), DROP_TOO_LONG: int(long.sum()),
               DROP_DISAGREE: int((found & ~null & ~long & ~keep).sum())}
        return keep, {k: n for k, n in why.items() if n}

    def batches(self, batches: Iterable, counts: dict | None = None) -> Iterator:
        """``batches`` with the disagreeing, null and unjudged rows taken out. ``counts`` (export's: ``skipped``
        and ``corpus_rows``) gets the rows dropped, so that rows + sum(skipped) == corpus_rows still holds."""
        import pyarrow as pa

        for b in batches:
            keep, why = self.mask(b)
            kept = int(keep.sum())
            if counts is not None:
                self.kept += kept
                self.dropped.update(why)
                counts["corpus_rows"] = counts.get("corpus_rows", 0) + b.num_rows - kept
                sk = counts.setdefault("skipped", {})
                for k, n in why.items():
                    sk[k] = sk.get(k, 0) + n
            yield b if kept == b.num_rows else b.filter(pa.array(keep))
