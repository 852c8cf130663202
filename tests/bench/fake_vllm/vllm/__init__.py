"""A stand-in for ``vllm`` that bench/gpu_levers.py's driver is tested with on a CPU (tests/bench/test_gpu_levers.py):
``LLM.generate`` returns exactly ``max_tokens`` token ids per sample, so the driver's sums can be checked; vLLM's
data parallelism is refused as the real offline ``LLM`` may refuse it. Only the driver's bookkeeping is tested."""

from types import SimpleNamespace

__version__ = "fake"


def SamplingParams(**kw):
    return SimpleNamespace(**kw)


class LLM:
    def __init__(self, **kw):
        if kw.get("data_parallel_size", 1) > 1:
            raise ValueError("data_parallel_size > 1 is not supported by this engine")
        sched = SimpleNamespace(max_num_seqs=kw.get("max_num_seqs", 1024),
                                max_num_batched_tokens=kw.get("max_num_batched_tokens", 16384),
                                async_scheduling=kw.get("async_scheduling", True))
        comp = SimpleNamespace(max_cudagraph_capture_size=(kw.get("compilation_config") or {}).get(
            "max_cudagraph_capture_size", 512))
        self.llm_engine = SimpleNamespace(vllm_config=SimpleNamespace(
            scheduler_config=sched, compilation_config=comp,
            cache_config=SimpleNamespace(num_gpu_blocks=1000, block_size=16)))

    def generate(self, prompts, params, use_tqdm=False):
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[5] * p.max_tokens) for _ in range(p.n)])
                for p in params]

    def reset_prefix_cache(self):
        return True
