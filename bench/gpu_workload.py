"""The workload of the GPU benchmarks (:mod:`gpu_bench`, :mod:`gpu_fleet`): random-weight model shapes and their
folders (a WordLevel tokenizer covering the vocabulary), synthetic solutions of realistic shape, the prompt format,
sampling and per-step requests, the results file, and the GPU's name and utilisation while a part runs."""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path

SHAPES = {
    "0.5b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
    },
    "7b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
    },
}
COMMON = {
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "hidden_act": "silu",
    "sliding_window": None,
    "use_sliding_window": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 151936,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "initializer_range": 0.02,
    "attention_dropout": 0.0,
    "max_window_layers": 28,
}
VOCAB = 151936
K = 8


def make_model_dir(size: str) -> tuple[str, str]:
    from tokenizers import Tokenizer, models, pre_tokenizers

    path = tempfile.mkdtemp(prefix=f"mcprm-dummy-{size}-")
    tdir = os.path.join(path, "tok")
    os.makedirs(tdir)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3}
    for i in range(4, VOCAB):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(os.path.join(tdir, "tokenizer.json"))
    json.dump(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "model_max_length": 32768,
        },
        open(os.path.join(tdir, "tokenizer_config.json"), "w"),
    )
    json.dump(dict(COMMON, **SHAPES[size]), open(os.path.join(path, "config.json"), "w"), indent=1)
    json.dump({"bos_token_id": 1, "eos_token_id": 2}, open(os.path.join(path, "generation_config.json"), "w"))
    return path, tdir


def workload(n_solutions: int, seed: int = 0):
    """Synthetic solutions of realistic shape, as mcprm Solutions (text = space-separated wN words)."""
    from pipeline.solution import Solution

    rng = random.Random(seed)

    def words(n):
        return " ".join(f"w{rng.randrange(4, VOCAB)}" for _ in range(n))

    sols = []
    for i in range(n_solutions):
        m = rng.randint(3, 10)
        sols.append(
            Solution(
                id=f"s{i}",
                problem=words(rng.randint(100, 200)),
                answer="1",
                steps=tuple(words(rng.randint(30, 80)) for _ in range(m)),
            )
        )
    return sols


def prompt_format():
    from rollouts.prompts import plain_format

    return plain_format("{problem} ", " ")


def sampling(lengths: str, max_tokens: int):
    from rollouts.base import SamplingConfig

    if lengths == "fixed":
        return SamplingConfig(temperature=1.0, max_new_tokens=max_tokens, ignore_eos=True)
    stop_ids = tuple(range(4, VOCAB, 96))  # 1/96 of the vocabulary ends a continuation
    return SamplingConfig(
        temperature=1.0, max_new_tokens=max_tokens, stop_token_ids=stop_ids, ignore_eos=True
    )


def per_step_requests(sols):
    from pipeline.labeling.scheduler import derive_seed
    from rollouts.base import GenRequest

    pf = prompt_format()
    rounds: dict[int, list] = {}
    for s in sols:
        for i in range(len(s.steps) - 1):
            rounds.setdefault(i, []).append(
                GenRequest(pf.prefix(s.problem, s.steps[: i + 1]), K, derive_seed(0, s.key, i, 0), s.key)
            )
    flat = [r for s_i in sorted(rounds) for r in rounds[s_i]]
    # raw vLLM gets them solution by solution (best prefix locality); naive gets them round by round
    by_sol = sorted(flat, key=lambda r: (r.group, r.prompt.count(" ")))
    return by_sol, [rounds[i] for i in sorted(rounds)]


def emit(out: Path, rec: dict) -> None:
    rec["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print("RESULT " + json.dumps(rec), flush=True)
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")


# ------------------------------------------------------------------------------------------ parts
class GpuUtil:
    """Samples the mean utilization of ``gpus`` (NVML indices; GPU 0 by default) every 50 ms while a mode or run
    goes: where the GPUs idle."""

    def __init__(self, gpus=(0,)):
        import threading

        self.samples: list[float] = []
        self._stop = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._h = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in gpus]
            self._nvml = pynvml
        except Exception:  # noqa: BLE001 - utilization is informative only
            self._nvml = None
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                u = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._h]
            except Exception:  # noqa: BLE001
                return
            self.samples.append(sum(u) / len(u))
            self._stop.wait(0.05)

    def __enter__(self):
        if self._nvml is not None:
            self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()

    @property
    def mean(self):
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None

    @property
    def idle_share(self):
        """Share of samples with the GPUs idle (no kernel running in the sample period)."""
        return round(sum(1 for x in self.samples if x < 10) / len(self.samples), 3) if self.samples else None


def gpu_name() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else name
    except Exception:  # noqa: BLE001
        return "unknown"


def fast_stop_token_lookup() -> None:
    """vLLM 0.26 checks ``last_token in sampling_params.stop_token_ids`` on a list, once per generated token
    (``vllm.v1.core.sched.utils.check_stop``). The ``vary`` workload ends continuations on 1,582 stop ids, which
    made that scan the bottleneck (9 % GPU utilization at 1,000 running sequences). This turns each request's
    list into a frozenset in the engine core (forked from this process, so it inherits the patch); it is
    applied before either engine starts, so every mode gets it."""
    import vllm.v1.core.sched.scheduler as sched_mod

    orig = sched_mod.check_stop

    def check_stop(request, max_model_len):
        sp = request.sampling_params
        if sp is not None and type(sp.stop_token_ids) is list and len(sp.stop_token_ids) > 16:
            sp.stop_token_ids = frozenset(sp.stop_token_ids)
        return orig(request, max_model_len)

    sched_mod.check_stop = check_stop
