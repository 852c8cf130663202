"""mcprm's own host work per continuation, without an engine: what a GPU worker's Python spends besides vLLM.

A vLLM worker runs mcprm's scheduler, strategies and grading in the same process as vLLM's front end (its
``LLM`` object, whose output processing and detokenization take about 40 us per sequence per engine step). Every
millisecond mcprm's own Python holds the interpreter is a millisecond the engine loop's thread waits, and the GPU
with it. This times that share on a CPU: the real scheduler, strategy, prompt builder, tokenizer (the bundled
model's) and grader (``grade_batch`` with its process pool), labeling real GSM8K-train solutions of the real 1.5B
model (the data run's first generated chunk), with a stand-in engine that answers every request at once from a
thread (``--engine-delay-ms``: after a pause) with a continuation ending in the gold answer or a wrong one.

It prints, per strategy: continuations, this process's CPU seconds (every thread: scheduler and stand-in engine;
the grader's processes apart), CPU milliseconds per continuation, and the continuations per second one worker's
Python could feed at most if it did nothing else, against the rate a GPU run needs (``--target-tok-s`` over the
mean continuation length of a real run). ``--profile`` adds cProfile's top functions by own time.

    python bench/bench_host_path.py --solutions 256 [--strategies default,per-step] [--profile]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHUNK = ROOT / "bench/gpu_e2e/results/data_run/gen/h0375.jsonl.gz"
# a real run's mean continuation: 5,146,860 tokens over 28,247 continuations (1,500 GSM8K-train solutions, the
# defaults, the real 1.5B; BENCHMARKS.md "Engine levers on one H200")
MEAN_TOKENS = 182


class InstantEngine:
    """A streaming backend (``submit`` -> futures) that completes every request from its own thread: the
    continuation is the solution's own remaining text with the gold answer (probability ``p_right``) or a wrong
    one, so the grader sees real text of real length."""

    name = "instant"
    streaming = True

    def __init__(self, gold: dict[str, str], p_right: float, delay_s: float, seed: int = 0):
        from rollouts.base import BackendStats

        self.gold = gold  # a request's group (its solution's key) -> the gold answer
        self.stats = BackendStats()
        self.p_right, self.delay_s = p_right, delay_s
        self.rng = random.Random(seed)
        self.model = None
        self._q: list = []
        self._cv = threading.Condition()
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def submit(self, requests, sampling):
        futs = [Future() for _ in requests]
        with self._cv:
            self._q.extend(zip(requests, futs, strict=True))
            self._cv.notify()
        return futs

    def generate(self, requests, sampling):
        return [f.result() for f in self.submit(requests, sampling)]

    def _run(self):
        from rollouts.base import Completion

        while True:
            with self._cv:
                while not self._q and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                batch, self._q = self._q, []
            if self.delay_s:
                time.sleep(self.delay_s)
            for req, fut in batch:
                gold = self.gold.get(req.group, "0")
                outs = []
                for _ in range(req.n):
                    ans = gold if self.rng.random() < self.p_right else str(self.rng.randint(1, 10_000))
                    body = " ".join(["Then we compute the next quantity step by step."] * 14)
                    text = f"{body}\nSo the final answer is $\\boxed{{{ans}}}$."
                    outs.append(Completion(text, MEAN_TOKENS, "stop", ()))
                self.stats.requests += 1
                self.stats.samples += req.n
                self.stats.generated_tokens += MEAN_TOKENS * req.n
                fut.set_result(outs)

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._t.join(timeout=5)


def solutions(n: int):
    from pipeline.solution import Solution

    out = []
    with gzip.open(CHUNK, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.append(Solution(id=r["id"], problem=r["problem"], answer=str(r["answer"]),
                                steps=tuple(r["steps"])))
            if len(out) >= n:
                break
    return out


def run(strategy: str, sols, args) -> dict:
    from pipeline.config import LabelConfig
    from pipeline.execution.shard_worker import grade_callable, scheduler_settings
    from pipeline.labeling.scheduler import Scheduler

    opts = {} if strategy == "default" else {"strategy": strategy}
    cfg = LabelConfig(input=["x"], output="/tmp/unused", backend="vllm", model=str(ROOT / "data/model"), **opts)
    prompt = cfg.prompt_builder()
    settings = dataclasses.replace(scheduler_settings(cfg, prompt), streaming=True)  # as a vLLM worker streams
    grade = grade_callable(cfg, args.cpus)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ROOT / "data/model"))
    encode = (lambda p: tuple(tok.encode(p, add_special_tokens=False)))  # noqa: E731 - the backend's encode_prompt
    eng = InstantEngine({s.key: s.answer for s in sols}, args.p_right, args.engine_delay_ms / 1000)
    sched = Scheduler(eng, grade, prompt, settings, encode=encode if cfg.reuse_rollouts else None)
    grade([("1", "\\boxed{1}")])  # the grader's processes up before the clock starts
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    out = sched.label(sols)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    if prof is not None:
        prof.disable()
    eng.close()
    rollouts = sum(o.rollouts for o in out)
    row = {"strategy": strategy, "solutions": len(sols), "continuations": rollouts, "cpu_s": round(cpu, 2),
           "wall_s": round(wall, 2), "cpu_ms_per_continuation": round(1000 * cpu / max(1, rollouts), 3)}
    row["max_continuations_per_s"] = round(rollouts / cpu, 1) if cpu else None
    row["needed_per_s"] = round(args.target_tok_s / MEAN_TOKENS, 1)
    if prof is not None:
        import pstats

        st = pstats.Stats(prof)
        top = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[: args.profile]
        row["top_own_time"] = [(f"{Path(k[0]).name}:{k[1]}:{k[2]}", round(v[2], 3)) for k, v in top]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solutions", type=int, default=256)
    ap.add_argument("--strategies", default="default,per-step")
    ap.add_argument("--p-right", type=float, default=0.6)
    ap.add_argument("--engine-delay-ms", type=float, default=0.0)
    ap.add_argument("--cpus", type=float, default=4.0, help="the worker's CPUs (its grader processes: cpus - 2)")
    ap.add_argument("--target-tok-s", type=float, default=60_000)
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile's top N functions by own time")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sols = solutions(args.solutions)
    rows = [run(s, sols, args) for s in args.strategies.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'strategy':14} {'solutions':>9} {'continuations':>13} {'CPU s':>7} {'CPU ms each':>11} "
          f"{'max /s':>8} {'needed /s':>9}")
    for r in rows:
        print(f"{r['strategy']:14} {r['solutions']:>9} {r['continuations']:>13} {r['cpu_s']:>7} "
              f"{r['cpu_ms_per_continuation']:>11} {r['max_continuations_per_s']:>8} {r['needed_per_s']:>9}")
        for name, s in r.get("top_own_time", []):
            print(f"    {s:8.3f} s  {name}")


if __name__ == "__main__":
    main()
