"""Is the hf backend's sampling distribution independent of batch composition? (soft values)

Per-step K=8 sends one request of n=8 per step prefix; binary-search sends waves of n=2 of many prefixes of
different solutions batched together (left padding, shared-prefix KV "trunks", position ids, masks). If a
prompt's continuation distribution depended on what else is in the batch, the two strategies' success rates
would differ. Two checks on the bundled model (``data/model``) with the pipeline's prompts (plain format, the
prefix that ends with step i, stop ``"\\nProblem:"``) and the real grader:

1. Deterministic (the sharp test): the next-token log-probabilities at every decode step of a request, recorded
   inside the backend's sampler, alone vs in a mixed padded batch, for the trunk (prefix-KV) path and the plain
   path, and the first token's against a reference forward pass of the unpadded prompt with no cache.
2. Statistical: ``--n`` continuations per prompt under (A) trunk path, requests of n=8 of one solution's
   prefixes (what per-step sends), (B) trunk path, waves of n=2 of every selected prompt mixed with the
   prefixes of other solutions of very different lengths (what binary-search sends), (C) the plain path, the
   same n=2 mix. Graded by the real grader against the gold (a continuation without a readable answer is a
   failure, the pipeline's rule); two-proportion z-tests A vs B and A vs C.

Prompts: step prefixes of ``--sample`` whose success rate in a pilot (``--pilot`` draws each), or in a per-step
corpus of it (``--per-step``), is in 0.15-0.85.

``--soft-ratio BS:PS [BS:PS ...]`` instead compares labeled corpora of one sample: the mean
``mc_value`` of a binary-search corpus over a per-step corpus on the steps both estimated (last step excluded),
with a bootstrap over solutions, per pair and pooled (one pair per run seed).

    python bench/bench_hf_batch_invariance.py                 # 6 prompts, 400 draws each
    python bench/bench_hf_batch_invariance.py --sample /tmp/fresh/sample.jsonl --per-step /tmp/fresh-ps --n 160
    python bench/bench_hf_batch_invariance.py --soft-ratio /tmp/bs7:/tmp/ps7 /tmp/bs8:/tmp/ps8
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rollouts import GenRequest, SamplingConfig  # noqa: E402
from rollouts.prompts import make_prompt_format  # noqa: E402

FMT = make_prompt_format("plain")


def recording_backend(model: str, prefix_reuse: bool, max_batch_rows: int = 64):
    """An HFBackend whose sampler records each row's next-token log-probabilities: (prompt, seed, sample) -> list."""
    import torch

    from rollouts.hf import HFBackend

    class Recording(HFBackend):
        record: dict | None = None

        def _sample(self, logits, sampling, req_of_row, sample_of_row, gens, reqs):
            if self.record is not None:
                lp = torch.log_softmax(logits.double() / sampling.temperature, -1)
                for row, (j, s) in enumerate(zip(req_of_row, sample_of_row, strict=True)):
                    self.record.setdefault((reqs[j].prompt, reqs[j].seed, s), []).append(lp[row])
            return super()._sample(logits, sampling, req_of_row, sample_of_row, gens, reqs)

    return Recording(model, max_batch_rows=max_batch_rows, prefix_reuse=prefix_reuse)


def reference_first(backend, prompt: str, temperature: float):
    """First-token log-probabilities from a plain forward pass of the unpadded prompt (no cache, no mask)."""
    import torch

    ids = torch.tensor([backend.encode_prompt(prompt)])
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0, -1].double()
    return torch.log_softmax(logits / temperature, -1)


def load(path: Path) -> list[dict]:
    rows = []
    with path.open() as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def success(grade, rows_prompts, comps) -> list[int]:
    """1 per continuation graded correct by the pipeline's rule (no readable answer is a failure)."""
    from pipeline.labeling.last_step import CORRECT, outcome

    pairs = [(row["answer"], c.text) for (row, _p), cs in zip(rows_prompts, comps) for c in cs]
    problems = [row["problem"] for (row, _p), cs in zip(rows_prompts, comps) for _c in cs]
    verdicts = grade(pairs, problems=problems)
    return [int(outcome(v) == CORRECT) for v in verdicts]


def two_prop(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    p = (k1 + k2) / (n1 + n2)
    se = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2)) if 0 < p < 1 else float("inf")
    z = (k1 / n1 - k2 / n2) / se if se else 0.0
    return z, math.erfc(abs(z) / math.sqrt(2))


def soft_ratio(pairs: list[str], boot: int = 5000) -> None:
    """Per pair and pooled: mean mc_value (binary-search) / mean mc_value (per-step) on the shared steps, with a
    95% bootstrap over solutions (the steps of one solution are not independent)."""
    import numpy as np

    from pipeline.corpus import read_corpus

    rng = np.random.default_rng(0)
    sums: list[dict[str, list[float]]] = []
    for pair in pairs:
        bs_url, ps_url = pair.split(":")
        cols = ["id", "steps", "mc_value"]
        base = {r["id"]: r for r in read_corpus(ps_url, columns=cols).to_pylist()}
        by: dict[str, list[float]] = {}
        n = 0
        for r in read_corpus(bs_url, columns=cols).to_pylist():
            o = base.get(r["id"])
            for i in range(len(r["steps"]) - 1) if o else ():
                x, y = r["mc_value"][i], o["mc_value"][i]
                if x is not None and y is not None:
                    acc = by.setdefault(r["id"], [0.0, 0.0])
                    acc[0] += x
                    acc[1] += y
                    n += 1
        sums.append(by)
        print(_ratio_line(pair, by, rng, boot, f"{n} shared steps, "))
    if len(sums) > 1:
        pooled: dict[str, list[float]] = {}
        for by in sums:
            for k, (x, y) in by.items():
                acc = pooled.setdefault(k, [0.0, 0.0])
                acc[0] += x
                acc[1] += y
        print(_ratio_line(f"pooled over {len(sums)} pairs", pooled, rng, boot, ""))


def _ratio_line(name: str, by: dict, rng, boot: int, what: str) -> str:
    import numpy as np

    a = np.array([v[0] for v in by.values()])
    b = np.array([v[1] for v in by.values()])
    idx = rng.integers(0, len(a), (boot, len(a)))
    rs = a[idx].sum(1) / np.maximum(b[idx].sum(1), 1e-12)
    return (f"{name}: {what}{len(a)} solutions; ratio {a.sum() / b.sum():.3f} "
            f"(bootstrap over solutions 95% {np.percentile(rs, 2.5):.3f}-{np.percentile(rs, 97.5):.3f})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO / "data" / "model"))
    ap.add_argument("--sample", default=str(REPO / "data" / "sample.jsonl"))
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--n", type=int, default=400, help="continuations per prompt and mode")
    ap.add_argument("--pilot", type=int, default=24)
    ap.add_argument("--candidates", type=int, default=60, help="step prefixes tried in the pilot")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fillers", type=int, default=2, help="other solutions' prefixes in each n=2 wave")
    ap.add_argument("--soft-ratio", nargs="+", metavar="BS:PS", help="compare labeled corpora instead (see above)")
    ap.add_argument("--per-step", help="a per-step corpus of --sample: prompts chosen by its mc_value (no pilot)")
    a = ap.parse_args(argv)
    if a.soft_ratio:
        soft_ratio(a.soft_ratio)
        return

    import torch

    import graders

    torch.set_num_threads(a.threads)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=a.max_new_tokens, stop=FMT.stop)
    trunk = recording_backend(a.model, prefix_reuse=True)
    plain = recording_backend(a.model, prefix_reuse=False)
    rng = random.Random(a.seed)
    rows = load(Path(a.sample))
    rng.shuffle(rows)

    # --- pick prompts with success rates in 0.1-0.9 (pilot)
    cands = []
    for row in rows:
        for i in range(len(row["steps"]) - 1):  # the last step is never sampled
            cands.append((row, FMT.prefix(row["problem"], row["steps"][: i + 1])))
    rng.shuffle(cands)
    t0 = time.perf_counter()
    if a.per_step:  # a per-step corpus of the sample gives every prefix's rate: no pilot
        from pipeline.corpus import read_corpus

        value = {(r["id"], i): v for r in read_corpus(a.per_step).to_pylist() for i, v in enumerate(r["mc_value"])}
        rates = [value.get((r["id"], p.count("\n") - 3), -1.0) for r, p in cands]
    else:
        cands = cands[: a.candidates]
        comps = trunk.generate([GenRequest(p, a.pilot, seed=rng.getrandbits(62), group=r["id"]) for r, p in cands],
                               sampling)
        ok = success(graders.grade_batch, cands, comps)
        rates = [sum(ok[i * a.pilot:(i + 1) * a.pilot]) / a.pilot for i in range(len(cands))]
    chosen = [c for c, r in zip(cands, rates) if 0.15 <= r <= 0.85][: a.prompts]
    how = f"per-step corpus: {len(cands)} prefixes" if a.per_step else f"pilot: {len(cands)} prefixes x {a.pilot} draws"
    print(f"{how} in {time.perf_counter() - t0:.0f} s; "
          f"{len(chosen)} with a success rate in 0.15-0.85")
    if not chosen:
        sys.exit("no prompt with a success rate in 0.15-0.85; try --candidates more")

    # Fillers: prefixes of other solutions of very different lengths (shortest and longest), several per group.
    others = [r for r in rows if all(r is not c[0] for c in chosen)]
    others.sort(key=lambda r: len(FMT.full(r["problem"], r["steps"])))
    fillers = [(r, FMT.prefix(r["problem"], r["steps"][: i + 1]))
               for r in others[:4] + others[-4:] for i in range(len(r["steps"]) - 1)]

    # --- 1. deterministic: log-probabilities alone vs in a mixed padded batch, trunk and plain paths
    det = []
    for be_name, be in (("trunk", trunk), ("plain", plain)):
        for r, p in chosen:
            req = GenRequest(p, 2, seed=rng.getrandbits(62), group=r["id"])
            be.record = {}
            be.generate([req], sampling)
            alone = be.record
            be.record = {}
            mix = [GenRequest(fp, 2, seed=rng.getrandbits(62), group=fr["id"]) for fr, fp in fillers[:12]]
            # the chosen prompt's own shorter and longer prefixes (trunk sharing) around it
            steps = r["steps"]
            mine = [GenRequest(FMT.prefix(r["problem"], steps[: i + 1]), 2, seed=rng.getrandbits(62), group=r["id"])
                    for i in range(len(steps) - 1)]
            batch = mix[:6] + mine[:1] + [req] + mine[1:] + mix[6:]
            be.generate(batch, sampling)
            mixed = be.record
            be.record = None
            worst, tokens = 0.0, 0
            for key, seq in alone.items():
                other = mixed[key]
                for x, y in zip(seq, other):
                    worst = max(worst, float((x - y).abs().max()))
                    tokens += 1
            ref = reference_first(be, p, sampling.temperature)
            first = max(float((alone[(p, req.seed, 0)][0] - ref).abs().max()),
                        float((mixed[(p, req.seed, 0)][0] - ref).abs().max()))
            det.append((be_name, len(be.encode_prompt(p)), tokens, worst, first))
    print("\n| path | prompt tokens | decode steps compared | max abs diff logprob alone vs mixed | "
          "first token vs unpadded reference |\n|---|---:|---:|---:|---:|")
    for be_name, L, tokens, worst, first in det:
        print(f"| {be_name} | {L} | {tokens} | {worst:.2e} | {first:.2e} |")

    # --- 2. statistical: success rates per mode
    modes = {}
    t0 = time.perf_counter()
    # A: trunk path, n=8 requests of each chosen prompt (per-step's shape), one solution's requests together
    reqs = [GenRequest(p, 8, seed=rng.getrandbits(62), group=r["id"]) for _ in range(a.n // 8) for r, p in chosen]
    modes["A trunk n=8"] = (trunk, reqs)
    for name, be, n in (("B trunk n=2 mixed", trunk, a.n), ("C plain n=2 mixed", plain, a.n // 2)):
        reqs = []
        for _ in range(n // 2):
            wave = [GenRequest(p, 2, seed=rng.getrandbits(62), group=r["id"]) for r, p in chosen]
            wave += [GenRequest(fp, 2, seed=rng.getrandbits(62), group=fr["id"])
                     for fr, fp in rng.sample(fillers, a.fillers)]
            rng.shuffle(wave)
            reqs.extend(wave)
        modes[name] = (be, reqs)
    counts = {}
    for name, (be, reqs) in modes.items():
        t1 = time.perf_counter()
        comps = []
        for s in range(0, len(reqs), 200):  # the scheduler's chunks
            comps.extend(be.generate(reqs[s:s + 200], sampling))
        keep = [(k, c) for k, c in enumerate(comps) if any(reqs[k].prompt == p for _r, p in chosen)]
        owners = [next(x for x in chosen if x[1] == reqs[k].prompt) for k, _c in keep]
        ok = success(graders.grade_batch, owners, [c for _k, c in keep])
        per = {p: [0, 0, 0] for _r, p in chosen}
        pos = 0
        for (k, cs) in keep:
            for c in cs:
                per[reqs[k].prompt][0] += ok[pos]
                per[reqs[k].prompt][1] += 1
                per[reqs[k].prompt][2] += c.finish_reason == "length"
                pos += 1
        counts[name] = per
        print(f"{name}: {sum(v[1] for v in per.values())} graded continuations in {time.perf_counter() - t1:.0f} s; "
              f"per prompt k/n: {[tuple(v[:2]) for v in per.values()]}", flush=True)
    print(f"statistical part: {time.perf_counter() - t0:.0f} s\n")
    names = list(modes)
    print("| prompt | tokens | " + " | ".join(f"{n}: rate (k/n)" for n in names)
          + " | z A-B (p) | z A-C (p) |\n|---|---:|" + "---:|" * (len(names) + 2))
    tot = {n: [0, 0] for n in names}
    for r, p in chosen:
        cells = []
        for n in names:
            k, m, _cut = counts[n][p]
            tot[n][0] += k
            tot[n][1] += m
            cells.append(f"{k / m:.3f} ({k}/{m})")
        zab = two_prop(*counts[names[0]][p][:2], *counts[names[1]][p][:2])
        zac = two_prop(*counts[names[0]][p][:2], *counts[names[2]][p][:2])
        print(f"| {r['id']} step {p.count(chr(10)) - 3} | {len(trunk.encode_prompt(p))} | " + " | ".join(cells)
              + f" | {zab[0]:+.2f} ({zab[1]:.2f}) | {zac[0]:+.2f} ({zac[1]:.2f}) |")
    cells = [f"{tot[n][0] / tot[n][1]:.3f} ({tot[n][0]}/{tot[n][1]})" for n in names]
    zab = two_prop(*tot[names[0]], *tot[names[1]])
    zac = two_prop(*tot[names[0]], *tot[names[2]])
    print("| all | | " + " | ".join(cells) + f" | {zab[0]:+.2f} ({zab[1]:.2f}) | {zac[0]:+.2f} ({zac[1]:.2f}) |")
    ratio = (tot[names[1]][0] / tot[names[1]][1]) / (tot[names[0]][0] / tot[names[0]][1])
    print(f"\nratio of success rates B/A (binary-search's batching / per-step's): {ratio:.3f}")


if __name__ == "__main__":
    main()
