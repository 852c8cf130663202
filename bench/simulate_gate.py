#!/usr/bin/env python3
"""Labeling strategies run by mcprm's own scheduler on the stored draws of a per-step corpus: F1 against a
reference and the draws and tokens each design would spend, with no GPU.

``bench/replay_reach_gate.py`` re-implements the reach gate's search in a few lines, so it leaves out what the
real search does besides (speculation, the relative drop, the settled step-1 probe's exact waves) and priced a
real run at 0.37x of per-step's tokens that cost 0.45x. Here the strategy code itself runs
(:class:`pipeline.labeling.scheduler.Scheduler` with the options of ``mcprm label``), and only the engine is
replaced: a request for ``n`` continuations of a solution's prefix ``i`` is answered from that prefix's stored
per-step draws, ``c`` successes among ``K``, dealt without replacement in a random order (then, past ``K``,
drawn at the rate ``c / K``). Each continuation is priced by the prefix it continues
(:func:`replay_reach_gate.draw_weights`: what is left of the solution to write, scaled to the row's stored
tokens). What this does not model: drawing ahead under the engine's capacity (``--tail-fill``: draws made and
dropped), rollout reuse (a continuation that writes the solution's next steps verbatim), ungradable answers, and
a design's draws past the stored K (drawn at the stored rate, so they add no information the run did not have).
Where reuse is common its F1 is low: on the bundled task (its model often writes the solution's own next steps)
the K=4 step-1 gate simulated at F1 0.390 against its real run's 0.504 and the defaults (K=20) at 0.455 against
0.643 (the gate's tokens within 0.1% of its run's, the defaults' 8% over). On the real 1.5B's ProcessBench-MATH draws reuse is rare and the
simulated gate matched its run (``tests/bench/test_simulate_gate.py``).

The draws are per-step's own, so a design chosen here is not held out: choose on one corpus, read on another
(another seed's draws), and run the chosen one on a GPU at a seed never used.

    python bench/simulate_gate.py PER_STEP_CORPUS REFERENCE.jsonl --design NAME:"OPTIONS" ...

``OPTIONS`` are `mcprm label` strategy options (``--strategy``, ``--k``, ``--reach-gate``, ``--trust-pass-rate``,
``--no-speculate``, ...). Prints one table: per design, F1 with its 95% bootstrap interval, the paired difference
from per-step's stored first errors, rollouts and tokens as a share of per-step's, and the label statuses.
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

OK, NO = "\x00reached", "\x00missed"  # continuation texts: never a solution's own text
COLUMNS = ["id", "problem", "steps", "first_error", "solution_correct", "mc_correct", "mc_total", "mc_reused",
           "mc_reused_correct", "rollouts", "rollout_tokens"]


class _Prompt:
    """Prompts that name the solution (its row index, carried as the problem) and the prefix's step count."""

    def prefix(self, problem, steps):
        return f"{problem}\x01{len(steps)}"


class StoredDraws:
    """The engine: each prefix's stored outcomes, dealt in a random order (seeded per prefix)."""

    name = "stored-draws"

    def __init__(self, rows: list[dict], prices: list[list[float]], seed: int = 0):
        from rollouts.base import BackendStats

        self.rows, self.prices, self.seed = rows, prices, seed
        self.decks: dict[tuple[int, int], list[bool]] = {}
        self.stats = BackendStats()

    def _deck(self, r: int, i: int) -> list[bool]:
        key = (r, i)
        if key not in self.decks:
            row = self.rows[r]
            c = row["mc_correct"][i] - row["mc_reused_correct"][i]
            n = row["mc_total"][i] - row["mc_reused"][i]
            deck = [True] * c + [False] * (n - c)
            random.Random(hash((self.seed, r, i)) & 0xFFFFFFFF).shuffle(deck)
            self.decks[key] = deck
        return self.decks[key]

    def _draw(self, r: int, i: int, rng: random.Random) -> bool:
        row = self.rows[r]
        if i >= len(row["mc_total"]) - 1 and row["mc_total"][i] == 0:  # the full solution: its own answer
            return bool(row["solution_correct"])
        deck = self._deck(r, i)
        if deck:
            return deck.pop()
        c = row["mc_correct"][i] - row["mc_reused_correct"][i]
        n = row["mc_total"][i] - row["mc_reused"][i]
        return n > 0 and rng.random() < c / n

    def generate(self, requests, sampling):
        from rollouts.base import Completion

        out = []
        for q in requests:
            r_text, n_steps = q.prompt.split("\x01")
            r, i = int(r_text), int(n_steps) - 1
            rng = random.Random(q.seed)
            if i < 0:  # the bare problem: step 1's draws stand in (a per-step corpus has none of its own)
                i = 0
            price = max(1, round(self.prices[r][i]))
            out.append([Completion(OK if self._draw(r, i, rng) else NO, price) for _ in range(q.n)])
        return out

    def close(self):
        pass


def _grader(rows: list[dict]):
    from graders.verdict import Verdict

    def grade(pairs):
        out = []
        for gold, response in pairs:
            if response in (OK, NO):
                out.append(Verdict(response == OK, "stored draw", None))
            else:  # a solution's own text: its stored verdict
                out.append(Verdict(bool(rows[int(gold)]["solution_correct"]), "stored verdict", None))
        return out

    return grade


def label_options(options: str):
    """The strategy and its parameters for ``mcprm label`` strategy ``options`` ("--k 8 --no-speculate"), with
    the run's own defaults for the rest (:meth:`pipeline.config.LabelConfig.from_dict`)."""
    from pipeline.config import LabelConfig, option_fields
    from pipeline.execution.shard_worker import strategy_params

    fields, data, words = option_fields(), {}, shlex.split(options)
    while words:
        w = words.pop(0)
        if not w.startswith("--"):
            raise SystemExit(f"design options: {w!r} is not an option")
        name = w[2:].replace("-", "_")
        if name.startswith("no_") and name[3:] in fields and fields[name[3:]][1] is bool:
            data[name[3:]] = False
        elif name in fields and fields[name][1] is bool:
            data[name] = True
        elif name in fields:
            value = words.pop(0)
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    pass
            data[name] = value
        else:
            raise SystemExit(f"design options: unknown option {w}")
    cfg = LabelConfig.from_dict(data, source="design options")
    return cfg.strategy, strategy_params(cfg)


def simulate(rows: list[dict], strategy: str, params, seed: int = 0):
    """One LabeledSolution per row, labeled by ``strategy`` with ``params`` on the rows' stored draws."""
    from replay_reach_gate import draw_weights

    from pipeline.labeling.scheduler import Scheduler, SchedulerSettings
    from pipeline.solution import Solution

    prices = [draw_weights(r)[0] for r in rows]
    sols = [Solution(id=str(r["id"]), problem=str(j), answer=str(j), steps=tuple(r["steps"]))
            for j, r in enumerate(rows)]
    sched = Scheduler(StoredDraws(rows, prices, seed), _grader(rows), _Prompt(),
                      SchedulerSettings(strategy, params, seed=seed))
    return sched.label(sols)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", help="a per-step corpus (every prefix but the last sampled K times)")
    ap.add_argument("reference", help="JSONL with id and label (the human first error)")
    ap.add_argument("--design", action="append", default=[], metavar='NAME:"OPTIONS"',
                    help="a design: its name and `mcprm label` strategy options")
    ap.add_argument("--seed", type=int, default=0, help="the order the stored draws are dealt in")
    a = ap.parse_args(argv)
    from replay_reach_gate import _breakdown

    from pipeline.corpus import read_corpus

    bd = _breakdown()
    ref = bd.read_reference(a.reference)
    rows = sorted((r for r in read_corpus(a.corpus, columns=COLUMNS).to_pylist() if str(r["id"]) in ref),
                  key=lambda r: str(r["id"]))
    truth = [ref[str(r["id"])] for r in rows]
    base = [int(r["first_error"]) for r in rows]
    tok_ps = sum(r["rollout_tokens"] for r in rows)
    n_ps = sum(r["rollouts"] for r in rows)
    rs = bd._resamples(len(rows))
    print(f"{len(rows)} solutions; per-step's stored F1 {bd._f1(base, truth):.3f}\n")
    print("| design | F1 [95%] | minus per-step [paired 95%] | rollouts (x per-step) | tokens (x per-step) | statuses |")
    print("|---|---:|---:|---:|---:|---|")
    for spec in a.design:
        name, _, options = spec.partition(":")
        strategy, params = label_options(options)
        out = simulate(rows, strategy, params, a.seed)
        pred = [o.first_error for o in out]
        n, tok = sum(o.rollouts for o in out), sum(o.rollout_tokens for o in out)
        lo, hi = bd.f1_interval(pred, truth, rs)
        d = bd.paired_difference(pred, base, truth, rs)
        st = Counter(o.extra.get("label_status", "-") for o in out)
        print(f"| {name} | {bd._f1(pred, truth):.3f} [{lo:.3f}, {hi:.3f}] | {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] "
              f"| {n:,} ({n / n_ps:.2f}x) | {tok:,} ({tok / tok_ps:.2f}x) | "
              + ", ".join(f"{k} {v}" for k, v in sorted(st.items())) + " |")


if __name__ == "__main__":
    main()
