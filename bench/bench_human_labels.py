"""Label quality against people: label a human-labeled set with several configurations, score each against the
human first errors, and print one table (F1, acc_error, acc_correct, error precision, confidence ECE/AUROC,
tokens, labeling GPU-seconds and GPU-seconds with the start), each as a ratio of the first configuration's.

The set is a ProcessBench-style JSONL(.gz): ``id``, ``problem``, ``steps`` (a list, or a JSON string of one),
``answer`` (the gold answer) and ``label`` (the human first error, -1 = none), e.g.
``../shared/data/processbench_math_dev.jsonl.gz``. It comes from a test set: measure on it, never train on it.
A quarter of it, chosen by a hash of each ``id``, is **held aside**: ``--part aside`` reads it only with
``--final``, for the one look at the end; every decision is made on ``--part dev``.

    # on one GPU (vLLM), the real model of ../shared/device/REAL-MODEL.md
    python bench/bench_human_labels.py SET.jsonl.gz WORK --part dev \\
        --common "--backend vllm --model /models/qwen1.5b --max-new-tokens 512" \\
        --config per-step-k8:"--strategy per-step --k 8" --config defaults:"" --config no-tail-fill:"--tail-fill 0"

    # the plumbing on a CPU with the bundled model (its synthetic sample as the "human" set):
    python bench/bench_human_labels.py data/sample.jsonl WORK --part dev --limit 12 \\
        --config per-step-k4:"--strategy per-step --k 4" --config defaults:""

Each configuration is one ``mcprm label`` run in a subprocess, one after the other on the same machine, or with
``--gpus N`` up to N at once, each alone on one GPU of the host (the first configuration is the baseline of the
ratios), then ``mcprm eval OUT --reference REF --json``. Results go to
``WORK/<part>/results.jsonl`` (one line per configuration) besides the table. A row of the bundled sample uses
``reference_first_error`` as its label.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ASIDE_SHARE = 4  # one id in ASIDE_SHARE, by hash, is held aside for the final look


def part_of(row_id: str) -> str:
    """``"aside"`` or ``"dev"``: a fixed function of the id (the same on every machine and every run)."""
    h = int.from_bytes(hashlib.blake2b(str(row_id).encode(), digest_size=8).digest(), "big")
    return "aside" if h % ASIDE_SHARE == 0 else "dev"


def _open(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def read_set(path: str) -> list[dict]:
    """The set's rows as ``{id, problem, steps, answer, label}`` (ProcessBench's string-encoded fields decoded);
    a row without what is needed is named by file and line."""
    rows = []
    with _open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            steps = d.get("steps")
            if isinstance(steps, str):
                steps = json.loads(steps)
            label = d.get("label", d.get("reference_first_error"))
            for field, v in (("id", d.get("id")), ("problem", d.get("problem")), ("steps", steps),
                             ("answer", d.get("answer")), ("label", label)):
                if v is None:
                    raise SystemExit(f"{path} line {n}: field {field!r} is missing")
            rows.append({"id": str(d["id"]), "problem": d["problem"], "steps": list(steps),
                         "answer": str(d["answer"]), "label": int(label)})
    return rows


def write_part(rows: list[dict], part: str, out: Path, limit: int | None) -> tuple[Path, Path, int]:
    """The part's input for ``mcprm label`` and its reference for ``mcprm eval``."""
    mine = [r for r in rows if part_of(r["id"]) == part][:limit]
    out.mkdir(parents=True, exist_ok=True)
    inp, ref = out / "input.jsonl", out / "reference.jsonl"
    with open(inp, "w") as f:
        for r in mine:
            f.write(json.dumps({"id": r["id"], "problem": r["problem"], "steps": r["steps"],
                                "answer": r["answer"]}) + "\n")
    with open(ref, "w") as f:
        for r in mine:
            f.write(json.dumps({"id": r["id"], "steps": r["steps"], "label": r["label"]}) + "\n")
    return inp, ref, len(mine)


def start_config(name: str, options: str, common: str, inp: Path, work: Path, gpu: int | None):
    """Start one configuration's ``mcprm label`` (on GPU ``gpu`` alone where given)."""
    import os

    out = work / name
    cmd = [sys.executable, "-m", "cli.main", "label", "--input", str(inp), "--output", str(out), "--no-progress",
           *shlex.split(common), *shlex.split(options)]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    log = open(work / f"{name}.log", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env), log, time.time()


def finish_config(name: str, options: str, started, ref: Path, work: Path) -> dict:
    """Wait for a configuration's run, evaluate it against the human labels; the numbers of its table row."""
    proc, log, t0 = started
    rc = proc.wait()
    wall = time.time() - t0
    log.close()
    out = work / name
    if rc != 0:
        raise SystemExit(f"{name}: mcprm label failed ({rc}):\n{(work / f'{name}.log').read_text()[-3000:]}")
    ev = subprocess.run([sys.executable, "-m", "cli.main", "eval", str(out), "--reference", str(ref), "--json"],
                        capture_output=True, text=True)
    if ev.returncode != 0:
        raise SystemExit(f"{name}: mcprm eval failed:\n{ev.stderr[-3000:]}")
    m = json.loads(ev.stdout)
    man = json.load(open(out / "manifest.json"))
    tp = man.get("throughput", {})
    return {"config": name, "options": options, "solutions": m["solutions"], "f1": m["f1"],
            "acc_error": m["acc_error"], "acc_correct": m["acc_correct"], "error_precision": m["error_precision"],
            "confidence_ece": m.get("confidence_ece"), "confidence_auroc": m.get("confidence_auroc"),
            "tokens": m["rollout_tokens"], "labeling_s": tp.get("labeling_seconds"), "seconds": tp.get("seconds"),
            "labeling_gpu_s": tp.get("labeling_gpu_seconds"), "gpu_s": tp.get("gpu_seconds"), "wall_s": wall}


def table(results: list[dict]) -> str:
    base = results[0]

    def f(v, d=3):
        return "n/a" if v is None else f"{v:.{d}f}"

    def x(v, b):
        return "" if v is None or not b else f" ({v / b:.2f}x)"

    # where no GPU is used, time stands in for GPU time (a CPU run: seconds, said in the header)
    gpu = base.get("labeling_gpu_s") is not None
    t_lab, t_all = ("labeling_gpu_s", "gpu_s") if gpu else ("labeling_s", "seconds")
    head = ("labeling GPU-s", "GPU-s incl. start") if gpu else ("labeling s (no GPU)", "s incl. start")
    lines = [f"| config | F1 | acc_error | acc_correct | error precision | conf. ECE / AUROC | tokens | {head[0]} "
             f"| {head[1]} |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(
            f"| {r['config']} | {f(r['f1'])} | {f(r['acc_error'])} | {f(r['acc_correct'])} | "
            f"{f(r['error_precision'])} | {f(r['confidence_ece'])} / {f(r['confidence_auroc'])} | "
            f"{r['tokens']:,}{x(r['tokens'], base['tokens'])} | {f(r[t_lab], 1)}{x(r[t_lab], base[t_lab])} | "
            f"{f(r[t_all], 1)}{x(r[t_all], base[t_all])} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("set", help="ProcessBench-style JSONL(.gz) with human first errors")
    ap.add_argument("work", help="a folder for the parts, the corpora and results.jsonl")
    ap.add_argument("--part", choices=("dev", "aside"), default="dev")
    ap.add_argument("--final", action="store_true", help="allow --part aside (the one look at the end)")
    ap.add_argument("--config", action="append", default=[], metavar='NAME:"OPTIONS"',
                    help="a configuration (label options); the first is the baseline of the ratios")
    ap.add_argument("--common", default="", help="options every configuration gets (backend, model, ...)")
    ap.add_argument("--limit", type=int, default=None, help="the first N solutions of the part only")
    ap.add_argument("--gpus", type=int, default=0, help="run up to N configurations at once, one GPU each "
                                                        "(CUDA_VISIBLE_DEVICES); 0: one after the other")
    a = ap.parse_args(argv)
    if a.part == "aside" and not a.final:
        raise SystemExit("--part aside is the held-aside part: read it once, at the end, with --final")
    configs = [c.partition(":")[::2] for c in a.config] or [("per-step-k8", "--strategy per-step --k 8"),
                                                           ("defaults", "")]
    work = Path(a.work) / a.part
    inp, ref, n = write_part(read_set(a.set), a.part, work, a.limit)
    print(f"{a.part}: {n} solutions -> {inp}", file=sys.stderr)
    results = []
    at_once = max(1, a.gpus)
    for i in range(0, len(configs), at_once):  # a batch of runs at once, each alone on its GPU
        batch = [(name, options.strip().strip('"')) for name, options in configs[i:i + at_once]]
        started = [start_config(name, options, a.common, inp, work, j if a.gpus else None)
                   for j, (name, options) in enumerate(batch)]
        for (name, options), st in zip(batch, started):
            r = finish_config(name, options, st, ref, work)
            results.append(r)
            print(f"{name}: F1 {r['f1']:.3f}, {r['tokens']:,} tokens", file=sys.stderr)
            with open(work / "results.jsonl", "a") as f:
                f.write(json.dumps(r) + "\n")
    print(table(results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
