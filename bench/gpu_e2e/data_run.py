"""The data run's plan, state and file handling (bench/gpu_e2e/README.md, "The data run"), without heavy imports:
it runs on this machine (``prepare``, ``next``, ``land``, ``status``) and on the GPU machine, called by
``data_run.sh`` (``pack``, ``input``, ``chunk``, ``version-of``, ``estimate``, ``put-part``).

    python bench/gpu_e2e/data_run.py prepare [--gguf /tmp/tm/model.gguf]   the carried folders (.xfer/data_run, model parts)
    python bench/gpu_e2e/data_run.py next [--minutes 30]                   the device calls to make next
    python bench/gpu_e2e/data_run.py land FILES_AT                         a call's $OUT into results/data_run, STATE.json
    python bench/gpu_e2e/data_run.py status                                what is done, what is left

Everything the run must keep lives in ``bench/gpu_e2e/results/data_run/`` (committed, so it travels with the
working tree to the next machine): the generated chunks, each corpus's latest packed state, each row's results,
and ``STATE.json`` (the pinned code and what is done). The device decides what is left from the files it has
(the tree's results plus what this warm machine made), never from a clock or a guess.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = Path(os.environ.get("DR_RESULTS", HERE / "results" / "data_run"))
STATE = "STATE.json"
MiB = 1 << 20

# What comes back from one device call ($OUT) and what one call may carry: the limits of the lent machine
# (/work/.library/device/README.md). A committed file obeys the same 16 MiB, so whatever comes back can be kept.
OUT_FILES, OUT_FILE_BYTES, OUT_TOTAL_BYTES, OUT_DEPTH = 8, 16 * MiB, 64 * MiB, 2
TRAVEL_BYTES = 64 * MiB
TRAVEL_MARGIN = MiB // 2  # a stray untracked file or a grown log must not make a planned call fail
NAME_OK = re.compile(r"^[A-Za-z0-9._-]+$")

# The real model travels as parts of this size (.xfer/gguf/part.NN, one device call each): 40 MiB leaves the
# working tree 23.5 MiB beside a part, room for the run's committed corpora (the 60 MiB parts of
# REAL-MODEL.md left it 10.7 MiB, less than the tree and its results).
PART_BYTES = 40 * MiB
GGUF_BYTES = 1_117_320_768
# the converted model folder's files other than its weights (config, generation config, tokenizer, chat template),
# packed by the first set-up that ran convert.py and kept in results/: later set-ups only dequantize the weights
# (bench/gpu_e2e/convert_fast.py, the same bytes in 1/3 of the time) and the folder's fingerprint stays the same
MODEL_META = "model_meta.tgz"
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
N_PARTS = -(-GGUF_BYTES // PART_BYTES)

# Generation: chunks of problems, one `mcprm generate` each (a chunk is written whole or not at all, so a
# call cut off loses at most the chunk in flight). 4 samples per training problem, all 8 of a held-out one.
# t0000 / h0000 are the seed: /work/shared/data/dr1500 (this script's first 375 problems of each split).
CHUNKS = {  # name: (split, first problem, end, samples per problem)
    "t0000": ("train", 0, 375, 4),
    "h0000": ("heldout", 0, 375, 8),
    "t0375": ("train", 375, 1375, 4),
    "h0375": ("heldout", 375, 500, 8),
    "t1375": ("train", 1375, 2375, 4),
    "t2375": ("train", 2375, 2500, 4),
}

# Labelers: a corpus each, labeled over the first SIZE training solutions (a refresh adds the next ones: every
# size is a committed version of the same corpus, the smaller ones its earlier versions).
CORPORA = {
    "def": {"opts": "", "sizes": [1500, 3000, 5000, 10000], "what": "the defaults (binary-search K=20)"},
    # labeled by code.label-ps (fb68de3: 1.6x the pinned label code's tokens/s at per-step, results/s13), with the
    # two engines at 2,048 sequences each that s13 measured best there
    "ps": {"opts": "--strategy per-step --k 8 --max-num-seqs 2048", "sizes": [3000],
           "what": "per-step K=8 (Math-Shepherd's recipe)"},
    "nt": {"opts": "--no-trust-correct", "sizes": [3000], "what": "the defaults, right answers not trusted"},
}

# The table's rows: every PRM trained the same way (mcprm train's defaults) unless its options say otherwise;
# label quality compared at 3,000 solutions for every labeler, the defaults' data-size curve at 1,500-10,000.
ROWS = {  # name: (corpus, solutions, train options, optional)
    "def1500": ("def", 1500, "", False),
    # the defaults of code.train since it moved past 5ed3c3b (class weights, threshold 0.5), on def1500's corpus:
    # def1500 itself was trained at 5ed3c3b's defaults (no class weights)
    "now1500": ("def", 1500, "", False),
    "def3000": ("def", 3000, "", False),
    "orm3000": ("def", 3000, "--label-rule outcome", False),
    "ps3000": ("ps", 3000, "", False),
    "def5000": ("def", 5000, "", False),
    "def10000": ("def", 10000, "", False),
    # the recipe table on real text (issue 49): each row the defaults (now1500) with one change, on the same
    # corpus version; seed2_1500 is the defaults again with another training seed, the noise a one-seed
    # difference between two rows has to clear (the paired bootstrap over problems does not see it)
    "seed2_1500": ("def", 1500, "--seed 2", True),
    "sepnone1500": ("def", 1500, "--separator-init none", True),
    "chat1500": ("def", 1500, "--header-style chat", True),
    "headlr10_1500": ("def", 1500, "--head-lr-scale 10", True),
    "warmup1500": ("def", 1500, "--head-only-ratio 0.1", True),
    "tol1_1500": ("def", 1500, "--error-tolerance 1", True),
    "floor03_1500": ("def", 1500, "--solve-rate-floor 0.3", True),
    "relative1500": ("def", 1500, "--label-rule relative", True),
    "advantage1500": ("def", 1500, "--label-rule advantage", True),
    "soft1500": ("def", 1500, "--targets soft --label-rule soft", True),
    "newline1500": ("def", 1500, "--separator-init newline", True),
    "nt3000": ("nt", 3000, "", True),
    "ps3000soft": ("ps", 3000, "--targets soft", True),
    # the PRM recipe before issue 49's protocol (class weights, the outcome threshold rule, the separator's
    # embedding row left as the resize made it): the baseline the recipe table's rows are compared against
    "today1500": ("def", 1500, "--class-balance --threshold-rule outcome --separator-init none", True),
}

# Seconds on one H200 at today's speed (README, "The data run"), for the runner's "does it fit" check and
# for `next`; replaced by the run's own measurements once STATE.json has them.
EST = {
    "setup": 160.0,  # sha256, wheels, convert.py (prep: 153 s, results/stage_times.jsonl)
    "gen_start": 60.0, "gen_per_sample": 0.037,  # 2,000 samples in 135.7 s with the engine start
    "label_start": 60.0,  # engine start and input pass (dr1500: 43.3 s start, 16.8 s input)
    # dr1500; per-step at code.label-ps: 0.172 labeling GPU-s a solution on GSM8K 400 (results/s13), with margin
    "label_per_solution": {"def": 0.180, "ps": 0.22, "nt": 0.36},
    "train_fixed": 100.0, "train_per_solution": 0.031,  # 0.9 x 3 epochs x 404 tokens at 34,870 tokens/s
    "measure": 90.0,  # two loads, 4,000 + ~400 solutions at 121-190 solutions/s
    "call_overhead": 20.0,  # the transfer of the tree and of $OUT around a call
}
CALL_S = 570  # a call's own budget: the 600 s limit less the margin the runner leaves for packing
LABEL_GRACE_S = 60  # a cut label run is given this long to stop between shards

# The plumbing test runs the same code on a plan of a few bundled problems: DR_PLAN_FILE (JSON with any of
# chunks / corpora / rows) replaces those parts of the plan, DR_PROBLEMS_DIR the problem files.
if os.environ.get("DR_PLAN_FILE"):
    _p = json.loads(Path(os.environ["DR_PLAN_FILE"]).read_text())
    CHUNKS = {k: tuple(v) for k, v in _p.get("chunks", CHUNKS).items()}
    CORPORA = _p.get("corpora", CORPORA)
    ROWS = {k: tuple(v) for k, v in _p.get("rows", ROWS).items()}
PROBLEMS_DIR = Path(os.environ.get("DR_PROBLEMS_DIR", HERE))
TRAIN_CHUNKS = [c for c, v in CHUNKS.items() if v[0] == "train"]
HELDOUT_CHUNKS = [c for c, v in CHUNKS.items() if v[0] == "heldout"]


def die(msg: str, code: int = 2) -> None:
    print(f"data_run: {msg}", file=sys.stderr)
    raise SystemExit(code)


# ---------------------------------------------------------------------------------------------------- state
def read_state(results: Path = RESULTS) -> dict:
    p = results / STATE
    if not p.exists():
        die(f"{p} is missing: the data run's state (pinned code, what is done) lives there")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as e:
        die(f"{p}: not JSON ({e}); restore it from git")
    return {}


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_state(st: dict, results: Path = RESULTS) -> None:
    write_atomic(results / STATE, (json.dumps(st, indent=1, sort_keys=True) + "\n").encode())


def chunk_done(name: str, results: Path, work: Path | None) -> Path | None:
    for d in ([work / "gen"] if work else []) + [results / "gen"]:
        if (d / f"{name}.jsonl.gz").exists():
            return d / f"{name}.jsonl.gz"
    return None


def corpus_versions(corpus: Path) -> dict[int, int]:
    """{input solutions: version} of a corpus folder's committed versions. A version is named by the solutions
    its input held (the first N of the run's), not by its rows: duplicates in the input and rejected rows make
    fewer rows than that."""
    out = {}
    for f in sorted((corpus / "versions").glob("v*.json")) if (corpus / "versions").is_dir() else []:
        try:
            v = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        c = v.get("counts") or {}
        n = sum(int(c.get(k) or 0) for k in ("added", "reused", "rejected", "duplicates_in_input"))
        out[n] = int(v["version"])
    return out


def tgz_versions(path: Path, top: str) -> dict[int, int]:
    """corpus_versions of a packed corpus, read from the version files inside the archive."""
    out = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) == 3 and parts[0] == top and parts[1] == "versions" and parts[2].endswith(".json"):
                v = json.loads(t.extractfile(m).read())
                c = v.get("counts") or {}
                out[sum(int(c.get(k) or 0) for k in ("added", "reused", "rejected", "duplicates_in_input"))] = int(v["version"])
    return out


def solutions_needed(size: int) -> list[str]:
    """The training chunks the first ``size`` solutions come from, in order."""
    need, n = [], 0
    for c in TRAIN_CHUNKS:
        if n >= size:
            break
        _, a, b, k = CHUNKS[c]
        need.append(c)
        n += (b - a) * k
    return need


# ----------------------------------------------------------------------------------------------------- pack
def out_entries(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.is_file()]


def check_room(out: Path, sizes: list[int], names: list[str]) -> None:
    """Refuse (exit 5, nothing written) what would break the limits on what comes back from a call. The runner
    keeps DR_OUT_RESERVED places for its own call.json and log.txt."""
    have = [p for p in out_entries(out) if p.name not in names]  # a file packed again is replaced, not added
    reserved = int(os.environ.get("DR_OUT_RESERVED", "0"))
    deep = [p for p in have if len(p.relative_to(out).parts) - 1 > OUT_DEPTH]
    if deep:  # what the runner places is at the top; anything deeper would not come back at all
        die(f"{deep[0]} is more than {OUT_DEPTH} folders down in {out}: it would not come back; move it up", 5)
    for n in names:
        if not NAME_OK.match(n):
            die(f"{n!r}: a file that comes back is named in letters, digits, '.', '_' and '-' alone", 5)
    if len(have) + len(sizes) + reserved > OUT_FILES:
        die(f"{out} holds {len(have)} files (and {reserved} kept for the call's record); {len(sizes)} more would "
            f"pass the {OUT_FILES} that come back from a call: run the rest in the next call", 5)
    for n, s in zip(names, sizes):
        if s > OUT_FILE_BYTES:
            die(f"{n}: {s / MiB:.1f} MiB, over the {OUT_FILE_BYTES // MiB} MiB a returned (and committed) file "
                "may have", 5)
    total = sum(p.stat().st_size for p in have) + sum(sizes)
    if total > OUT_TOTAL_BYTES:
        die(f"{out}: {total / MiB:.1f} MiB would pass the {OUT_TOTAL_BYTES // MiB} MiB that come back", 5)


def place(src: Path, out: Path, name: str) -> Path:
    """Copy ``src`` to ``out/name`` atomically (a temporary name in the same folder, then a rename): a call
    cut off mid-copy leaves ``.name.tmp``, which ``land`` ignores, never a truncated ``name``."""
    dst = out / name
    tmp = out / f".{name}.tmp"
    shutil.copyfile(src, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dst)
    return dst


def _no_lock(ti: tarfile.TarInfo):
    # the label run that held the lock has exited when a corpus is packed; its lock file would make the next
    # machine (another host, whose process check cannot see it) wait out the lock's stale time
    base = os.path.basename(ti.name)
    return None if base == "_lock" or base.startswith("_lock.") else ti


def pack(work: Path, out: Path, name: str, paths: list[str]) -> Path:
    """``paths`` (relative to ``work``) as ``out/name`` (.tgz), or one file placed as it is."""
    check_room(out, [0], [name])  # the count and the name before any work
    srcs = [work / p for p in paths]
    for s in srcs:
        if not s.exists():
            die(f"pack {name}: {s} does not exist", 5)
    if len(srcs) == 1 and srcs[0].is_file() and not name.endswith(".tgz"):
        staged = srcs[0]
    else:
        staged = work / ".pack" / name
        staged.parent.mkdir(exist_ok=True)
        with tarfile.open(staged, "w:gz") as t:
            for p, s in zip(paths, srcs):
                t.add(s, arcname=p, filter=_no_lock)
    check_room(out, [staged.stat().st_size], [name])
    dst = place(staged, out, name)
    print(f"packed {dst} ({dst.stat().st_size / MiB:.2f} MiB)")
    return dst


# ---------------------------------------------------------------------------------------------------- input
def problems(split: str, a: int, b: int) -> list[str]:
    with gzip.open(PROBLEMS_DIR / f"problems_big_{split}.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = [x for x in f if x.strip()]
    return lines[a:b]


def write_input(results: Path, work: Path, size: int | None, dest: Path) -> int:
    """The first ``size`` training solutions (None: the held-out ones, 8 per problem), in chunk order, as one
    JSONL: the same bytes from the same chunks on every machine, so a resumed or refreshed label sees the same
    input."""
    names = HELDOUT_CHUNKS if size is None else solutions_needed(size)
    lines: list[str] = []
    for c in names:
        p = chunk_done(c, results, work)
        if p is None:
            die(f"generated chunk {c} is missing (neither {results}/gen nor {work}/gen has it): run "
                f"`data_run.sh gen {c}` first", 3)
        with gzip.open(p, "rt", encoding="utf-8") as f:
            lines += [x if x.endswith("\n") else x + "\n" for x in f if x.strip()]
    if size is not None:
        if len(lines) < size:
            die(f"{size} solutions asked, the chunks {names} hold {len(lines)}", 3)
        lines = lines[:size]
    dest.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(lines).encode()
    if not dest.exists() or dest.read_bytes() != data:
        write_atomic(dest, data)
    return len(lines)


def gzip_atomic(src: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    with open(src, "rb") as f, gzip.GzipFile(tmp, "wb", mtime=0) as g:
        shutil.copyfileobj(f, g)
    os.replace(tmp, dest)


# ------------------------------------------------------------------------------------------------ estimates
def measured(st: dict, key: str) -> float | None:
    return (st.get("measured") or {}).get(key)


def estimate(st: dict, stage: str, *args: str, have: int | None = None) -> float:
    """Seconds a stage takes on one H200; ``have``: the solutions a corpus already holds."""
    if stage == "setup":
        return EST["setup"]
    if stage == "gen":
        _, a, b, k = CHUNKS[args[0]]
        per = measured(st, "gen_per_sample") or EST["gen_per_sample"]
        return EST["gen_start"] + (b - a) * k * per
    if stage == "label":
        corpus, size = args[0], int(args[1])
        per = measured(st, f"label_per_solution_{corpus}") or EST["label_per_solution"][corpus]
        start = have if have is not None else max([0] + [int(s) for s in st.get("corpora", {}).get(corpus, {})
                                                          .get("versions", {})])
        return EST["label_start"] + max(0, size - start) * per
    if stage in ("train", "row", "final"):
        _, n, _, _ = ROWS[args[0]]
        t = EST["train_fixed"] + n * (measured(st, "train_per_solution") or EST["train_per_solution"])
        return t + (EST["measure"] if stage != "train" else 0.0)
    if stage == "measure":
        return EST["measure"]
    return 0.0


# ---------------------------------------------------------------------------------------------- next, status
def todo(st: dict, results: Path = RESULTS) -> list[tuple[str, ...]]:
    """The stages left, in the order they are worth running (each one's inputs before it)."""
    out: list[tuple[str, ...]] = []
    gen_left = [c for c in CHUNKS if chunk_done(c, results, None) is None]
    vers = {c: {int(k): v for k, v in st.get("corpora", {}).get(c, {}).get("versions", {}).items()} for c in CORPORA}
    rows = st.get("rows", {})

    def gen(*cs):
        out.extend(("gen", c) for c in cs if c in gen_left and ("gen", c) not in out)

    def label(c, n):
        gen(*solutions_needed(n))
        if n not in vers[c] and ("label", c, str(n)) not in out:
            out.append(("label", c, str(n)))

    def row(r):
        c, n, _, _ = ROWS[r]
        label(c, n)
        if r not in rows:
            out.append(("row", r))

    gen("h0375")  # every row's best-of-8 reads all 500 held-out problems
    for optional in (False, True):  # ROWS' order: the comparison at equal solutions first, then the size curve
        for r in (r for r, v in ROWS.items() if v[3] == optional):
            row(r)
    return out


def pack_calls(st: dict, stages: list[tuple[str, ...]], budget_s: float) -> tuple[list[list], float]:
    """Greedy: stages in order into calls of at most CALL_S, while the session's budget lasts."""
    calls: list[list] = []
    cur: list = []
    cur_s = used = 0.0
    have = {c: max([0] + [int(s) for s in st.get("corpora", {}).get(c, {}).get("versions", {})]) for c in CORPORA}
    pieces: list[tuple[tuple[str, ...], float]] = []
    for s in stages:
        if s[0] != "label":
            pieces.append((s, estimate(st, *s)))
            continue
        # a label longer than a call goes on in the next ones, each paying the engine start again
        e = estimate(st, "label", s[1], s[2], have=have[s[1]])
        have[s[1]] = int(s[2])
        per_call = CALL_S - LABEL_GRACE_S - EST["label_start"]
        work = e - EST["label_start"]
        while work > per_call:
            pieces.append((s, float(CALL_S)))
            work -= per_call
        pieces.append((s, EST["label_start"] + work))
    for s, e in pieces:
        if cur and cur_s + e > CALL_S:
            calls.append(cur)
            used += cur_s + EST["call_overhead"]
            cur, cur_s = [], 0.0
        if used + cur_s + e + EST["call_overhead"] > budget_s:
            break
        cur.append((s, e))
        cur_s += e
    if cur:
        calls.append(cur)
        used += cur_s + EST["call_overhead"]
    return calls, used


def travel_size(root: Path = ROOT) -> int:
    """Bytes of the working tree that every call sends: tracked files and untracked ones git does not ignore."""
    def ls(*a):
        r = subprocess.run(["git", "ls-files", "-z", *a], cwd=root, capture_output=True, check=True)
        return [x for x in r.stdout.decode().split("\0") if x]
    files = set(ls()) | set(ls("-o", "--exclude-standard"))
    return sum((root / f).stat().st_size for f in files if (root / f).is_file())


def dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def cmd_next(a) -> None:
    st = read_state()
    stages = todo(st)
    tree = travel_size()
    xfer = ROOT / ".xfer"
    setup_carry = dir_size(xfer / "data_run") + dir_size(xfer / "extra")
    last = GGUF_BYTES - (N_PARTS - 1) * PART_BYTES
    print(f"working tree that travels with every call: {tree / MiB:.1f} MiB; a model part {PART_BYTES / MiB:.0f} MiB "
          f"(-> {(tree + PART_BYTES) / MiB:.1f} of {TRAVEL_BYTES // MiB}); the set-up call's carry "
          f"{(last + setup_carry) / MiB:.1f} MiB (-> {(tree + last + setup_carry) / MiB:.1f})")
    if tree + PART_BYTES + TRAVEL_MARGIN > TRAVEL_BYTES:
        print("!! a part call would not fit: make PART_BYTES smaller (data_run.py) and `prepare --gguf` again")
    if not stages:
        print("every row is measured: the final look at the held-aside part (once, last):")
        for r in (r for r, v in ROWS.items() if not v[3]):
            if "final" not in st.get("rows", {}).get(r, {}):
                print(f"  run(command=\"bash bench/gpu_e2e/data_run.sh final {r}\", timeout_s=600)")
        return
    if a.warm:
        print("the machine is warm and set up (status: warm; `setup` done): no set-up calls")
    else:
        print_setup()
    budget = a.minutes * 60 - (0 if a.warm else SETUP_S)
    calls, used = pack_calls(st, stages, budget)
    print(f"\nthen, with {a.minutes} device minutes ({budget / 60:.0f} for stages), these calls "
          f"(about {used / 60:.0f} min); after each one: `python bench/gpu_e2e/data_run.py land FILES_AT`, commit:")
    for c in calls:
        cmd = " + ".join(" ".join(s) for s, _ in c)
        print(f"  run(command=\"bash bench/gpu_e2e/data_run.sh {cmd}\", timeout_s=600)   # ~{sum(e for _, e in c):.0f} s")
    left = stages[sum(len(c) for c in calls):]
    if left:
        print(f"left for later sessions: {', '.join(' '.join(s) for s in left)}")


SETUP_S = 480  # the set-up calls of a fresh machine (README, "Stages, at today's speed")


def print_setup() -> None:
    print("\nset-up of a fresh machine (calls back to back; ~8 min of device time):")
    print("  1. the vLLM stash calls that `bash /work/shared/device/prepare-vllm-wheels.sh` prints (sized to this tree)")
    print(f"  2. {N_PARTS - 1} model-part calls, each: run(carry=[\".xfer/gguf/part.NN\"], "
          "command=\"bash bench/gpu_e2e/data_run.sh part NN\")   NN = 00 ..", f"{N_PARTS - 2:02d}")
    print(f"  3. run(carry=[\".xfer/gguf/part.{N_PARTS - 1:02d}\", \".xfer/extra\", \".xfer/data_run\"], "
          f"command=\"bash bench/gpu_e2e/data_run.sh part {N_PARTS - 1:02d} + setup\")")


def cmd_status(a) -> None:
    st = read_state()
    print(f"code: label {st['code']['label'][:12]}, train {st['code']['train'][:12]}")
    for c in CHUNKS:
        p = chunk_done(c, RESULTS, None)
        g = st.get("gen", {}).get(c, {})
        print(f"gen {c}: {'done, ' + str(g.get('solutions')) + ' solutions' if p else 'to do'}")
    for c, v in CORPORA.items():
        vs = st.get("corpora", {}).get(c, {}).get("versions", {})
        part = st.get("corpora", {}).get(c, {}).get("partial")
        print(f"corpus {c}: versions {vs or '-'}; of {v['sizes']}" + (f"; partial: {part}" if part else ""))
    for r in ROWS:
        m = st.get("rows", {}).get(r)
        if not m or "f1" not in m:
            print(f"row {r}: to do")
            continue
        print(f"row {r}: PB-MATH dev F1 {m.get('f1')}; best-of-{m.get('bestofn_n')} {m.get('bestofn_selector')} "
              f"{m.get('bestofn_accuracy')} vs majority {m.get('majority_accuracy')} (paired difference "
              f"{m.get('vs_majority')} +- {m.get('vs_majority_se')}); code {str(m.get('code', '?'))[:12]}"
              + ("; aside read" if "final" in m else ""))
    print("next stages: " + ", ".join(" ".join(s) for s in todo(st)))


# -------------------------------------------------------------------------------------------------- land
def cmd_land(a) -> None:
    """A call's files (FILES_AT) into results/data_run: chunks, corpora, rows; then STATE.json."""
    src = Path(a.files_at)
    call = src / "call.json"
    if call.exists():
        info = json.loads(call.read_text())
    else:  # killed at the device's limit before its record: what it placed is whole (placed atomically), keep it
        print(f"{src}: no call.json (the call was cut before its record): landing its files, read from themselves")
        info = {"rc": None, "stages": None}
    st = read_state()
    if info.get("code") and info["code"] != st["code"]:
        die(f"{call}: made with code {info['code']}, STATE.json pins {st['code']}; nothing landed", 1)
    landed = []
    for p in sorted(src.iterdir()):
        if p.name.startswith(".") or p.name in ("call.json", "log.txt"):
            continue  # a .NAME.tmp is a copy cut off by the call's end
        if p.name.startswith("gen-") and p.name.endswith(".jsonl.gz"):
            dst = RESULTS / "gen" / p.name[4:]
        elif p.name.startswith("c_") and p.name.endswith(".tgz"):
            dst = RESULTS / p.name
        elif p.name == MODEL_META:  # the converted model's small files, as that machine's convert.py wrote them
            dst = RESULTS / p.name
        elif (p.name.startswith("row-") or p.name.startswith("final-")) and p.name.endswith(".tgz"):
            # rows/NAME/...: each file replaced in place (a final look adds its files beside the row's own)
            tmp = RESULTS / f".land.{p.name}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            with tarfile.open(p) as t:
                t.extractall(tmp, filter="data")
            for f in sorted(x for x in tmp.rglob("*") if x.is_file()):
                rel = f.relative_to(tmp)
                if rel.parts[0] != "rows" or len(rel.parts) != 3:
                    die(f"{p}: {rel} is not rows/NAME/FILE; nothing more landed", 1)
                (RESULTS / rel.parent).mkdir(parents=True, exist_ok=True)
                os.replace(f, RESULTS / rel)
                landed.append(str(rel))
            shutil.rmtree(tmp)
            continue
        else:
            print(f"skipped {p.name}: not a data-run output")
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        place(p, dst.parent, dst.name)
        landed.append(str(dst.relative_to(RESULTS)))
    for name, v in (info.get("finals") or {}).items():
        st.setdefault("rows", {}).setdefault(name, {})["final"] = v
    # what the files say wins over the record: a corpus's versions from its own version files, a chunk's size
    for rel in landed:
        f = RESULTS / rel
        if rel.startswith("c_") and rel.endswith(".tgz"):
            name = rel[2:-4]
            try:
                vs = tgz_versions(f, f"c_{name}")
            except (tarfile.TarError, OSError, json.JSONDecodeError) as e:
                die(f"{f}: landed, but its version files cannot be read ({e}); STATE.json not updated: check it", 1)
            info.setdefault("corpora", {}).setdefault(name, {}).setdefault("versions", {}).update(
                {str(k): v for k, v in vs.items()})
        elif rel.startswith("gen/"):
            with gzip.open(f, "rt", encoding="utf-8") as g:
                n = sum(1 for x in g if x.strip())
            info.setdefault("gen", {}).setdefault(rel[4:-9], {})["solutions"] = n
    for k in ("gen", "corpora", "rows", "measured"):
        for name, v in (info.get(k) or {}).items():
            if k == "corpora":
                cur = st.setdefault("corpora", {}).setdefault(name, {})
                cur.setdefault("versions", {}).update(v.get("versions", {}))
                cur["partial"] = v.get("partial")
                cur.setdefault("label_s", []).extend(v.get("label_s", []))
            elif k == "measured":
                st.setdefault("measured", {})[name] = v
            elif k == "rows":
                st.setdefault("rows", {}).setdefault(name, {}).update(v)
            else:
                st.setdefault(k, {})[name] = v
    st.setdefault("calls", []).append({k: info.get(k) for k in ("started", "stages", "rc", "wall_s", "machine")})
    write_state(st)
    st["next"] = [" ".join(s) for s in todo(st)]  # where the next call starts (gen chunks: as landed by now)
    write_state(st)
    print(f"landed {len(landed)}: {', '.join(landed) or '-'}; rc {info.get('rc')}. Commit: git add "
          f"{RESULTS.relative_to(ROOT) if RESULTS.is_relative_to(ROOT) else RESULTS} && git commit")


# ------------------------------------------------------------------------------------------------ prepare
SNAP_EXCLUDE = ("bench/gpu_e2e/results", "data/model", "bench/grader_cases", "bench/real_model/responses.jsonl.gz")


def snap_name(commit: str) -> str:
    return f"snap-{commit[:12]}.tar.gz"


def cmd_prepare(a) -> None:
    """Here, before a GPU session: .xfer/data_run (the pinned code's snapshots, the ProcessBench file) and, with
    --gguf, the model's parts in .xfer/gguf. Made once: a snapshot that exists is kept (it is the pinned
    commit's tree, the same bytes whenever it is made)."""
    st = read_state()
    dst = ROOT / ".xfer" / "data_run"
    chk = subprocess.run(["git", "check-ignore", "-q", ".xfer/data_run/x"], cwd=ROOT)
    if chk.returncode != 0:
        die(".xfer/ is not ignored by git here: add /.xfer/ to .git/info/exclude, or it would travel with every call")
    dst.mkdir(parents=True, exist_ok=True)
    for commit in sorted(set(st["code"].values())):
        f = dst / snap_name(commit)
        if f.exists():
            print(f"{f}: kept")
            continue
        spec = ["."] + [f":!{x}" for x in SNAP_EXCLUDE]
        tar = subprocess.run(["git", "archive", "--format=tar", commit, "--", *spec], cwd=ROOT, capture_output=True)
        if tar.returncode:
            die(f"git archive {commit}: {tar.stderr.decode().strip()} (the pinned commit must be in this repository)")
        tmp = f.with_name(f".{f.name}.tmp")
        with gzip.GzipFile(tmp, "wb", mtime=0) as g:
            g.write(tar.stdout)
        os.replace(tmp, f)
        print(f"{f}: {f.stat().st_size / MiB:.2f} MiB, the code of {commit}")
    pb = Path(a.pb)
    if not pb.exists():
        die(f"{pb}: the ProcessBench-MATH file is missing (pass --pb)")
    shutil.copyfile(pb, dst / "processbench_math_dev.jsonl.gz")
    if (RESULTS / MODEL_META).exists():  # set-up then writes the model folder without transformers (convert_fast.py)
        shutil.copyfile(RESULTS / MODEL_META, dst / MODEL_META)
    if a.gguf:
        g = Path(a.gguf)
        if g.stat().st_size != GGUF_BYTES:
            die(f"{g}: {g.stat().st_size} bytes, the model is {GGUF_BYTES}")
        h = hashlib.sha256()
        parts = ROOT / ".xfer" / "gguf"
        parts.mkdir(parents=True, exist_ok=True)
        with open(g, "rb") as f:
            for n in range(N_PARTS):
                b = f.read(PART_BYTES)
                h.update(b)
                write_atomic(parts / f"part.{n:02d}", b)
        if h.hexdigest() != GGUF_SHA256:
            die(f"{g}: sha256 {h.hexdigest()}, expected {GGUF_SHA256}")
        print(f"{parts}: {N_PARTS} parts of {PART_BYTES // MiB} MiB")
    if not (ROOT / ".xfer" / "extra").is_dir():
        print("note: .xfer/extra (the gguf, latex2sympy2_extended and antlr4 wheels) is missing: REAL-MODEL.md, step 1")
    print(f"{dst}: {dir_size(dst) / MiB:.2f} MiB")


def cmd_put_part(a) -> None:
    """Device side: .xfer/gguf/part.NN at its offset in /tmp/model.gguf (idempotent: a retried call rewrites the
    same bytes in the same place)."""
    n = int(a.n, 10)
    src = ROOT / ".xfer" / "gguf" / f"part.{n:02d}"
    if not src.exists():
        die(f"{src} did not travel: carry it (run(carry=[\".xfer/gguf/part.{n:02d}\"], ...))")
    data = src.read_bytes()
    fd = os.open(a.dest, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, n * PART_BYTES)
    finally:
        os.close(fd)
    print(f"part {n:02d}: {len(data)} bytes at {n * PART_BYTES}; {a.dest} now {os.path.getsize(a.dest)} bytes")


def cmd_check_model(a) -> None:
    p = Path(a.path)
    size = p.stat().st_size if p.exists() else 0
    if size != GGUF_BYTES:
        missing = [n for n in range(N_PARTS) if n * PART_BYTES >= size] if size < GGUF_BYTES else []
        die(f"{p}: {size} of {GGUF_BYTES} bytes; parts not yet written (at least): {missing or 'unknown'}", 4)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(16 * MiB), b""):
            h.update(b)
    if h.hexdigest() != GGUF_SHA256:
        die(f"{p}: sha256 {h.hexdigest()} is not the model's; write the parts again", 4)
    print(f"{p}: sha256 ok")


# ----------------------------------------------------------------------------------------- device helpers
def cmd_pack(a) -> None:
    pack(Path(a.work), Path(a.out), a.name, a.paths)


def cmd_input(a) -> None:
    n = write_input(RESULTS, Path(a.work), None if a.size == "heldout" else int(a.size), Path(a.dest))
    print(f"{a.dest}: {n} solutions")


def cmd_chunk(a) -> None:
    """The chunk's problems (and an empty file for the other split, split.py's second input)."""
    split, x, y, k = CHUNKS[a.name]
    d = Path(a.dest)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{a.name}.problems.jsonl").write_text("".join(problems(split, x, y)[: a.limit]))
    (d / "empty.jsonl").write_text("")
    print(f"{split} {k}")


def cmd_version_of(a) -> None:
    v = corpus_versions(Path(a.corpus)).get(int(a.size))
    if v is None:
        die(f"{a.corpus} has no version of {a.size} solutions (it has {corpus_versions(Path(a.corpus)) or 'none'})", 3)
    print(v)


def cmd_estimate(a) -> None:
    st = read_state()
    have = None
    if a.stage == "label" and a.corpus_dir:
        vs = corpus_versions(Path(a.corpus_dir))
        have = max([0] + list(vs))
    print(int(estimate(st, a.stage, *a.args, have=have)))


def code_of(st: dict, role: str) -> str:
    """The commit pinned for ``role``: ``train``, ``label``, or ``label-CORPUS`` (a corpus labeled by other code
    than the rest, e.g. one begun after a faster engine landed; the others stay at ``label``, as their corpora's
    identity needs)."""
    code = st["code"]
    if role in code:
        return code[role]
    if role.startswith("label-"):
        return code["label"]
    die(f"no code pinned for {role!r} in STATE.json (pinned: {', '.join(code)})", 3)


def cmd_get(a) -> None:
    st = read_state()
    if a.what == "roles":
        print(" ".join(st["code"]))
    elif a.what == "code":
        print(code_of(st, a.arg))
    elif a.what == "corpus-opts":
        print(CORPORA[a.arg]["opts"])
    elif a.what == "row":
        c, n, opts, _ = ROWS[a.arg]
        print(f"{c}\t{n}\t{opts}")
    elif a.what == "snap":
        print(snap_name(code_of(st, a.arg)))


def _value(v: str):
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def cmd_event(a) -> None:
    """One line of the call's record: KIND NAME key=value... (values read as JSON where they parse)."""
    rec = {"kind": a.kind, "name": a.name}
    if a.from_row:  # a row's numbers, read from its folder
        rec.update(headline(Path(a.from_row), a.final))
    for kv in a.kv:
        k, _, v = kv.partition("=")
        rec[k] = _value(v)
    with open(a.file, "a") as f:
        f.write(json.dumps(rec) + "\n")


def label_record(corpus: Path) -> dict:
    """A corpus's versions ({solutions: version}) and, after a finished run, its labeling seconds per solution."""
    rec: dict = {"versions": {str(k): v for k, v in sorted(corpus_versions(corpus).items())}}
    m = corpus / "manifest.json"
    if m.exists():
        t = json.loads(m.read_text())
        added = (t.get("counts") or {}).get("added") or 0
        sec = (t.get("throughput") or {}).get("labeling_seconds")
        if added and sec:
            rec["per_solution"] = round(sec / added, 4)
    return rec


def headline(row_dir: Path, final: bool = False) -> dict:
    """The numbers a row's table line shows, from its eval and best-of-N files (``final``: the aside part's)."""
    h: dict = {}
    tr = row_dir / "train.jsonl"
    if tr.exists():  # the row's training (the call that trained it may be an earlier one)
        for line in tr.read_text().splitlines():
            h.update({k: v for k, v in json.loads(line).items() if k not in ("kind", "name")})
    met = row_dir / ("final_metrics_pb.json" if final else "metrics_pb.json")
    if met.exists():
        m = json.loads(met.read_text())
        h.update({k: m.get(k) for k in ("step_auroc", "f1_05", "f1_split_half", "threshold_own")})
    ev = row_dir / ("final_eval_pb.json" if final else "eval_pb.json")
    if ev.exists():
        e = json.loads(ev.read_text())
        h.update({k: e.get(k) for k in ("f1", "acc_error", "acc_correct") if k in e})
    bo = row_dir / "bestofn.json"
    if bo.exists():
        b = json.loads(bo.read_text())
        ch = b.get("chosen") or {}
        sel, n = ch.get("selector"), ch.get("n")
        for r in b.get("results", []):
            if r.get("n") == n and sel:
                s = r["selectors"]
                h.update({"bestofn_selector": sel, "bestofn_n": n, "bestofn_problems": r.get("problems"),
                          "bestofn_accuracy": s[sel]["accuracy"], "majority_accuracy": s["majority"]["accuracy"],
                          "vs_majority": s[sel].get("vs_majority"), "vs_majority_se": s[sel].get("vs_majority_se")})
    return h


def cmd_finish(a) -> None:
    """The call's record, $OUT/call.json (placed atomically), from its event lines; and the log's tail."""
    st = read_state()
    ev = [json.loads(x) for x in Path(a.events).read_text().splitlines() if x.strip()] if Path(a.events).exists() else []
    rec: dict = {"started": a.started, "wall_s": round(time.time() - float(a.t0), 1), "rc": int(a.rc),
                 "code": st["code"], "machine": a.machine, "stages": [], "gen": {}, "corpora": {}, "rows": {},
                 "finals": {}, "measured": {}}
    for e in ev:
        k, n = e.pop("kind"), e.pop("name")
        if k == "stage":
            rec["stages"].append({"stage": n, **e})
        elif k == "gen":
            rec["gen"][n] = e
        elif k == "corpus":
            c = rec["corpora"].setdefault(n, {"versions": {}, "label_s": []})
            c["versions"].update(e.get("versions", {}))
            c["partial"] = e.get("partial")
            c["label_s"].append(e.get("wall_s"))
            if e.get("per_solution"):
                rec["measured"][f"label_per_solution_{n}"] = e["per_solution"]
        elif k == "row":
            rec["rows"].setdefault(n, {}).update(e)
        elif k == "final":
            rec["finals"].setdefault(n, {}).update(e)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(a.events + ".call.json")
    tmp.write_text(json.dumps(rec, indent=1) + "\n")
    place(tmp, out, "call.json")
    log = Path(a.log)
    if log.exists():
        data = log.read_bytes()[-4 * MiB:]
        tmp = Path(a.events + ".log.txt")
        tmp.write_bytes(data)
        place(tmp, out, "log.txt")


def cmd_gz(a) -> None:
    gzip_atomic(Path(a.src), Path(a.dest))


def cmd_label_record(a) -> None:
    r = label_record(Path(a.corpus))
    print(" ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in r.items()))




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("next", help="the device calls to make next")
    p.add_argument("--minutes", type=float, default=30.0, help="the session's device minutes (status: budget_left_s)")
    p.add_argument("--warm", action="store_true", help="the machine in hand is set up already")
    p.set_defaults(fn=cmd_next)
    sub.add_parser("status").set_defaults(fn=cmd_status)
    p = sub.add_parser("land")
    p.add_argument("files_at")
    p.set_defaults(fn=cmd_land)
    p = sub.add_parser("prepare")
    p.add_argument("--pb", default="/work/shared/data/processbench_math_dev.jsonl.gz")
    p.add_argument("--gguf", default=None, help="the model file of REAL-MODEL.md, step 1 (split into .xfer/gguf)")
    p.set_defaults(fn=cmd_prepare)
    p = sub.add_parser("put-part")
    p.add_argument("n")
    p.add_argument("--dest", default="/tmp/model.gguf")
    p.set_defaults(fn=cmd_put_part)
    p = sub.add_parser("check-model")
    p.add_argument("path")
    p.set_defaults(fn=cmd_check_model)
    p = sub.add_parser("pack")
    p.add_argument("work")
    p.add_argument("out")
    p.add_argument("name")
    p.add_argument("paths", nargs="+")
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("input")
    p.add_argument("work")
    p.add_argument("size", help="the first N training solutions, or 'heldout'")
    p.add_argument("dest")
    p.set_defaults(fn=cmd_input)
    p = sub.add_parser("chunk")
    p.add_argument("name", choices=sorted(CHUNKS))
    p.add_argument("dest")
    p.add_argument("--limit", type=int, default=None)
    p.set_defaults(fn=cmd_chunk)
    p = sub.add_parser("version-of")
    p.add_argument("corpus")
    p.add_argument("size")
    p.set_defaults(fn=cmd_version_of)
    p = sub.add_parser("estimate")
    p.add_argument("stage")
    p.add_argument("args", nargs="*")
    p.add_argument("--corpus-dir", default=None)
    p.set_defaults(fn=cmd_estimate)
    p = sub.add_parser("get")
    p.add_argument("what", choices=("code", "corpus-opts", "row", "snap", "roles"))
    p.add_argument("arg", nargs="?", default="")
    p.set_defaults(fn=cmd_get)
    p = sub.add_parser("event")
    p.add_argument("file")
    p.add_argument("kind")
    p.add_argument("name")
    p.add_argument("kv", nargs="*")
    p.add_argument("--from-row", default=None)
    p.add_argument("--final", action="store_true")
    p.set_defaults(fn=cmd_event)
    p = sub.add_parser("finish")
    for x in ("events", "log", "out", "t0", "started", "rc", "machine"):
        p.add_argument(x)
    p.set_defaults(fn=cmd_finish)
    p = sub.add_parser("gz")
    p.add_argument("src")
    p.add_argument("dest")
    p.set_defaults(fn=cmd_gz)
    p = sub.add_parser("label-record")
    p.add_argument("corpus")
    p.set_defaults(fn=cmd_label_record)
    a = ap.parse_args(argv)
    a.fn(a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
