"""How a vLLM engine is sized from the model and the GPU: how many engines share one GPU, each one's share of the
GPU's memory, its sequence limit (``max_num_seqs``), its token budget per step (``max_num_batched_tokens``) and the
largest batch its CUDA graphs are captured for.

Why the CUDA graphs are captured up to the sequence limit: vLLM 0.26 captures decode graphs for batches of at most
512 sequences while it runs up to 1,024 on a large GPU, so every step of a labeling run's full batch ran without
graphs, launching each kernel from Python. Capturing up to the limit doubled one engine's tokens/s at 1.5B on an
H200 at no measurable start cost (BENCHMARKS.md, "Engine levers on one H200").

Why several engines on one GPU: at 1.5B on an H200 one vLLM engine keeps the GPU idle most of the time. Its host
side (scheduling, input preparation, output processing, about 40 us per sequence per step, in Python) is longer
than the forward pass, and more sequences per engine lengthen each step (the raw engine at vLLM's capture size:
26-39 k tokens/s at 512 sequences, 18-25 k at 2,048-4,096; with graphs captured up to the limit 2,048 gained),
while the KV cache stays 1-2 % used. N engine processes each with 1/N of
the memory share run their host work on N cores and interleave their forward passes on the one GPU. How many is
best is a measurement (bench/gpu_levers.py): two raw engines gained, and `mcprm label` with two gained 1.14-1.17x on one H200 at 1.5B, so the
default is 0, sized: :func:`auto_engines_per_gpu` picks two for a small model on a big GPU (the case both were
measured in) and one everywhere else.

:func:`engine_settings` is pure arithmetic on numbers (tested on CPU); :func:`model_shape` reads a local model's
``config.json`` and :func:`gpu_memory_bytes` asks the NVIDIA driver (NVML, if installed) without initialising
CUDA, which vLLM needs untouched before its engine starts. Anything not known leaves vLLM's own default in place.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass

log = logging.getLogger("mcprm")

GiB = 1024**3
# vLLM 0.26's defaults for its offline engine (``EngineArgs.get_batch_defaults``): a GPU of at least 70 GiB other
# than an A100 gets 1024 sequences and 16,384 batched tokens per step, any other 256 and 8,192. An engine given
# no limit by mcprm gets these; the sizing repeats them so that it can say what each engine will hold.
VLLM_BIG_GPU_BYTES = 70 * GiB
VLLM_SEQS = {True: 1024, False: 256}
VLLM_BATCHED_TOKENS = {True: 16384, False: 8192}
# vLLM 0.26 captures CUDA graphs for decode batches up to this many sequences unless told otherwise
VLLM_CUDA_GRAPH_MAX = 512
# What one engine holds besides weights and KV cache: the CUDA context, torch's allocator slack and the CUDA
# graphs (about 1 GiB at 1.5B), plus the step's activations and the sampler's float32 logits (counted below).
ENGINE_FIXED_BYTES = 1 * GiB
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "half": 2, "float32": 4, "float": 4, "auto": 2}
# --engines-per-gpu 0 (sized) starts two engines on a GPU of at least VLLM_BIG_GPU_BYTES for a model of at most
# this much weight, one otherwise. Two raw vLLM engines were measured at 1.5B on an H200 (with CUDA graphs up to
# 1,024 sequences: 1.57x one engine's tokens/s, the GPU busy 0.92 of the time against 0.45); four started at once
# failed, and a larger model's forward pass fills more of the GPU's time by itself while more engines split its
# KV cache. The bound (about 4B parameters in bf16) reaches past the one size measured.
AUTO_SEVERAL_MAX_WEIGHT_BYTES = 8 * GiB
AUTO_ENGINES_SMALL_MODEL = 2
# One or two engines of a model of at most AUTO_SEVERAL_MAX_WEIGHT_BYTES on a big GPU run this many sequences a
# step each (their CUDA graphs captured up to the same). One engine: the real 1.5B's labeling run sat at vLLM's
# 1,024 with hundreds waiting and the KV cache 5% used, and the raw engine at 2,048 / 32,768 batched tokens with
# graphs to 2,048 gave 1.24x the tokens/s of 1,024. Two engines (the sized default): `mcprm label` at 2,048 each
# gave 1.17x the tokens/s of vLLM's 1,024 each on the real 1.5B, the engines' step host-bound (a step's fixed cost
# spread over more tokens), the KV cache at most 14% used; their batched tokens stay vLLM's (as measured). More
# engines keep vLLM's limit (their shares' KV caches are smaller; not measured at 2,048); a larger model keeps
# vLLM's (not measured). BENCHMARKS.md, "Engine levers on one H200".
SMALL_MODEL_SEQS = 2048
SMALL_MODEL_BATCHED_TOKENS = 32768  # one engine only
SMALL_MODEL_MOST_ENGINES = 2
# Several engines on one GPU started together (``start_together``, --engine-start together) get their KV cache size
# given (vLLM's ``kv_cache_memory_bytes``: this share of the sizing's estimate, which is within 3% of what vLLM
# allocated where checked) instead of measured from the memory left free at their start. A measured size is
# falsified by another engine loading on the GPU meanwhile, which is why such engines start one after another (the
# per-GPU start lock) and the GPU's second engine joins a run a whole engine start late. Not the default: the one
# run measured together (two engines, cold machine) labeled at a tenth of the one-by-one rate, cause not found.
KV_GIVEN_SHARE = 0.9


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that its memory follows."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int = 0  # 0: hidden / heads
    tied_embeddings: bool = False
    dtype_bytes: int = 2

    @property
    def dim(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def params(self) -> int:
        """Parameter count (attention with biases on q/k/v as in Qwen2, a gated MLP, norms)."""
        q = self.heads * self.dim
        kv = self.kv_heads * self.dim
        attn = self.hidden * (q + 2 * kv) + (q + 2 * kv) + q * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attn + mlp + 2 * self.hidden
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + emb + self.hidden

    def weight_bytes(self) -> int:
        return self.params() * self.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.dim * self.dtype_bytes

    @classmethod
    def from_config(cls, cfg: dict, dtype: str | None = None) -> ModelShape:
        """From a Hugging Face ``config.json`` (its text config where the model nests one)."""
        c = cfg.get("text_config") or cfg
        heads = int(c["num_attention_heads"])
        d = (dtype or c.get("torch_dtype") or c.get("dtype") or "bfloat16")
        return cls(layers=int(c["num_hidden_layers"]), hidden=int(c["hidden_size"]),
                   intermediate=int(c.get("intermediate_size") or 4 * c["hidden_size"]), heads=heads,
                   kv_heads=int(c.get("num_key_value_heads") or heads), vocab=int(c["vocab_size"]),
                   head_dim=int(c.get("head_dim") or 0), tied_embeddings=bool(c.get("tie_word_embeddings", False)),
                   dtype_bytes=DTYPE_BYTES.get(str(d).removeprefix("torch."), 2))


@dataclass(frozen=True)
class EngineSettings:
    """What each engine on a GPU is started with, and what it will hold (None where not known)."""

    engines_per_gpu: int
    gpu_memory_utilization: float  # each engine's share of the GPU's memory
    max_num_seqs: int | None  # None: vLLM's default
    max_num_batched_tokens: int | None  # None: vLLM's default
    kv_cache_tokens: int | None = None  # each engine's KV cache, in tokens (an estimate)
    sequences_kv_holds: int | None = None  # sequences of ``seq_tokens`` each engine's KV cache holds at once
    seqs_limit: int | None = None  # the sequence limit each engine will run with (given or vLLM's)
    cuda_graph_max: int | None = None  # the largest batch CUDA graphs are captured for; None: vLLM's own
    kv_cache_memory_bytes: int | None = None  # each engine's KV cache, given (several engines a GPU); None: measured

    @property
    def starts_at_once(self) -> bool:
        """Whether the GPU's engines may start together: their KV caches are given, not measured at the start."""
        return self.kv_cache_memory_bytes is not None

    def engine_kwargs(self) -> dict:
        """Arguments for ``vllm.LLM`` / ``AsyncEngineArgs``: only those mcprm sets."""
        kw = {"gpu_memory_utilization": self.gpu_memory_utilization}
        if self.max_num_seqs is not None:
            kw["max_num_seqs"] = self.max_num_seqs
        if self.max_num_batched_tokens is not None:
            kw["max_num_batched_tokens"] = self.max_num_batched_tokens
        if self.cuda_graph_max is not None:
            kw["compilation_config"] = {"max_cudagraph_capture_size": self.cuda_graph_max}
        if self.kv_cache_memory_bytes is not None:
            kw["kv_cache_memory_bytes"] = self.kv_cache_memory_bytes
        return kw

    def describe(self) -> str:
        parts = [f"{self.engines_per_gpu} engine(s) per GPU, {self.gpu_memory_utilization:.3f} of its memory each"]
        if self.seqs_limit:
            parts.append(f"up to {self.seqs_limit} sequences each")
        if self.cuda_graph_max:
            parts.append(f"CUDA graphs up to {self.cuda_graph_max} sequences")
        if self.kv_cache_tokens is not None:
            parts.append(f"KV cache ~{self.kv_cache_tokens:,} tokens each (~{self.sequences_kv_holds:,} sequences "
                         "at full context)" + (", given, so they start at once" if self.starts_at_once else ""))
        return ", ".join(parts)


def engine_settings(shape: ModelShape | None, gpu_bytes: int | None, *, engines_per_gpu: int = 1,
                    gpu_memory_utilization: float = 0.85, seq_tokens: int = 4096, max_num_seqs: int | None = None,
                    max_num_batched_tokens: int | None = None, gpu_name: str = "",
                    cuda_graph_max: int | None = None, start_together: bool = False) -> EngineSettings:
    """Each engine's settings when ``engines_per_gpu`` engines share a GPU of ``gpu_bytes`` with the model
    ``shape`` (either None: not known, vLLM's defaults apply and nothing is checked).

    ``gpu_memory_utilization`` is what all the GPU's engines take together; each takes its 1/N (vLLM's share is
    per engine). ``seq_tokens``: one sequence's context at most (prompt and new tokens). ``max_num_seqs`` /
    ``max_num_batched_tokens``: the user's, kept as given; left None, :data:`SMALL_MODEL_SEQS` /
    :data:`SMALL_MODEL_BATCHED_TOKENS` (one engine only) for up to :data:`SMALL_MODEL_MOST_ENGINES` engines of a
    small model on a big GPU, else vLLM picks its own (the same for every engine count: it goes by the GPU, not by
    the engine's share). ``cuda_graph_max``: the user's (0: vLLM's own
    512); left None, the sequence limit when it is known and above vLLM's, else vLLM's own. ``start_together``:
    several engines of the GPU get their KV cache given (:data:`KV_GIVEN_SHARE`), so they need not start one at a
    time. Raises ValueError when an engine's share cannot hold the model's weights and one sequence's KV cache."""
    n = int(engines_per_gpu)
    if n < 1:
        raise ValueError(f"engines_per_gpu must be at least 1, got {engines_per_gpu}")
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    share = gpu_memory_utilization / n
    big = gpu_bytes is not None and gpu_bytes >= VLLM_BIG_GPU_BYTES and "a100" not in gpu_name.lower()
    if (big and n <= SMALL_MODEL_MOST_ENGINES and shape is not None
            and shape.weight_bytes() <= AUTO_SEVERAL_MAX_WEIGHT_BYTES
            and max_num_seqs is None and max_num_batched_tokens is None and cuda_graph_max is None):
        max_num_seqs = SMALL_MODEL_SEQS
        max_num_batched_tokens = SMALL_MODEL_BATCHED_TOKENS if n == 1 else None
    seqs = max_num_seqs or (VLLM_SEQS[big] if gpu_bytes is not None else None)
    batched = max_num_batched_tokens or VLLM_BATCHED_TOKENS[big]
    kv_tokens = holds = None
    if shape is not None and gpu_bytes is not None:
        # a step's activations (the gated MLP's two intermediate tensors dominate) and the sampler's float32
        # logits and probabilities for every running sequence
        act = batched * (2 * shape.intermediate + 4 * shape.hidden) * shape.dtype_bytes
        logits = (seqs or VLLM_SEQS[big]) * shape.vocab * 8
        free = gpu_bytes * share - shape.weight_bytes() - ENGINE_FIXED_BYTES - act - logits
        kv_tokens = int(free // shape.kv_bytes_per_token()) if free > 0 else 0
        if n > 1 and start_together:
            kv_tokens = int(kv_tokens * KV_GIVEN_SHARE)
        holds = kv_tokens // max(1, seq_tokens)
        if holds < 1:
            need = (shape.weight_bytes() + ENGINE_FIXED_BYTES + act + logits
                    + seq_tokens * shape.kv_bytes_per_token()) / gpu_bytes
            raise ValueError(
                f"{n} engine(s) per GPU leave each {share:.3f} of the GPU's {gpu_bytes / GiB:.0f} GiB, too little "
                f"for the model's {shape.weight_bytes() / GiB:.1f} GiB of weights, the engine's own memory and one "
                f"sequence of {seq_tokens} tokens (each needs ~{need:.2f} of the GPU): use fewer engines per GPU "
                "(--engines-per-gpu), a shorter --max-model-len or a GPU with more memory")
    if cuda_graph_max is not None and cuda_graph_max < 0:
        raise ValueError(f"cuda_graph_max must be 0 (vLLM's own) or more, got {cuda_graph_max}")
    if cuda_graph_max is None:
        graphs = seqs if seqs is not None and seqs > VLLM_CUDA_GRAPH_MAX else None
    else:
        graphs = cuda_graph_max or None
    given = kv_tokens * shape.kv_bytes_per_token() if n > 1 and start_together and kv_tokens else None
    return EngineSettings(engines_per_gpu=n, gpu_memory_utilization=round(share, 4), max_num_seqs=max_num_seqs,
                          max_num_batched_tokens=max_num_batched_tokens, kv_cache_tokens=kv_tokens,
                          sequences_kv_holds=holds, seqs_limit=seqs, cuda_graph_max=graphs,
                          kv_cache_memory_bytes=given)


def auto_engines_per_gpu(shape: ModelShape | None, gpu_bytes: int | None, gpu_name: str = "") -> int:
    """Engines per GPU for ``--engines-per-gpu 0``: :data:`AUTO_ENGINES_SMALL_MODEL` when the model's weights are
    at most :data:`AUTO_SEVERAL_MAX_WEIGHT_BYTES` and the GPU is one vLLM counts as big (its sequence limit is
    1,024 there), else one; one as well when either is not known (a hub name, no NVIDIA driver in this process)."""
    if shape is None or gpu_bytes is None:
        return 1
    big = gpu_bytes >= VLLM_BIG_GPU_BYTES and "a100" not in gpu_name.lower()
    return AUTO_ENGINES_SMALL_MODEL if big and shape.weight_bytes() <= AUTO_SEVERAL_MAX_WEIGHT_BYTES else 1


def model_shape(model: str, dtype: str | None = None) -> ModelShape | None:
    """The shape of a model in a local folder (its ``config.json``), or None (a hub name, an unknown layout)."""
    path = os.path.join(os.path.expanduser(str(model)), "config.json")
    try:
        with open(path) as f:
            return ModelShape.from_config(json.load(f), dtype=dtype if dtype not in (None, "auto") else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def gpu_memory_bytes(index: int = 0) -> tuple[int, str] | None:
    """(total memory in bytes, name) of GPU ``index`` as the NVIDIA driver reports it (NVML: no CUDA context), or
    None when NVML is not installed or sees no GPU. ``index`` counts the GPUs this process may use
    (``CUDA_VISIBLE_DEVICES``, as Ray sets it for its workers)."""
    try:
        import pynvml
    except ImportError:
        return _nvidia_smi_memory(index)
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        pynvml.nvmlInit()
        if vis:
            ids = [d.strip() for d in vis.split(",") if d.strip()]
            target = ids[index] if index < len(ids) else ids[0]
            h = (pynvml.nvmlDeviceGetHandleByUUID(target) if target.startswith(("GPU-", "MIG-"))
                 else pynvml.nvmlDeviceGetHandleByIndex(int(target)))
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(h)
        return int(pynvml.nvmlDeviceGetMemoryInfo(h).total), name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no driver, no such GPU: the sizing falls back to vLLM's defaults
        return None


# nvidia-smi answers in well under a second; a hung driver must not hold a run's start
NVIDIA_SMI_TIMEOUT_S = 15.0


def _nvidia_smi_memory(index: int) -> tuple[int, str] | None:
    """What :func:`gpu_memory_bytes` returns, from ``nvidia-smi`` where NVML's Python binding is not installed (a
    GPU machine with vLLM but not ``nvidia-ml-py``): the driver's own tool, which creates no CUDA context."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    vis = [d.strip() for d in (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",") if d.strip()]
    target = (vis[index] if index < len(vis) else vis[0]) if vis else str(index)
    try:
        out = subprocess.run([exe, "--query-gpu=memory.total,name", "--format=csv,noheader,nounits", "-i", target],
                             capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True).stdout
        mib, name = out.strip().splitlines()[0].split(",", 1)
        return int(float(mib)) * 1024 * 1024, name.strip()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def roofline_tokens_per_s(shape: ModelShape, peak_flops: float) -> float:
    """Decode tokens/s if the GPU did nothing but the model's matrix products at ``peak_flops`` (2 x parameters
    FLOPs per token, attention ignored): the ceiling the lever benchmark reports its fraction of."""
    return peak_flops / (2 * shape.params()) if shape.params() else math.inf


# the longest one engine start on a GPU waits for the one before it (a cold 1.5B start measured 50-112 s)
START_LOCK_WAIT_S = 600.0


@contextlib.contextmanager
def gpu_start_lock(wait_s: float = START_LOCK_WAIT_S, folder: str | None = None):
    """Held while an engine starts, one at a time per GPU of this machine (the GPUs of ``CUDA_VISIBLE_DEVICES``,
    which Ray sets to the same ids for the workers that share a GPU): vLLM measures the memory its start leaves
    free to size its KV cache, and another engine loading on the same GPU meanwhile falsifies that measure
    (engines whose KV cache is given, :attr:`EngineSettings.starts_at_once`, need no lock). A
    file lock (``flock``: released by the kernel if the process dies), waited for at most ``wait_s`` seconds,
    after which the start goes ahead with a warning."""
    import fcntl
    import socket
    import tempfile

    gpus = (os.environ.get("CUDA_VISIBLE_DEVICES") or "all").replace(",", "_").replace("/", "_")
    d = folder or os.path.join(tempfile.gettempdir(), f"mcprm-gpu-locks-{os.getuid()}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    path = os.path.join(d, f"{socket.gethostname()}-{gpus}.lock")
    f = open(path, "a")
    got = waiting = False
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got = True
                break
            except BlockingIOError:
                if not waiting:  # said once: a silent wait of minutes reads as a hang
                    waiting = True
                    log.info("another engine is starting on this GPU; this one waits for it (at most %.0f s)", wait_s)
                if time.monotonic() >= deadline:
                    log.warning("another engine has been starting on this GPU for over %.0f s; starting anyway",
                                wait_s)
                    break
                time.sleep(0.2)
        yield got
    finally:
        # Unlocked explicitly, not by closing: the engine started under the lock forks its engine-core process,
        # which inherits the open file and with it the lock, so a close alone left the lock held for as long as
        # that engine lived and the GPU's next engine waited out the whole wait (measured: 600 s on an H200).
        if got:
            with contextlib.suppress(OSError):
                fcntl.flock(f, fcntl.LOCK_UN)
        f.close()
