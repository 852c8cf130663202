#!/usr/bin/env python3
"""The frontier (label quality vs tokens) of every strategy x label rule, replayed on cached rollouts.

``bench/frontier_cache.py record`` keeps every continuation of per-step at a large K (64) for fresh solutions of
two seeds. Here each strategy runs its real code (``Scheduler`` + ``pipeline.labeling.strategies`` + the real
grader, memoised) on :class:`frontier_cache.ReplayBackend`, which hands every prefix its cached continuations in
order, and every run is scored against the exact checker under every label rule. Tokens are the generated tokens
of the continuations a strategy consumed.

    python bench/bench_frontier.py table --ks 4,8,16      # every strategy x rule, A + B (~1 min)
    python bench/bench_frontier.py frontier              # F1 vs tokens up to K=64, held-out check, paired diffs
    python bench/bench_frontier.py verify                # a live per-step run recorded and replayed (CPU)
    python bench/bench_frontier.py compare --live bench/out/frontier/live-20261302.json   # live vs replay
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from frontier_cache import ReplayBackend, load_solutions, make_cfg, read_cache  # noqa: E402

DATA = ROOT / "bench" / "out" / "frontier"
SEEDS = (20261301, 20261302)
STRATEGIES = ("per-step", "adaptive", "binary-search", "sequential")


class Seed:
    def __init__(self, seed: int, data_dir: Path = DATA):
        from pipeline.bundled.synthetic import check_steps

        self.seed = seed
        self.path = data_dir / f"solutions-{seed}.jsonl"
        self.sols = load_solutions(self.path)
        self.cache = read_cache(data_dir / f"cache-{seed}.json.gz")["cache"]
        self.truth = [check_steps(s.problem, list(s.steps)).first_error for s in self.sols]


_GRADE_MEMO: dict = {}


def memo_grader(cfg):
    """The worker's grader (pipeline.execution.shard_worker.ShardWorker), memoised by (gold, response)."""
    import functools

    from graders import GraderConfig, grade_batch

    g = functools.partial(grade_batch, config=GraderConfig(timeout_s=cfg.grader_timeout, workers=1),
                          grader=cfg.grader)

    def grade(pairs):
        missing = [p for p in dict.fromkeys(pairs) if p not in _GRADE_MEMO]
        if missing:
            _GRADE_MEMO.update(zip(missing, g(missing)))
        return [_GRADE_MEMO[p] for p in pairs]

    return grade


def replay(sd: Seed, strategy: str, k: int, backend=None, sols=None, strategy_overrides=None, grader=None,
           reuse: bool | None = None, **params):
    """LabeledSolutions of ``strategy`` at ``k`` on seed ``sd``: ShardWorker.label's code on a replay backend
    (or on ``backend``); ``strategy_overrides``: StrategyParams fields that have no CLI option."""
    import dataclasses

    from pipeline.execution.shard_worker import strategy_params
    from pipeline.labeling.scheduler import Scheduler, SchedulerSettings

    cfg = make_cfg(sd.path, DATA / "scratch", strategy=strategy, k=k, **params)
    prompt = cfg.prompt_builder()
    sp = dataclasses.replace(strategy_params(cfg), **(strategy_overrides or {}))
    settings = SchedulerSettings(cfg.strategy, sp, sampling=cfg.sampling_config(prompt), seed=cfg.seed,
                                 max_batch_requests=cfg.max_batch_requests,
                                 reuse=cfg.reuse_rollouts if reuse is None else reuse)
    sched = Scheduler(backend or ReplayBackend(sd.cache), grader or memo_grader(cfg), prompt, settings)
    return sched.label(sd.sols if sols is None else sols)


def rows_of(labeled, k: int) -> list[dict]:
    from pipeline.storage.schema import to_record

    return [to_record(ls, k) for ls in labeled]


def score(rows: list[dict], truth: list[int], rule: str | None = None, params=None) -> dict:
    """``mcprm eval`` against the exact checker (pipeline.commands.evaluate.evaluate's metrics and standard errors),
    in memory; ``rule`` relabels every row from its stored counts first, as ``--label-rule`` does."""
    from pipeline.commands.evaluate import _harmonic, _standard_errors
    from pipeline.labeling.rules import apply_rule

    n_err = n_err_hit = n_ok = n_ok_hit = step_n = step_hit = brier_n = 0
    brier_sum = brier_sq = tok = tok_sq = 0.0
    hits = []  # per solution: first error right?
    for r, fe_true in zip(rows, truth):
        if rule:
            res = apply_rule(r, rule, params)
            r = {**r, "labels": res.labels, "first_error": res.first_error, "mc_value": res.scores}
        tok += r["rollout_tokens"]
        tok_sq += float(r["rollout_tokens"]) ** 2
        pred = r["first_error"]
        if fe_true == -1:
            n_ok += 1
            n_ok_hit += pred == -1
        else:
            n_err += 1
            n_err_hit += pred == fe_true
        hits.append((fe_true != -1, pred == fe_true))
        for i, (lab, val) in enumerate(zip(r["labels"], r["mc_value"])):
            if fe_true != -1 and i > fe_true:
                continue
            truth_i = fe_true == -1 or i != fe_true
            if val is not None:
                e = (val - (1.0 if truth_i else 0.0)) ** 2
                brier_sum += e
                brier_sq += e * e
                brier_n += 1
            if lab is None:
                continue
            step_n += 1
            step_hit += lab == truth_i
    n = len(rows)
    ae = n_err_hit / n_err if n_err else None
    ac = n_ok_hit / n_ok if n_ok else None
    sa = step_hit / step_n if step_n else None
    out = {"solutions": n, "with_error": n_err, "acc_error": ae, "acc_correct": ac, "f1": _harmonic(ae, ac),
           "step_accuracy": sa, "brier": brier_sum / brier_n if brier_n else None, "tokens": tok,
           "rollouts": sum(r["rollouts"] for r in rows)}
    out.update(_standard_errors(ae, n_err, ac, n_ok, sa, step_n, brier_sum, brier_sq, brier_n, tok, tok_sq, n))
    return out


def pooled_score(parts: list[tuple[list[dict], list[int]]], rule=None, params=None) -> dict:
    rows = [r for rs, _ in parts for r in rs]
    truth = [t for _, ts in parts for t in ts]
    return score(rows, truth, rule, params)


# ------------------------------------------------------------------------------------------------ table
def table(a) -> None:
    from pipeline.labeling.rules import RULES

    seeds = [Seed(int(s)) for s in a.seeds.split(",")]
    for sd in seeds:
        print(f"seed {sd.seed}: {len(sd.sols)} solutions, {sum(t != -1 for t in sd.truth)} with an error",
              flush=True)
    rules = [None] + (list(RULES) if a.rules == "all" else [])
    out = []
    for k in [int(x) for x in a.ks.split(",")]:
        for strategy in a.strategies.split(","):
            t = time.perf_counter()
            over = {"bisect_fraction": a.bisect_fraction} if a.bisect_fraction is not None else None
            parts = [(rows_of(replay(sd, strategy, k, strategy_overrides=over, reuse=a.reuse), k), sd.truth)
                     for sd in seeds]
            for rule in rules:
                m = pooled_score(parts, rule)
                per_seed = [score(rs, ts, rule)["f1"] for rs, ts in parts]
                out.append({"strategy": strategy, "k": k, "rule": rule or "stored", **m, "f1_by_seed": per_seed})
            print(f"  {strategy} K={k}: {time.perf_counter() - t:.0f} s", flush=True)
    print_table(out)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


def fmt(v, se=None, d=3):
    if v is None:
        return "n/a"
    return f"{v:.{d}f}" + ("" if se is None else f" ± {se:.{d}f}")


def print_table(out: list[dict], markdown: bool = True) -> None:
    print("\n| strategy | K | tokens/sol (vs per-step K=8) | rule | F1 | F1 by seed | acc_error | acc_correct | "
          "step acc | Brier |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ref = next((r for r in out if r["strategy"] == "per-step" and r["k"] == 8 and r["rule"] == "stored"), None)
    last = None
    for r in out:
        head = (r["strategy"], r["k"])
        tps = r["tokens"] / r["solutions"]
        ratio = f" ({tps / (ref['tokens'] / ref['solutions']):.2f})" if ref else ""
        first = head != last
        last = head
        print(f"| {r['strategy'] if first else ''} | {r['k'] if first else ''} | "
              f"{fmt(tps, r['tokens_per_solution_se'], 0) + ratio if first else ''} | {r['rule']} | "
              f"{fmt(r['f1'], r['f1_se'])} | {' / '.join(fmt(x) for x in r['f1_by_seed'])} | {fmt(r['acc_error'])} | "
              f"{fmt(r['acc_correct'])} | {fmt(r['step_accuracy'], r['step_accuracy_se'])} | "
              f"{fmt(r['brier'], r['brier_se'])} |")


# ------------------------------------------------------------------------------------------------ verify
def verify(a) -> None:
    """Replay == live, on this machine's CPU: (1) exactly, a live per-step run recorded and replayed; (2) in
    distribution, a live run of another strategy vs its replay on the same solutions (other draws)."""
    from frontier_cache import RecordingBackend

    from pipeline import bundled
    from rollouts.hf import HFBackend

    sd = Seed(SEEDS[0])
    hf = HFBackend(str(bundled.model_dir()), device="cpu")
    sols = sd.sols[: a.exact_n]
    cache: dict = {}
    t = time.perf_counter()
    live = replay(sd, "per-step", a.exact_k, backend=RecordingBackend(hf, cache), sols=sols)
    rep = replay(sd, "per-step", a.exact_k, backend=ReplayBackend(cache), sols=sols)
    same = all(x.labels == y.labels and x.first_error == y.first_error and x.stats == y.stats
               and x.rollouts == y.rollouts and x.rollout_tokens == y.rollout_tokens for x, y in zip(live, rep))
    print(f"exact: live per-step K={a.exact_k} on {len(sols)} solutions ({sum(x.rollouts for x in live)} rollouts, "
          f"{sum(x.rollout_tokens for x in live)} tokens, {time.perf_counter() - t:.0f} s) replayed from its recording: "
          f"{'identical labels, counts and tokens' if same else 'DIFFERENT'}", flush=True)
    sols = sd.sols[a.exact_n : a.exact_n + a.stat_n]
    truth = sd.truth[a.exact_n : a.exact_n + a.stat_n]
    t = time.perf_counter()
    live = rows_of(replay(sd, a.strategy, a.k, backend=hf, sols=sols), a.k)
    dt = time.perf_counter() - t
    rep = rows_of(replay(sd, a.strategy, a.k, sols=sols), a.k)
    for name, rows in (("live", live), ("replay", rep)):
        m = score(rows, truth)
        print(f"{name:6} {a.strategy} K={a.k} on {len(rows)} solutions: F1 {fmt(m['f1'], m['f1_se'])}, acc_error "
              f"{fmt(m['acc_error'])}, tokens/sol {fmt(m['tokens'] / len(rows), m['tokens_per_solution_se'], 0)}"
              + (f" ({dt:.0f} s)" if name == "live" else ""), flush=True)
    agree = sum(x["first_error"] == y["first_error"] for x, y in zip(live, rep))
    print(f"same first error in {agree} of {len(live)} solutions", flush=True)


# ------------------------------------------------------------------------------------------------ frontier
# (strategy, bisect fraction, rollout reuse, relative drop, Ks); the last binary-search row at K=20 is the
# default of `mcprm label`
FRONTIER = (("per-step", None, False, None, (8, 16, 32, 64)), ("per-step", None, True, None, (8, 16)),
            ("adaptive", None, False, None, (8, 16, 32, 64)),
            ("binary-search", None, False, None, (8, 16, 22, 26, 32, 64)),
            ("binary-search", 0.6, False, None, (8, 16, 22, 32, 64)),
            ("binary-search", None, True, None, (8, 16, 20, 24)),
            ("binary-search", 0.6, True, None, (8, 12, 16, 20, 24, 32)),
            ("binary-search", 0.6, True, 0.25, (8, 12, 16, 20, 24, 32)),
            ("sequential", None, False, None, (8, 16)))
PAIRS = ((20261301, 20261302), (20261303, 20261304))  # A + B (recorded at K=64), C + D (K=32)


def _run(sd: Seed, strategy: str, k: int, frac=None, reuse: bool = False, rho=None) -> list[dict]:
    """``frac`` None: classic bisection (0.5); ``reuse``: rollout reuse (LabelConfig.reuse_rollouts); ``rho``:
    binary-search's relative drop (LabelConfig.relative_drop; None = off)."""
    over = {"bisect_fraction": 0.5 if frac is None else frac, "relative_drop": rho}
    return rows_of(replay(sd, strategy, k, strategy_overrides=over, reuse=reuse), k)


def paired_f1_diff(ra, rb, truth, reps: int = 1000) -> tuple[float, float]:
    """95% interval of F1(a) - F1(b) over the same solutions (paired bootstrap)."""
    import random

    rnd = random.Random(0)
    ha = [x["first_error"] == t for x, t in zip(ra, truth)]
    hb = [x["first_error"] == t for x, t in zip(rb, truth)]
    err = [t != -1 for t in truth]
    n, diffs = len(truth), []

    def f1(h, idx, ne):
        ae = sum(h[i] for i in idx if err[i]) / ne
        ac = sum(h[i] for i in idx if not err[i]) / (n - ne)
        return 0.0 if ae + ac == 0 else 2 * ae * ac / (ae + ac)

    for _ in range(reps):
        idx = [rnd.randrange(n) for _ in range(n)]
        ne = sum(err[i] for i in idx)
        diffs.append(f1(ha, idx, ne) - f1(hb, idx, ne))
    diffs.sort()
    return diffs[int(0.025 * reps)], diffs[int(0.975 * reps) - 1]


def frontier(a) -> None:
    """The frontier table (stored labels, A + B and C + D), the held-out check of the target (K chosen on seed A:
    the largest K within per-step K=8's tokens on A; measured on B, C, D) and paired differences."""
    seeds = {s: Seed(s) for p in PAIRS for s in p}
    runs: dict = {}

    def run(s, strategy, k, frac=None, reuse=False, rho=None):
        key = (s, strategy, k, frac, reuse, rho)
        if key not in runs:
            runs[key] = _run(seeds[s], strategy, k, frac, reuse, rho)
        return runs[key]

    def pooled(ss, strategy, k, frac=None, reuse=False, rho=None):
        rows = [r for s in ss for r in run(s, strategy, k, frac, reuse, rho)]
        return score(rows, [t for s in ss for t in seeds[s].truth]), rows

    def name_of(strategy, frac, reuse, rho=None):
        return (strategy + ("" if frac is None else f" (bisect {frac})") + (" + reuse" if reuse else "")
                + ("" if rho is None else f" + drop {rho}"))

    print("| strategy | K | A+B tokens/sol (× per-step K=8) | A+B F1 | C+D tokens/sol (×) | C+D F1 |")
    print("|---|---|---|---|---|---|")
    for strategy, frac, reuse, rho, ks in FRONTIER:
        for k in ks:
            cells = []
            for ss, kmax in zip(PAIRS, (64, 32)):
                if k > kmax:
                    cells += ["", ""]
                    continue
                m, rows = pooled(ss, strategy, k, frac, reuse, rho)
                ref = pooled(ss, "per-step", 8)[0]
                cells += [f"{fmt(m['tokens'] / len(rows), m['tokens_per_solution_se'], 0)} "
                          f"({m['tokens'] / ref['tokens']:.2f})", fmt(m["f1"], m["f1_se"])]
            print(f"| {name_of(strategy, frac, reuse, rho)} | {k} | " + " | ".join(cells) + " |", flush=True)
    calib, held = PAIRS[0][0], [PAIRS[0][1], *PAIRS[1]]
    print(f"\nheld-out check: K chosen on {calib} (largest K within per-step K=8's tokens), measured on {held}")
    for strategy, frac, reuse, rho, ks in (("binary-search", None, False, None, range(16, 33, 2)),
                                           ("binary-search", 0.6, False, None, range(14, 31, 2)),
                                           ("binary-search", 0.6, True, None, range(12, 31, 2)),
                                           ("binary-search", 0.6, True, 0.25, range(12, 31, 2))):
        ref_tok = sum(r["rollout_tokens"] for r in run(calib, "per-step", 8))
        ok = [k for k in ks
              if sum(r["rollout_tokens"] for r in run(calib, strategy, k, frac, reuse, rho)) <= ref_tok]
        k = max(ok)
        cells = []
        for s in [calib, *held]:
            m = score(run(s, strategy, k, frac, reuse, rho), seeds[s].truth)
            tr = m["tokens"] / sum(r["rollout_tokens"] for r in run(s, "per-step", 8))
            cells.append(f"{fmt(m['f1'], m['f1_se'])}, {tr:.2f}x")
        m, rows = pooled(held, strategy, k, frac, reuse, rho)
        ref, _ = pooled(held, "per-step", 8)
        name = name_of(strategy, frac, reuse, rho)
        print(f"| {name}, K={k} | " + " | ".join(cells) + f" | {fmt(m['f1'], m['f1_se'])}, "
              f"{m['tokens'] / ref['tokens']:.2f}x | {fmt(ref['f1'], ref['f1_se'])} |", flush=True)
    print("\npaired differences over all four seeds (same continuations), 95% bootstrap intervals:")
    every = [s for p in PAIRS for s in p]
    truth = [t for s in every for t in seeds[s].truth]
    pairs = ((("binary-search", 20, 0.6, True, 0.25), ("per-step", 8, None, False, None)),
             (("binary-search", 20, 0.6, True, 0.25), ("binary-search", 8, None, False, None)),
             (("binary-search", 20, 0.6, True, 0.25), ("binary-search", 20, 0.6, True, None)),
             (("binary-search", 16, 0.6, True, None), ("binary-search", 16, 0.6, False, None)),
             (("binary-search", 8, 0.6, True, None), ("binary-search", 8, 0.6, False, None)),
             (("binary-search", 8, None, True, None), ("binary-search", 8, None, False, None)),
             (("per-step", 8, None, True, None), ("per-step", 8, None, False, None)),
             (("binary-search", 8, 0.6, False, None), ("binary-search", 8, None, False, None)),
             (("binary-search", 22, 0.6, False, None), ("binary-search", 26, None, False, None)))
    for a_, b_ in pairs:
        (ma, ra), (mb, rb) = pooled(every, *a_), pooled(every, *b_)
        lo, hi = paired_f1_diff(ra, rb, truth)
        print(f"{name_of(a_[0], a_[2], a_[3], a_[4])} K={a_[1]} vs {name_of(b_[0], b_[2], b_[3], b_[4])} K={b_[1]}: "
              f"{ma['f1']:.3f} vs {mb['f1']:.3f} ({ma['tokens'] / len(ra):.0f} vs "
              f"{mb['tokens'] / len(rb):.0f} tokens/sol): {ma['f1'] - mb['f1']:+.3f} [{lo:+.3f}, {hi:+.3f}]", flush=True)


def compare(a) -> None:
    """Live runs (``frontier_cache.py live``, e.g. on a GPU) vs their replay on the same solutions, both graded by
    ``frontier_cache.light_grade``: the same strategy code on other draws of the same model."""
    from frontier_cache import light_grade

    sd = Seed(a.seed)
    live = json.loads(Path(a.live).read_text())
    for spec, got in live.items():
        strategy, k = spec.split(":")
        k = int(k)
        ids = {r["id"] for r in got}
        idx = [i for i, s in enumerate(sd.sols) if s.id in ids]
        truth = [sd.truth[i] for i in idx]
        for r in got:  # the columns score() reads
            r["mc_value"] = [c / t if t else None for c, t in zip(r["mc_correct"], r["mc_total"])]
        rep = rows_of(replay(sd, strategy, k, sols=[sd.sols[i] for i in idx], grader=light_grade), k)
        for name, rows in (("live", got), ("replay", rep)):
            m = score(rows, truth)
            print(f"{spec:18} {name:6} n={len(rows)}: F1 {fmt(m['f1'], m['f1_se'])}, acc_error {fmt(m['acc_error'])}, "
                  f"acc_correct {fmt(m['acc_correct'])}, step acc {fmt(m['step_accuracy'], m['step_accuracy_se'])}, "
                  f"tokens/sol {fmt(m['tokens'] / len(rows), m['tokens_per_solution_se'], 0)}, "
                  f"rollouts/sol {m['rollouts'] / len(rows):.1f}", flush=True)
        same = sum(x["first_error"] == y["first_error"] for x, y in zip(got, rep))
        print(f"{spec:18} same first error in {same} of {len(got)} solutions", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("table")
    t.add_argument("--ks", default="4,8,16")
    t.add_argument("--strategies", default=",".join(STRATEGIES))
    t.add_argument("--json", default=None)
    t.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    t.add_argument("--rules", default="all", help="'all' or 'stored' (the strategy's own labels only)")
    t.add_argument("--bisect-fraction", type=float, default=None,
                   help="binary-search's probe point (default: the product's, LabelConfig.bisect_fraction)")
    t.add_argument("--reuse", action=argparse.BooleanOptionalAction, default=None,
                   help="rollout reuse (default: the product's, LabelConfig.reuse_rollouts)")
    v = sub.add_parser("verify")
    v.add_argument("--exact-n", type=int, default=12)
    v.add_argument("--exact-k", type=int, default=4)
    v.add_argument("--stat-n", type=int, default=60)
    v.add_argument("--strategy", default="binary-search")
    v.add_argument("--k", type=int, default=22)
    sub.add_parser("frontier")
    c = sub.add_parser("compare")
    c.add_argument("--live", required=True)
    c.add_argument("--seed", type=int, default=SEEDS[1])
    a = ap.parse_args()
    if a.cmd == "compare":
        compare(a)
    elif a.cmd == "frontier":
        frontier(a)
    elif a.cmd == "table":
        table(a)
    elif a.cmd == "verify":
        verify(a)


if __name__ == "__main__":
    main()
