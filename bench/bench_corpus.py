#!/usr/bin/env python3
"""Commands after labeling at corpus scale: time and peak RSS of stats, export, eval and report on
generated corpora of 0.3 M / 3 M / 10 M rows, against the implementation before streaming at 0.3 M; and
``mcprm plan`` (validates and counts the whole input, then a small pilot) on a large generated input.

Corpora are real: synthetic rows of the labeled-corpus shape (bundled-task problems of 2-8 operations, a wrong
step in ~45% of solutions, per-step and binary-search label shapes, MC counts at K = 8), cast to the declared
schema and written with ``CorpusStore.write_table`` (shard + sha256 sidecar) under a committed manifest. No
model. Each command runs in a fresh process (``--child``) started by a wrapper process that reads its peak RSS
with ``resource.getrusage(RUSAGE_CHILDREN)``; seconds are the command's own (interpreter start and imports
excluded). The old code is the previous commit's modules (``git show REV:path``), so both run in one bench.

    python bench/bench_corpus.py --sizes 300000,3000000,10000000 --plan-rows 10000000
    python bench/bench_corpus.py --sizes 300000 --skip plan          # quick: 0.3 M, new vs legacy

Everything generated goes under --workdir (default /tmp/mcprm-bench-corpus) and is deleted at the end unless
--keep.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LEGACY_REV = "7a70437"  # the last commit before the streamed commands
LEGACY_FILES = {"legacy_corpus": "pipeline/storage/corpus.py", "legacy_export": "pipeline/commands/export.py",
                "legacy_report": "pipeline/commands/report.py", "legacy_evaluate": "pipeline/commands/evaluate.py",
                "legacy_plan": "pipeline/commands/plan.py", "legacy_synthetic": "pipeline/bundled/synthetic.py"}
COMMANDS = ("stats", "export-trl", "export-qwen-tok", "eval", "report")


# ------------------------------------------------------------------------------------------------ corpus
def _base_rows(n: int, seed: int) -> list[dict]:
    from pipeline.bundled.generator import generate_problems
    from pipeline.labeling.rules import StepCount, first_error_confidence
    from pipeline.solution import content_key
    from pipeline.stats.intervals import wilson

    rng = random.Random(seed)
    rows = []
    for i, p in enumerate(generate_problems(n, seed)):
        steps = list(p["steps"])
        m = len(steps)
        wrong = rng.random() < 0.45
        j = rng.randrange(m - 1) if wrong and m > 1 else -1
        if j >= 0:
            steps[j] = steps[j] + "1"  # a wrong result: the exact checker flags this step
        strategy = "binary-search" if rng.random() < 0.3 else "per-step"
        labels, mc, correct, total = [], [], [], []
        for s in range(m):
            if j >= 0 and s > j and strategy == "binary-search":
                labels.append(None), mc.append(None), correct.append(0), total.append(0)
                continue
            c = rng.randint(1, 8) if (j < 0 or s < j) else 0
            labels.append(c > 0), mc.append(c / 8), correct.append(c), total.append(8)
        fe = next((s for s, y in enumerate(labels) if y is False), -1)
        rollouts = sum(total)
        ivs = [wilson(c, t) for c, t in zip(correct, total)]  # schema 3: the uncertainty columns
        counts = [StepCount(c, t, v, y) for c, t, v, y in zip(correct, total, mc, labels)]
        rows.append({
            "id": f"b{seed}-{i}", "key": content_key(p["problem"], p["answer"], steps), "problem": p["problem"],
            "answer": p["answer"], "steps": steps, "prompt": p["problem"], "completions": steps, "labels": labels,
            "mc_correct": correct, "mc_total": total, "mc_ungradable": [0] * m,
            "mc_no_answer": [rng.randint(0, 1) if t else 0 for t in total], "mc_value": mc, "first_error": fe,
            "mc_low": [None if iv is None else iv[0] for iv in ivs],
            "mc_high": [None if iv is None else iv[1] for iv in ivs],
            "first_error_confidence": first_error_confidence(counts, fe), "label_status": None,
            "solution_correct": (fe == -1) if rng.random() < 0.9 else (fe != -1), "rollouts": rollouts,
            "rollout_tokens": rollouts * rng.randint(20, 60), "strategy": strategy, "k": 8,
            "source": "bench.jsonl",
        })
    return rows


def build_corpus(path: Path, rows: int, shard_rows: int = 50_000, base: int = 25_000, seed: int = 0) -> dict:
    """Write a corpus of ``rows`` rows: a base block of distinct rows, tiled with unique ids/keys per copy."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.storage.schema import SCHEMA_VERSION, arrow_schema
    from pipeline.storage.store import CorpusStore

    t0 = time.perf_counter()
    block = pa.Table.from_pylist(_base_rows(min(base, rows), seed), schema=arrow_schema())
    store = CorpusStore(str(path))
    shards, done, s = [], 0, 0
    while done < rows:
        n = min(shard_rows, rows - done)
        parts, got = [], 0
        while got < n:
            take = min(block.num_rows, n - got)
            t = block.slice(0, take)
            tag = f"-{s}-{got}"
            for col in ("id", "key"):
                t = t.set_column(t.schema.get_field_index(col), col,
                                 pc.binary_join_element_wise(t.column(col), pa.scalar(tag), ""))
            parts.append(t)
            got += take
        table = pa.concat_tables(parts).cast(arrow_schema())
        rel = store.shard_rel(1, s)
        d = store.write_table(rel, table)
        shards.append({"path": rel, "rows": n, "version": 1, **d})
        done += n
        s += 1
    store.commit({"format": "mcprm-corpus", "schema_version": SCHEMA_VERSION, "version": 1, "strategy": "per-step",
                  "k": 8, "shards": shards, "counts": {"solutions": rows},
                  "history": [{"version": 1, "added": rows, "shards": [x["path"] for x in shards]}]})
    return {"seconds": time.perf_counter() - t0, "bytes": sum(x["bytes"] for x in shards), "shards": len(shards)}


def build_input(path: Path, rows: int, seed: int = 1) -> float:
    """A JSONL input of ``rows`` solutions (problem, answer, steps) for `mcprm plan`: distinct bundled-task
    problems, tiled with a distinguishing suffix so that every row has its own content key."""
    from pipeline.bundled.generator import generate_problems

    t0 = time.perf_counter()
    base = [json.dumps({"problem": p["problem"][:-1], "answer": p["answer"], "steps": p["steps"]})
            for p in generate_problems(min(rows, 20_000), seed)]
    with open(path, "w") as f:
        for i in range(rows):
            b = base[i % len(base)]
            # a distinct problem text per copy: "Compute EXPR + 0*i." keeps the value and the checker happy
            f.write(f'{{"id": "r{i}", ' + b[1:].replace('", "answer"', f' + 0 * {i // len(base)}.", "answer"', 1)
                    + "\n")
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------ child
def _load_legacy(workdir: Path):
    import importlib.util

    mods = {}
    for name in LEGACY_FILES:
        spec = importlib.util.spec_from_file_location(name, workdir / "legacy" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    # the old report and stats read through the old corpus_stats (read_corpus itself is unchanged)
    import pipeline.corpus as corpus

    corpus.corpus_stats = mods["legacy_corpus"].corpus_stats
    import pipeline.commands.evaluate as ev

    ev.evaluate = mods["legacy_evaluate"].evaluate
    # the old eval judges rows with the old exact checker (the new one is faster, same verdicts)
    sys.modules["pipeline.bundled.synthetic"] = mods["legacy_synthetic"]
    return mods


def child(spec: dict) -> dict:
    workdir, corpus, out, engine = Path(spec["workdir"]), spec["corpus"], spec["out"], spec["engine"]
    if engine == "legacy":
        mods = _load_legacy(workdir)
        stats = mods["legacy_corpus"].corpus_stats
        export = mods["legacy_export"].export_corpus
        evaluate = mods["legacy_evaluate"].evaluate
        report = mods["legacy_report"].build_report
    else:
        from pipeline.commands.evaluate import evaluate
        from pipeline.commands.report import build_report as report
        from pipeline.corpus import corpus_stats as stats
        from pipeline.export import export_corpus as export
    cmd = spec["cmd"]
    tok = None
    if cmd == "export-qwen-tok":
        from tests.pipeline.prm_fixtures import char_tokenizer

        tok = char_tokenizer()
    import matplotlib  # noqa: F401  (imports out of the timed region)
    import pyarrow.parquet  # noqa: F401

    t0 = time.perf_counter()
    if cmd == "stats":  # what `mcprm stats` runs: the counts, and (new code only) the uncertainty
        res = stats(corpus)["solutions"]
        if engine != "legacy":
            from pipeline.labeling.rules import corpus_uncertainty

            corpus_uncertainty(corpus)
    elif cmd == "export-trl":
        res = export(corpus, "trl", out, overwrite=True).rows
    elif cmd == "export-trl-balance":
        res = export(corpus, "trl", out, overwrite=True, balance="downsample").rows
    elif cmd == "export-qwen-tok":
        res = export(corpus, "qwen-prm", out, tokenizer=tok, overwrite=True).rows
    elif cmd.startswith("export-"):  # export-FORMAT[-tok], e.g. export-math-shepherd-tok, export-processbench
        fmt = cmd[len("export-"):].removesuffix("-tok")
        if cmd.endswith("-tok"):
            from tests.pipeline.prm_fixtures import char_tokenizer

            tok = char_tokenizer()
        res = export(corpus, fmt, out, tokenizer=tok, overwrite=True).rows
    elif cmd == "eval":
        res = evaluate(corpus, "synthetic")["solutions"]
    elif cmd == "report":
        res = report(corpus, out).stats["solutions"]
    elif cmd == "plan":
        from pipeline.bundled import MODEL_DIR
        from pipeline.config import LabelConfig

        if engine == "legacy":
            plan = mods["legacy_plan"].plan
        else:
            from pipeline.commands.plan import plan

        cfg = LabelConfig(input=[corpus], model=str(MODEL_DIR), k=2, max_new_tokens=32)
        res = plan(cfg, pilot=4).solutions
    elif cmd == "plan-input":  # plan's input pass alone (validate, count unique, draw the pilot sample)
        from pipeline.config import LabelConfig

        mod = mods["legacy_plan"] if engine == "legacy" else __import__("pipeline.commands.plan", fromlist=["x"])
        res = mod.sample_solutions(LabelConfig(input=[corpus]).resolved(), 32)[0]
    elif cmd == "label-plan":  # label's plan step alone: the one pass that validates, de-duplicates and shards
        from pipeline.config import LabelConfig
        from pipeline.run.plan import plan_run
        from pipeline.storage.store import CorpusStore

        shards = plan_run(LabelConfig(input=[corpus], output=out).resolved(), CorpusStore(out)).plan["shards"]
        res = sum(sh["rows"] if "rows" in sh else len(sh["keys"]) for sh in shards)
    else:
        raise SystemExit(f"unknown command {cmd}")
    return {"seconds": time.perf_counter() - t0, "result": res}


# ------------------------------------------------------------------------------------------------ parent
def measure(spec: dict, timeout: float) -> dict:
    """Run ``spec`` in a fresh process via a wrapper that reports the child's peak RSS (RUSAGE_CHILDREN)."""
    wrapper = ("import json, resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
               "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr[-3000:],"
               " 'maxrss_kb': ru.ru_maxrss}))\n")
    args = [sys.executable, "-c", wrapper, sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    w = json.loads(p.stdout)
    if w["rc"] != 0:
        return {"error": w["err"].strip().splitlines()[-1] if w["err"].strip() else f"rc {w['rc']}",
                "stderr": w["err"]}
    r = json.loads(w["out"].strip().splitlines()[-1])
    return {"seconds": r["seconds"], "wall": wall, "rss_mb": w["maxrss_kb"] / 1024, "result": r["result"]}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="300000,3000000,10000000")
    ap.add_argument("--legacy-at", type=int, default=300_000, help="Also run the old code at this size.")
    ap.add_argument("--legacy-rev", default=LEGACY_REV)
    ap.add_argument("--repo", default=str(ROOT), help="The git checkout to take --legacy-rev from.")
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--big-commands", default=None,
                    help="Commands at sizes above 3 M (default: all of --commands).")
    ap.add_argument("--plan-rows", type=int, default=10_000_000, help="Input rows for `plan` (0: skip).")
    ap.add_argument("--plan-commands", default="plan",
                    help="Input-side commands at --plan-rows: plan, plan-input (its input pass), label-plan (label's "
                         "plan step: validate, de-duplicate, stage the shards).")
    ap.add_argument("--plan-legacy", action="store_true",
                    help="Also measure plan's input pass alone, old and new (the old pilot needs the old config).")
    ap.add_argument("--workdir", default="/tmp/mcprm-bench-corpus")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="At --legacy-at, run old and new this many times, alternating; report each one's fastest.")
    ap.add_argument("--json", help="Write the rows here too.")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return

    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(work).free / 2**30
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; {free:.0f} GiB free in {work}",
          flush=True)
    (work / "legacy").mkdir(exist_ok=True)
    for name, path in LEGACY_FILES.items():
        src = subprocess.run(["git", "show", f"{a.legacy_rev}:{path}"], cwd=a.repo, capture_output=True,
                             text=True, check=True).stdout
        (work / "legacy" / f"{name}.py").write_text(src)
    sizes = [int(x) for x in a.sizes.split(",") if x]
    cmds = [c for c in a.commands.split(",") if c]
    big_cmds = [c for c in (a.big_commands or a.commands).split(",") if c]
    rows_out = []

    def report(size, cmd, engine, r):
        row = {"rows": size, "command": cmd, "engine": engine, **{k: v for k, v in r.items() if k != "stderr"}}
        rows_out.append(row)
        if "error" in r:
            print(f"{size:>10,} {cmd:<18} {engine:<7} ERROR {r['error']}", flush=True)
            if r.get("stderr"):
                print(r["stderr"][-2000:], file=sys.stderr)
            return
        print(f"{size:>10,} {cmd:<18} {engine:<7} {r['seconds']:8.1f} s {size / r['seconds']:>10,.0f} rows/s "
              f"{r['rss_mb']:8.0f} MB peak RSS", flush=True)

    try:
        for size in sizes:
            corpus = work / f"corpus-{size}"
            b = build_corpus(corpus, size)
            print(f"# built {size:,} rows: {b['shards']} shards, {b['bytes'] / 2**20:,.0f} MiB, {b['seconds']:.0f} s",
                  flush=True)
            for cmd in (cmds if size <= 3_000_000 else big_cmds):
                engines = ["legacy", "new"] if size == a.legacy_at else ["new"]
                runs: dict[str, list[dict]] = {e: [] for e in engines}
                # --repeat: old and new alternate, each keeps its fastest run (a shared machine's load moves)
                for _ in range(a.repeat if size == a.legacy_at else 1):
                    for engine in engines:
                        out = work / f"out-{cmd}-{engine}"
                        runs[engine].append(measure({"workdir": str(work), "corpus": str(corpus), "out": str(out),
                                                     "engine": engine, "cmd": cmd}, a.timeout))
                        shutil.rmtree(out, ignore_errors=True)
                for engine, rs in runs.items():
                    ok = [r for r in rs if "error" not in r]
                    report(size, cmd, engine, {**min(ok, key=lambda r: r["seconds"]), "runs": len(ok),
                                               "rss_mb": max(r["rss_mb"] for r in ok)} if ok else rs[0])
            shutil.rmtree(corpus, ignore_errors=True)
        if a.plan_rows:
            inp = work / "input.jsonl"
            s = build_input(inp, a.plan_rows)
            print(f"# built input of {a.plan_rows:,} rows ({inp.stat().st_size / 2**20:,.0f} MiB) in {s:.0f} s",
                  flush=True)
            for cmd, engine in ([("plan-input", "legacy"), ("plan-input", "new")] if a.plan_legacy else []) + [
                    (c, "new") for c in a.plan_commands.split(",") if c]:
                report(a.plan_rows, cmd, engine, measure({"workdir": str(work), "corpus": str(inp),
                                                          "out": str(work / f"out-{cmd}"), "engine": engine,
                                                          "cmd": cmd}, a.timeout))
                shutil.rmtree(work / f"out-{cmd}", ignore_errors=True)
    finally:
        if a.json:
            Path(a.json).write_text(json.dumps(rows_out, indent=2))
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
