"""Engine sizing from the model and the GPU (rollouts/engine_sizing.py): arithmetic checked against known model
sizes and a KV cache vLLM reported on an H200, the options that carry it, and the per-GPU start lock."""

from __future__ import annotations

import threading

import pytest

from pipeline.config import ConfigError, LabelConfig
from rollouts.engine_sizing import (
    GiB,
    ModelShape,
    engine_settings,
    gpu_memory_bytes,
    gpu_start_lock,
    model_shape,
    roofline_tokens_per_s,
)

QWEN_1_5B = {"num_hidden_layers": 28, "hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
             "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
QWEN_7B = {"num_hidden_layers": 28, "hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
           "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
QWEN_0_5B = {"num_hidden_layers": 24, "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
             "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True}
H200 = 143771 * 1024**2  # what NVML reported for the lent H200 (shared/device/README.md)


def test_parameter_counts_match_the_published_models():
    # Qwen2.5-1.5B: 1.54 B parameters, Qwen2.5-7B: 7.61 B, Qwen2.5-0.5B: 0.49 B (their model cards)
    for cfg, published in ((QWEN_1_5B, 1.54e9), (QWEN_7B, 7.61e9), (QWEN_0_5B, 0.49e9)):
        assert ModelShape.from_config(cfg).params() == pytest.approx(published, rel=0.01)


def test_kv_bytes_per_token():
    # K and V, 28 layers, 2 KV heads of 128, bf16
    assert ModelShape.from_config(QWEN_1_5B).kv_bytes_per_token() == 2 * 28 * 2 * 128 * 2


def test_kv_cache_estimate_matches_what_vllm_allocated_on_an_h200():
    # vLLM 0.26, 0.5B shape, gpu_memory_utilization 0.85 on the H200: 117 GiB of KV cache (shared/device/README.md)
    s = engine_settings(ModelShape.from_config(QWEN_0_5B), H200, gpu_memory_utilization=0.85, seq_tokens=2048,
                        gpu_name="NVIDIA H200")
    kv_gib = s.kv_cache_tokens * ModelShape.from_config(QWEN_0_5B).kv_bytes_per_token() / GiB
    assert kv_gib == pytest.approx(117, rel=0.03)


def test_one_engine_of_a_small_model_on_a_big_gpu_runs_2048_sequences_with_graphs_to_them():
    s = engine_settings(ModelShape.from_config(QWEN_1_5B), H200, gpu_name="NVIDIA H200")
    assert s.engine_kwargs() == {"gpu_memory_utilization": 0.85, "max_num_seqs": 2048,
                                 "max_num_batched_tokens": 32768,
                                 "compilation_config": {"max_cudagraph_capture_size": 2048}}
    # about 1,000 full 4k-token sequences at once, and all 2,048 at the ~800-token contexts of a labeling job
    # (vLLM allocated 4,276,720 tokens for the real 1.5B on the H200)
    assert s.seqs_limit == 2048 and s.sequences_kv_holds > 1000 and s.kv_cache_tokens >= 2048 * 800
    assert "up to 2048 sequences" in s.describe() and "CUDA graphs up to 2048" in s.describe()
    # a 7B keeps vLLM's limit (1,024 on a big GPU), its graphs captured up to it
    big = engine_settings(ModelShape.from_config(QWEN_7B), H200, gpu_name="NVIDIA H200")
    assert big.engine_kwargs() == {"gpu_memory_utilization": 0.85,
                                   "compilation_config": {"max_cudagraph_capture_size": 1024}}
    # two engines of the small model (the sized default) run 2,048 each, graphs to 2,048, with vLLM's batched
    # tokens (the measured best); three or more keep vLLM's 1,024 each; so do a given capture size
    # (--deterministic gives 0) and a given limit
    two = engine_settings(ModelShape.from_config(QWEN_1_5B), H200, engines_per_gpu=2, gpu_name="NVIDIA H200")
    assert two.engine_kwargs() == {"gpu_memory_utilization": 0.425, "max_num_seqs": 2048,
                                   "compilation_config": {"max_cudagraph_capture_size": 2048}}
    assert two.seqs_limit == 2048 and two.kv_cache_tokens >= 2048 * 800  # each KV cache holds its 2,048 at ~800
    assert engine_settings(ModelShape.from_config(QWEN_1_5B), H200, engines_per_gpu=3).seqs_limit == 1024
    assert engine_settings(ModelShape.from_config(QWEN_1_5B), H200, cuda_graph_max=0).engine_kwargs() == {
        "gpu_memory_utilization": 0.85}
    given = engine_settings(ModelShape.from_config(QWEN_1_5B), H200, max_num_batched_tokens=8192)
    assert given.seqs_limit == 1024 and "max_num_seqs" not in given.engine_kwargs()


def test_graphs_follow_the_sequence_limit_and_the_user():
    shape = ModelShape.from_config(QWEN_1_5B)
    # a GPU whose limit (256) is under vLLM's own capture size: nothing to change
    assert "compilation_config" not in engine_settings(shape, 24 * GiB, gpu_name="NVIDIA L4").engine_kwargs()
    # no NVML: the limit is not known, vLLM decides
    assert engine_settings(shape, None).cuda_graph_max is None
    assert engine_settings(shape, H200, max_num_seqs=768).cuda_graph_max == 768
    assert engine_settings(shape, H200, cuda_graph_max=256).engine_kwargs()["compilation_config"] == {
        "max_cudagraph_capture_size": 256}
    assert "compilation_config" not in engine_settings(shape, H200, cuda_graph_max=0).engine_kwargs()
    with pytest.raises(ValueError, match="cuda_graph_max"):
        engine_settings(shape, H200, cuda_graph_max=-1)


def test_engines_split_the_memory_share_and_each_keeps_the_sequence_limit():
    shape = ModelShape.from_config(QWEN_1_5B)
    one = engine_settings(shape, H200, gpu_name="NVIDIA H200")
    four = engine_settings(shape, H200, engines_per_gpu=4, gpu_name="NVIDIA H200")
    assert four.gpu_memory_utilization == pytest.approx(0.85 / 4)
    assert four.seqs_limit == 1024  # vLLM sizes by the GPU, not the engine's share
    assert 0 < four.kv_cache_tokens < one.kv_cache_tokens / 4  # each carries its own weights and overheads
    assert four.sequences_kv_holds < 1024  # at a full 4k context each, fewer than its sequence limit ...
    assert four.kv_cache_tokens >= 1024 * 750  # ... but all 1,024 at the ~750-token contexts of a labeling job


def test_several_engines_of_a_gpu_started_together_get_their_kv_cache_given():
    shape = ModelShape.from_config(QWEN_1_5B)
    one = engine_settings(shape, H200, gpu_name="NVIDIA H200", start_together=True)
    two = engine_settings(shape, H200, engines_per_gpu=2, gpu_name="NVIDIA H200", start_together=True)
    # by default a GPU's engines start one by one, each measuring its own KV cache
    measured = engine_settings(shape, H200, engines_per_gpu=2, gpu_name="NVIDIA H200")
    assert not measured.starts_at_once and "kv_cache_memory_bytes" not in measured.engine_kwargs()
    assert measured.kv_cache_tokens > two.kv_cache_tokens  # the estimate, not the given share of it
    # one engine measures its own (nothing else loads on its GPU); two get 0.9 of the estimate, in bytes
    assert not one.starts_at_once and "kv_cache_memory_bytes" not in one.engine_kwargs()
    assert two.starts_at_once and two.kv_cache_memory_bytes == two.kv_cache_tokens * shape.kv_bytes_per_token()
    # the two engines' KV caches, weights and own memory fit the GPU with room to spare
    per_engine = two.kv_cache_memory_bytes + shape.weight_bytes() + 1 * GiB
    assert 2 * per_engine < 0.85 * H200 and "start at once" in two.describe()
    # not known (a hub name, no NVML): measured by vLLM, started one at a time
    assert not engine_settings(None, H200, engines_per_gpu=2, start_together=True).starts_at_once
    assert not engine_settings(shape, None, engines_per_gpu=2, start_together=True).starts_at_once


def test_small_and_a100_gpus_get_vllms_small_defaults():
    shape = ModelShape.from_config(QWEN_1_5B)
    assert engine_settings(shape, 80 * GiB, gpu_name="NVIDIA A100-SXM4-80GB").seqs_limit == 256
    assert engine_settings(shape, 24 * GiB, gpu_name="NVIDIA L4").seqs_limit == 256
    assert engine_settings(shape, 80 * GiB, gpu_name="NVIDIA H100 80GB HBM3").seqs_limit == 2048
    assert engine_settings(ModelShape.from_config(QWEN_7B), 80 * GiB, gpu_name="NVIDIA H100 80GB HBM3").seqs_limit == 1024


def test_overrides_are_kept():
    s = engine_settings(ModelShape.from_config(QWEN_1_5B), H200, engines_per_gpu=2, max_num_seqs=2048,
                        max_num_batched_tokens=32768)
    assert s.engine_kwargs() == {"gpu_memory_utilization": 0.425, "max_num_seqs": 2048,
                                 "max_num_batched_tokens": 32768,
                                 "compilation_config": {"max_cudagraph_capture_size": 2048}}


def test_too_many_engines_for_the_gpu_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="--engines-per-gpu"):
        engine_settings(ModelShape.from_config(QWEN_7B), 80 * GiB, engines_per_gpu=8, seq_tokens=4096)


def test_unknown_model_or_gpu_leaves_vllms_defaults():
    s = engine_settings(None, None, engines_per_gpu=2)
    assert s.engine_kwargs() == {"gpu_memory_utilization": 0.425} and s.kv_cache_tokens is None
    assert model_shape("Qwen/Qwen2.5-Math-1.5B-Instruct-not-a-folder") is None


def test_bundled_model_shape_is_read_from_its_folder():
    from pipeline import bundled

    shape = model_shape(str(bundled.model_dir()))
    assert shape is not None and shape.layers >= 1 and shape.params() > 0


def test_no_nvml_no_gpu_memory():
    import shutil

    try:
        import pynvml  # noqa: F401
    except ImportError:
        if shutil.which("nvidia-smi") is None:
            assert gpu_memory_bytes() is None


def test_roofline_of_the_1_5b_on_an_h200():
    # 989 TFLOP/s dense bf16, 2 x 1.54 B FLOPs per token: ~320 k tokens/s (the issue's ~250 k allows attention)
    assert roofline_tokens_per_s(ModelShape.from_config(QWEN_1_5B), 989e12) == pytest.approx(321e3, rel=0.02)


def test_options_carry_engines_per_gpu():
    c = LabelConfig(backend="vllm", engines_per_gpu=3)
    assert c.worker_gpus == pytest.approx(1 / 3)  # the Ray executor places three workers on each GPU
    assert LabelConfig(backend="vllm").worker_gpus == 1.0
    with pytest.raises(ConfigError, match="tensor-parallel-size 1"):
        LabelConfig(backend="vllm", engines_per_gpu=2, tensor_parallel_size=2)
    with pytest.raises(ConfigError, match="streaming engine"):
        LabelConfig(backend="vllm", engines_per_gpu=2, vllm_engine="offline")
    with pytest.raises(ConfigError, match="engines-per-gpu must be 0 .sized from the model and the GPU. or more"):
        LabelConfig(backend="vllm", engines_per_gpu=-1)
    with pytest.raises(ConfigError, match="max-num-seqs"):
        LabelConfig(backend="vllm", max_num_seqs=0)


def test_engines_here_whole_gpu_outside_ray():
    from rollouts.options import VLLMOptions
    from rollouts.registry import engines_here

    assert engines_here(VLLMOptions(engines_per_gpu=3)) == 3
    assert engines_here(VLLMOptions(engines_per_gpu=1)) == 1


def _pretend_gpu(monkeypatch, gpu):
    from rollouts import engine_sizing

    monkeypatch.setattr(engine_sizing, "gpu_memory_bytes", lambda index=0: gpu)


def _model_folder(tmp_path, cfg):
    import json

    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def test_auto_engines_two_for_a_small_model_on_a_big_gpu_else_one():
    from rollouts.engine_sizing import auto_engines_per_gpu

    small, big = ModelShape.from_config(QWEN_1_5B), ModelShape.from_config(QWEN_7B)
    assert auto_engines_per_gpu(small, H200, "NVIDIA H200") == 2  # the one case measured to gain
    assert auto_engines_per_gpu(big, H200, "NVIDIA H200") == 1  # 15 GiB of weights: past the bound
    assert auto_engines_per_gpu(small, 48 * GiB, "NVIDIA L40S") == 1  # vLLM's small-GPU limits
    assert auto_engines_per_gpu(small, 80 * GiB, "NVIDIA A100-SXM4-80GB") == 1
    assert auto_engines_per_gpu(None, H200) == 1 and auto_engines_per_gpu(small, None) == 1


def test_sized_engines_resolved_once_in_the_config_from_the_model_and_the_gpu(monkeypatch, tmp_path):
    model = _model_folder(tmp_path, QWEN_1_5B)
    _pretend_gpu(monkeypatch, (H200, "NVIDIA H200"))
    d = LabelConfig(backend="vllm", model=model).resolved()  # the default is sized: two here
    assert d.vllm.engines_per_gpu == 2 and d.worker_gpus == 0.5  # two Ray workers on the GPU, an engine each
    c = LabelConfig(backend="vllm", model=model, engines_per_gpu=0).resolved()
    assert c.vllm.engines_per_gpu == 2 and c.worker_gpus == 0.5
    assert LabelConfig(backend="vllm", model=model, engines_per_gpu=1).resolved().vllm.engines_per_gpu == 1
    # where several engines cannot run, or were not measured, auto means one whatever the sizes
    for extra in ({"tensor_parallel_size": 2}, {"vllm_engine": "offline"}, {"deterministic": True}):
        assert LabelConfig(backend="vllm", model=model, engines_per_gpu=0, **extra).resolved().vllm.engines_per_gpu == 1, extra
    _pretend_gpu(monkeypatch, None)  # a driver that sees no GPU (a CPU head node): one, said in docs/gpus.md
    assert LabelConfig(backend="vllm", model=model, engines_per_gpu=0).resolved().vllm.engines_per_gpu == 1
    _pretend_gpu(monkeypatch, (H200, "NVIDIA H200"))
    big = _model_folder(tmp_path, QWEN_7B)
    assert LabelConfig(backend="vllm", model=big, engines_per_gpu=0).resolved().vllm.engines_per_gpu == 1
    assert LabelConfig(backend="vllm", model=big).resolved().vllm.engines_per_gpu == 1  # the default, sized
    # the other backends keep their own sections untouched
    assert LabelConfig(backend="hf", engines_per_gpu=0).resolved().vllm.engines_per_gpu == 0


def test_nvidia_smi_answers_where_nvml_is_not_installed(monkeypatch, tmp_path):
    import os
    import stat
    import sys

    from rollouts import engine_sizing

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    fake = tmp_path / "nvidia-smi"  # the driver's tool, as it answers this query on the lent H200
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "143771, NVIDIA H200"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert engine_sizing.gpu_memory_bytes() == (H200, "NVIDIA H200")
    assert "-i 3" in (tmp_path / "args").read_text()  # the GPU this process was given, not the first
    fake.write_text("#!/bin/sh\nexit 9\n")
    assert engine_sizing.gpu_memory_bytes() is None


def test_start_lock_serialises_starts_on_one_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    order: list[str] = []
    held, release = threading.Event(), threading.Event()

    def first():
        with gpu_start_lock(folder=str(tmp_path)):
            order.append("first in")
            held.set()
            release.wait(10)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    held.wait(10)

    def second():
        with gpu_start_lock(folder=str(tmp_path)):
            order.append("second in")

    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.5)
    assert order == ["first in"]  # the second start waits while the first holds the GPU
    release.set()
    t.join(10)
    t2.join(10)
    assert order == ["first in", "first out", "second in"]


def test_start_lock_is_free_once_released_while_a_forked_child_lives(tmp_path, monkeypatch):
    """An engine started under the lock forks its engine-core process, which inherits the lock's open file; the
    GPU's next engine (another process) must get the lock when the first start ends, not when that engine dies."""
    import multiprocessing
    import subprocess
    import sys
    import time

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    child = None
    try:
        with gpu_start_lock(folder=str(tmp_path)) as got:
            assert got
            child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,), daemon=True)
            child.start()  # as vLLM's engine core: forked while the lock is held
        code = ("import sys; from rollouts.engine_sizing import gpu_start_lock\n"
                f"with gpu_start_lock(wait_s=60, folder={str(tmp_path)!r}) as got: print(got)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": "0"})
        assert out.stdout.strip() == "True", out.stderr  # False: it waited the whole 60 s and gave up
        assert child.is_alive()  # the inheriting child still held the open file all along
    finally:
        if child is not None:
            child.kill()
            child.join(10)


def test_start_lock_other_gpu_does_not_wait_and_the_wait_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with gpu_start_lock(folder=str(tmp_path)):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        with gpu_start_lock(folder=str(tmp_path), wait_s=30):
            pass  # GPU 1's lock is free
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
        with gpu_start_lock(folder=str(tmp_path), wait_s=0.3) as got:
            assert not got  # GPU 0's is held: gives up after wait_s and goes ahead


@pytest.fixture
def built(monkeypatch):
    """The keyword arguments of every vLLM engine ``rollouts.registry._vllm_build`` starts (a recording class in
    place of vLLM's): what mcprm passes the engine, without a GPU."""
    from rollouts import registry

    calls: list[dict] = []

    class Engine:
        streaming = True

        def __init__(self, **kw):
            calls.append(kw)

        def close(self):
            pass

    monkeypatch.setattr(registry, "_vllm_class", lambda: Engine)
    return calls


def test_the_vllm_build_starts_n_engines_with_a_share_each_on_a_whole_gpu(monkeypatch, tmp_path, built):
    from rollouts import registry
    from rollouts.multi_engine import MultiEngineBackend
    from rollouts.options import VLLMOptions

    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))  # the start lock's folder
    ref = registry.ModelRef(model="/nonexistent-model", tokenizer=None, dtype=None, seed=3)
    be = registry._vllm_build(ref, VLLMOptions(engines_per_gpu=2, max_num_seqs=512))
    assert isinstance(be, MultiEngineBackend) and len(be.engines) == 2
    assert [kw["gpu_memory_utilization"] for kw in built] == [0.425, 0.425]
    assert all(kw["max_num_seqs"] == 512 and kw["seed"] == 3 for kw in built)
    built.clear()
    one = registry._vllm_build(ref, VLLMOptions(engines_per_gpu=1))
    assert isinstance(one, registry._vllm_class()) and built == [{"model": "/nonexistent-model", "tokenizer": None,
                                                  "tensor_parallel_size": 1, "seed": 3, "engine": "loop",
                                                  "gpu_memory_utilization": 0.85}]
    # auto in the worker itself (a path that did not resolve it first): the model folder and the GPU decide
    built.clear()
    _pretend_gpu(monkeypatch, (H200, "NVIDIA H200"))
    ref = registry.ModelRef(model=_model_folder(tmp_path, QWEN_1_5B), tokenizer=None, dtype=None, seed=3)
    auto = registry._vllm_build(ref, VLLMOptions(engines_per_gpu=0))
    assert isinstance(auto, MultiEngineBackend) and len(auto.engines) == 2
    assert [kw["gpu_memory_utilization"] for kw in built] == [0.425, 0.425]


def test_engines_started_together_take_no_start_lock(monkeypatch, tmp_path, built):
    import contextlib

    from rollouts import engine_sizing, registry
    from rollouts.options import VLLMOptions

    locked: list[int] = []

    @contextlib.contextmanager
    def lock(*a, **k):
        locked.append(1)
        yield True

    monkeypatch.setattr(engine_sizing, "gpu_start_lock", lock)
    two = VLLMOptions(engines_per_gpu=2, engine_start="together")
    # the model's shape unknown: vLLM measures each KV cache, so the starts take the GPU's lock one at a time
    registry._vllm_build(registry.ModelRef(model="/nonexistent-model", tokenizer=None, dtype=None, seed=3), two)
    assert len(locked) == 2 and all("kv_cache_memory_bytes" not in kw for kw in built)
    # known on a known GPU: each KV cache given, no lock
    locked.clear()
    built.clear()
    _pretend_gpu(monkeypatch, (H200, "NVIDIA H200"))
    registry._vllm_build(registry.ModelRef(model=_model_folder(tmp_path, QWEN_1_5B), tokenizer=None, dtype=None,
                                           seed=3), two)
    assert locked == [] and len(built) == 2 and all(kw["kv_cache_memory_bytes"] > 0 for kw in built)
    # the default, one by one: the lock for each start, each cache measured by vLLM
    locked.clear()
    built.clear()
    registry._vllm_build(registry.ModelRef(model=_model_folder(tmp_path, QWEN_1_5B), tokenizer=None, dtype=None,
                                           seed=3), VLLMOptions(engines_per_gpu=2))
    assert len(locked) == 2 and len(built) == 2 and all("kv_cache_memory_bytes" not in kw for kw in built)


def test_fractional_gpus_count_workers_and_gpus_held():
    from pipeline.execution.ray_cluster import workers_fitting
    from pipeline.run.execute import gpus_held

    for n in (2, 3, 4, 5, 6, 7):
        assert workers_fitting(8, 1 / n) == 8 * n  # 8 // 0.2 is 39.0 in floating point
        assert gpus_held(8 * n, 1 / n) == 8
    assert gpus_held(1, 0.5) == 1  # one worker with both engines of its GPU: the GPU is held
    assert gpus_held(3, 0.5) == 2 and gpus_held(2, 1.0) == 2 and gpus_held(1, 0.0) == 0


def test_the_cuda_graph_mode_reaches_the_engine_beside_the_capture_size(monkeypatch, tmp_path, built):
    """--cuda-graph-mode is vLLM's cudagraph_mode by its enum name, merged with the capture size mcprm sizes; left
    unset, vLLM's own mode (nothing passed)."""
    from rollouts import registry
    from rollouts.options import VLLMOptions

    _pretend_gpu(monkeypatch, (H200, "NVIDIA H200"))
    ref = registry.ModelRef(model=_model_folder(tmp_path, QWEN_1_5B), tokenizer=None, dtype=None, seed=3)
    one = {"engines_per_gpu": 1}  # one engine of the GPU: its sized limit of 2,048
    registry._vllm_build(ref, VLLMOptions(cuda_graph_mode="full", **one))
    registry._vllm_build(ref, VLLMOptions(cuda_graph_mode="full-decode-only", cuda_graph_max=0, **one))
    registry._vllm_build(ref, VLLMOptions(**one))
    assert [kw.get("compilation_config") for kw in built] == [
        {"max_cudagraph_capture_size": 2048, "cudagraph_mode": "FULL"}, {"cudagraph_mode": "FULL_DECODE_ONLY"},
        {"max_cudagraph_capture_size": 2048}]
    assert VLLMOptions(cuda_graph_mode="fast").problems(True) == [
        "--cuda-graph-mode must be one of full, full-and-piecewise, piecewise, full-decode-only, none, got 'fast'"]
