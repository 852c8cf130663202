"""HF backend: rollouts/s with prefix KV reuse vs plain per-sample generation, on the same work, in one run.

Work: N solutions x every step prefix x K samples (Math-Shepherd rollouts), from data/sample.jsonl when it
exists (else synthetic solutions), with the bundled model data/model (else a tiny random Llama, flagged in
the output). Both modes get identical requests and seeds, so they sample the same continuations; the
modes are interleaved over ``--repeat`` runs and the median time of each is reported.

    python bench/bench_hf_prefix.py            # 20 solutions, K=8
    python bench/bench_hf_prefix.py --quick    # 5 solutions, K=4, short continuations
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rollouts import GenRequest, SamplingConfig  # noqa: E402
from rollouts.prompts import make_prompt_format  # noqa: E402


def load_solutions(path: Path, limit: int) -> tuple[list[tuple[str, list[str]]], str]:
    sols = []
    if path.exists():
        with path.open() as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                steps = row.get("steps")
                if isinstance(row.get("problem"), str) and isinstance(steps, list) and steps:
                    sols.append((row["problem"], [str(s) for s in steps]))
                if len(sols) >= limit:
                    break
        if sols:
            return sols, str(path.relative_to(REPO))
    try:  # the synthetic arithmetic task the bundled model was trained on
        from pipeline.bundled.generator import generate_problems

        return [(p["problem"], p["steps"]) for p in generate_problems(n=limit, seed=777)], "synthetic"
    except ImportError:
        pass
    for i in range(limit):  # stand-alone fallback: arithmetic word problems with 3-5 steps
        a, b, c = 3 + i, 7 + 2 * i, 2 + i % 5
        steps = [f"Tom has {a} apples and buys {b} more, so he has {a} + {b} = {a + b} apples."]
        steps += [f"He gives away {c} apples, leaving {a + b} - {c} = {a + b - c}."] * (1 + i % 3)
        steps.append(f"The answer is \\boxed{{{a + b - c}}}.")
        sols.append((f"Tom has {a} apples, buys {b} more and gives away {c}. How many are left?", steps))
    return sols, "synthetic (fallback)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model dir (default: data/model, else a tiny random Llama)")
    ap.add_argument("--solutions", type=int, default=20)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--max-batch-rows", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a small shared CPU box more threads spin and time noise; "
        "0 = torch's default)",
    )
    ap.add_argument("--quick", action="store_true", help="5 solutions, K=4, 24 new tokens, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.solutions, args.k, args.max_new_tokens, args.repeat = 5, 4, 24, 1

    import torch

    from rollouts.hf import HFBackend

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = args.model
    note = ""
    if model is None:
        if (REPO / "data" / "model" / "config.json").exists():
            model = str(REPO / "data" / "model")
        else:
            sys.path.insert(0, str(REPO / "tests" / "rollouts"))
            from conftest import build_tiny_model

            model = str(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", max_positions=2048))
            note = " (tiny RANDOM Llama: data/model not found)"

    sols, source = load_solutions(REPO / "data" / "sample.jsonl", args.solutions)
    fmt = make_prompt_format("plain")
    reqs = [
        GenRequest(fmt.prefix(p, steps[: i + 1]), n=args.k, seed=1_000_003 * s + i, group=str(s))
        for s, (p, steps) in enumerate(sols)
        for i in range(len(steps))
    ]
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens)
    backends = {
        "prefix reuse": HFBackend(model, max_batch_rows=args.max_batch_rows, prefix_reuse=True),
        "per-sample": HFBackend(model, max_batch_rows=args.max_batch_rows, prefix_reuse=False),
    }
    for be in backends.values():  # warm-up
        be.generate(reqs[:2], SamplingConfig(temperature=1.0, max_new_tokens=4))

    times: dict[str, list[float]] = {k: [] for k in backends}
    stats = {}
    for _ in range(args.repeat):
        for name, be in backends.items():
            before = be.stats.as_dict()
            t0 = time.perf_counter()
            out = be.generate(reqs, sampling)
            times[name].append(time.perf_counter() - t0)
            print(f"  {name}: {times[name][-1]:.2f}s", file=sys.stderr)
            after = be.stats.as_dict()
            stats[name] = {k: after[k] - before[k] for k in ("samples", "generated_tokens", "prompt_tokens")}
            stats[name]["computed_prompt"] = stats[name]["prompt_tokens"] - (
                after["cached_prompt_tokens"] - before["cached_prompt_tokens"]
            )
            stats[name]["texts"] = [c.text for cs in out for c in cs]

    same = sum(
        a == b for a, b in zip(stats["prefix reuse"]["texts"], stats["per-sample"]["texts"], strict=True)
    )
    print(
        f"model: {model}{note}\nwork: {len(sols)} solutions ({source}), {len(reqs)} step prefixes x K={args.k}, "
        f"max_new_tokens={args.max_new_tokens}, max_batch_rows={args.max_batch_rows}, "
        f"torch threads={torch.get_num_threads()}, repeat={args.repeat} (median)"
    )
    print(
        f"{'mode':<14}{'rollouts':>9}{'gen tok':>9}{'prompt tok computed':>21}{'sec':>8}{'rollouts/s':>12}{'gen tok/s':>11}"
    )
    rates = {}
    for name in backends:
        s, t = stats[name], statistics.median(times[name])
        rates[name] = s["samples"] / t
        print(
            f"{name:<14}{s['samples']:>9}{s['generated_tokens']:>9}{s['computed_prompt']:>21}{t:>8.2f}"
            f"{s['samples'] / t:>12.1f}{s['generated_tokens'] / t:>11.1f}"
        )
    print(f"ratio (prefix reuse / per-sample rollouts/s): {rates['prefix reuse'] / rates['per-sample']:.2f}x")
    print(f"identical samples in both modes: {same}/{len(stats['per-sample']['texts'])}")


if __name__ == "__main__":
    main()
