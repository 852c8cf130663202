"""Run on a GPU (by tests/rollouts/test_vllm_gpu.py, in its own process so that vLLM reads the environment
fresh): the same requests alone, inside a larger batch in another order, and again (prefix-cache hits), through
the vLLM backend built as ``mcprm label --backend vllm [--deterministic]`` builds it. Prints one JSON line:
how many of the requests' texts differ between the three passes, and the seconds each pass took."""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    model, mode = sys.argv[1], sys.argv[2]  # mode: default | deterministic
    from rollouts import GenRequest, SamplingConfig
    from rollouts.options import VLLMOptions
    from rollouts.prompts import make_prompt_format
    from rollouts.registry import _vllm_prepare
    from rollouts.vllm_backend import VLLMBackend

    _vllm_prepare(VLLMOptions(deterministic=mode == "deterministic"), 0)  # what the worker does before build
    fmt = make_prompt_format("plain")
    steps = [f"Step {i}: we keep going with the computation number {i}." for i in range(6)]

    def sol(problem, n, seed, group):
        return [GenRequest(fmt.prefix(problem, steps[: i + 1]), n=n, seed=seed + 7919 * i, group=group)
                for i in range(len(steps))]

    reqs = sol("What is 1 + 1?", 4, 1, "a") + sol("And 2 + 2?", 2, 99, "b")
    others = [r for k in range(12) for r in sol(f"Other problem number {k} of many?", 4, 1000 + k, f"o{k}")]
    sampling = SamplingConfig(temperature=1.0, top_p=0.95, max_new_tokens=48)
    det = mode == "deterministic"  # as rollouts.registry builds it: no prefix caching in deterministic mode
    be = VLLMBackend(model, gpu_memory_utilization=0.3, max_model_len=512, engine="offline", enforce_eager=True,
                     enable_prefix_caching=not det)
    try:
        t = time.perf_counter()
        alone = be.generate(reqs, sampling)
        t_alone = time.perf_counter() - t
        mixed_in = list(reversed(others[:40])) + list(reversed(reqs)) + others[40:]
        t = time.perf_counter()
        mixed = be.generate(mixed_in, sampling)
        t_mixed = time.perf_counter() - t
        mixed = {id(r): c for r, c in zip(mixed_in, mixed)}
        again = be.generate(reqs, sampling)
    finally:
        be.close()

    def texts(cs):
        return [c.text for c in cs]

    n = len(reqs)
    print("PROBE " + json.dumps({
        "mode": mode, "requests": n,
        "differ_mixed": sum(texts(alone[i]) != texts(mixed[id(r)]) for i, r in enumerate(reqs)),
        "differ_again": sum(texts(alone[i]) != texts(again[i]) for i in range(n)),
        "distinct_samples": sum(len(set(texts(cs))) > 1 for cs in alone),
        "seconds_alone": round(t_alone, 3), "seconds_mixed": round(t_mixed, 3),
        "batch_invariant_env": __import__("os").environ.get("VLLM_BATCH_INVARIANT"),
    }), flush=True)


if __name__ == "__main__":
    main()
