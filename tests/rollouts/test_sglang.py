"""The sglang backend (issue 29 item 4), CPU side: its registry entry (it runs from the vllm backend's options
section), the machine check and the install hint, the light imports, and its batching, seeds, token ids and
counters against a stand-in ``sglang`` module whose ``Engine`` answers by script. The real engine has not run
through mcprm yet (bench/gpu_e2e/sglang_label.sh on the GPU machine)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from pipeline.config import SECTIONS, ConfigError, LabelConfig
from rollouts.base import GenRequest, MissingDependency, SamplingConfig
from rollouts.options import VLLMOptions
from rollouts.registry import BACKENDS, ModelRef, backend_problem

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "data" / "model"


class ScriptedEngine:
    """``sglang.Engine`` as the backend uses it. Each output: ``answer(prompt)`` (default the prompt reversed),
    its length = its position in the batch, or ``ids(prompt, text)`` as its token ids."""

    made: list[ScriptedEngine] = []

    def __init__(self, finish="length", answer=None, ids=None, with_ids=True, delay=0.0, **kwargs):
        self.kwargs, self.calls, self.finish = kwargs, [], finish
        self.answer, self.ids, self.with_ids, self.delay = answer or (lambda p: p[::-1]), ids, with_ids, delay
        self.inside = 0
        self.overlapped = False
        ScriptedEngine.made.append(self)

    def generate(self, prompt, sampling_params):
        self.inside += 1
        self.overlapped |= self.inside > 1
        try:
            time.sleep(self.delay)
            self.calls.append((list(prompt), list(sampling_params)))
            outs = []
            for i, p in enumerate(prompt):
                text = self.answer(p)
                ids = self.ids(p, text) if self.ids else list(range(i + 1))
                out = {"text": text, "meta_info": {"completion_tokens": len(ids), "prompt_tokens": len(p),
                                                    "cached_tokens": 1, "finish_reason": {"type": self.finish}}}
                if self.with_ids:
                    out["output_ids"] = ids
                outs.append(out)
            return outs
        finally:
            self.inside -= 1

    def shutdown(self):
        self.calls.append("shutdown")


@pytest.fixture
def fake_sglang(monkeypatch):
    """A stand-in ``sglang`` module; ``fake_sglang.engine_args`` updates what every Engine is made with."""
    mod = types.ModuleType("sglang")
    mod.engine_args = {}
    mod.Engine = lambda **kw: ScriptedEngine(**mod.engine_args, **kw)
    monkeypatch.setitem(sys.modules, "sglang", mod)
    ScriptedEngine.made.clear()
    return mod


def _build(opts=None, ref=None):
    return BACKENDS["sglang"].build(ref or ModelRef("some/model", None, None, 0), opts or VLLMOptions())


# ------------------------------------------------------------------------------------------ registry and options
def test_registered_with_the_vllm_section():
    spec = BACKENDS["sglang"]
    assert spec.options is VLLMOptions and spec.section == "vllm"
    assert "sglang" not in SECTIONS  # no section of its own: its flags are the vllm backend's
    assert spec.streaming(VLLMOptions()) is False and spec.token_ids and spec.local_model
    assert spec.gpus(VLLMOptions(tensor_parallel_size=4)) == 4.0
    cfg = LabelConfig(backend="sglang", tensor_parallel_size=2, max_model_len=4096)
    assert cfg.backend_options is cfg.vllm and cfg.worker_gpus == 2.0 and cfg.worker_shards == 1


@pytest.mark.parametrize("bad, says", [
    ({"tensor_parallel_size": 0}, "--tensor-parallel-size must be at least 1, got 0"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be in (0, 1], got 1.5"),
])
def test_bad_options_are_refused(bad, says):
    with pytest.raises(ConfigError) as e:
        LabelConfig(backend="sglang", **bad)
    assert says in str(e.value)


def test_build_maps_the_options_to_sglang_names(fake_sglang):
    b = _build(VLLMOptions(tensor_parallel_size=2, gpu_memory_utilization=0.7, max_model_len=4096,
                           load_format="dummy", deterministic=True),
               ModelRef("/m", "/tok", "bfloat16", 5))
    kw = b.engine.kwargs
    assert (kw["model_path"], kw["tokenizer_path"], kw["tp_size"], kw["mem_fraction_static"]) == ("/m", "/tok", 2, 0.7)
    assert (kw["context_length"], kw["load_format"], kw["dtype"], kw["random_seed"]) == (4096, "dummy", "bfloat16", 5)
    assert kw["enable_deterministic_inference"] is True and kw["sampling_backend"] == "pytorch"
    kw = _build().engine.kwargs  # the defaults: sglang's own context, weights and dtype
    assert "context_length" not in kw and "load_format" not in kw and kw["dtype"] == "auto"
    assert kw["enable_deterministic_inference"] is False
    assert set(b.stats.as_dict()) >= {"import_seconds", "engine_seconds"}


# ---------------------------------------------------------------------------- machine check, install hint, imports
def test_machine_problem_here():
    from rollouts.devices import nvidia_gpus

    why = backend_problem("sglang")
    if nvidia_gpus() == 0:
        assert why is not None and why.startswith("--backend sglang runs on NVIDIA GPUs, and this machine has none")
        assert "--backend hf" in why and "pip install" not in why
    else:
        import importlib.util

        if importlib.util.find_spec("sglang") is None:
            assert why is not None and "sglang is not installed" in why and "sglang==0.5.17" in why
    assert backend_problem("sglang", remote=True) is None  # a Ray cluster's machines are not this one


def test_machine_problem_names_the_install(monkeypatch):
    import rollouts.devices

    monkeypatch.setattr(rollouts.devices, "nvidia_gpus", lambda: 0)
    assert "this machine has none" in backend_problem("sglang")
    monkeypatch.setattr(rollouts.devices, "nvidia_gpus", lambda: 1)
    monkeypatch.setitem(sys.modules, "sglang", None)  # not importable, installed or not
    assert backend_problem("sglang") == ("--backend sglang: sglang is not installed. Install it with: pip install "
                                         "'sglang==0.5.17' (needs a CUDA GPU and torch 2.11); see bench/sglang_try.sh")
    monkeypatch.setitem(sys.modules, "sglang", types.ModuleType("sglang"))
    monkeypatch.setattr(sys.modules["sglang"], "__spec__", object(), raising=False)
    assert backend_problem("sglang") is None


def test_missing_sglang_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang", None)  # import sglang -> ImportError, installed or not
    with pytest.raises(MissingDependency, match=r"sglang is not installed .*pip install 'sglang==0\.5\.17'"):
        _build()
    from pipeline.execution.shard_worker import build_backend

    with pytest.raises(MissingDependency, match="sglang==0.5.17"):
        build_backend(LabelConfig(backend="sglang", model="some/model"))


def test_imports_light():
    code = ("import sys, rollouts.registry, rollouts.sglang_backend, pipeline.config\n"
            "from rollouts.registry import BACKENDS, backend_problem\n"
            "BACKENDS['sglang'].machine_problem('cpu'); backend_problem('sglang')\n"
            "heavy = [m for m in ('sglang', 'torch', 'transformers', 'vllm') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------------------------------- batching, seeds, counters
def test_samples_are_mapped_back_and_groups_kept_together(fake_sglang):
    b = _build()
    eng = b.engine
    reqs = [GenRequest("a1", 2, 10, "A"), GenRequest("b1", 1, 20, "B"), GenRequest("a2", 3, 30, "A"),
            GenRequest("z", 0, 40, "B")]
    out = b.generate(reqs, SamplingConfig(max_new_tokens=5, stop=("\n\n",), stop_token_ids=(7,)))
    prompts, params = eng.calls[0]
    assert prompts == ["a1", "a1", "a2", "a2", "a2", "b1"]  # group A's requests first, each sample adjacent
    assert [len(c) for c in out] == [2, 1, 3, 0]
    assert [c.text for c in out[2]] == ["2a"] * 3 and out[1][0].text == "1b"
    assert [c.num_tokens for c in out[2]] == [3, 4, 5] and out[1][0].num_tokens == 6
    assert out[2][0].token_ids == (0, 1, 2) and out[0][0].finish_reason == "length"
    assert all(p["stop"] == ["\n\n"] and p["stop_token_ids"] == [7] and p["max_new_tokens"] == 5 for p in params)
    assert all("sampling_seed" not in p for p in params)  # not honoured outside deterministic mode: not sent
    st = b.stats
    assert st.samples == 6 and st.requests == 3 and st.generated_tokens == sum(range(1, 7))
    assert st.cached_prompt_tokens == 6 and st.prompt_tokens == 12
    assert st.extra["prefix_cache_hit_rate"] == 0.5 and st.extra["generated_tokens_per_s"] > 0
    assert b.generate([GenRequest("x", 0, 1)], SamplingConfig()) == [[]] and len(eng.calls) == 1
    b.close()
    assert eng.calls[-1] == "shutdown" and b.engine is None


def test_deterministic_mode_seeds_each_sample(fake_sglang):
    b = _build(VLLMOptions(deterministic=True))
    b.generate([GenRequest("p", 3, 100, "g"), GenRequest("q", 1, 2**63 - 1, "g")], SamplingConfig())
    assert [p["sampling_seed"] for p in b.engine.calls[0][1]] == [100, 101, 102, 2**63 - 1]


def test_finish_reasons_abort_and_missing_ids(fake_sglang):
    fake_sglang.engine_args = {"finish": "stop", "with_ids": False}
    (c,), = _build().generate([GenRequest("p", 1, 1, "g")], SamplingConfig())
    assert c.finish_reason == "stop" and c.token_ids is None  # no ids: that continuation is not reused
    fake_sglang.engine_args = {"finish": "abort"}
    with pytest.raises(RuntimeError, match="aborted"):
        _build().generate([GenRequest("p", 1, 1, "g")], SamplingConfig())


def test_one_generate_at_a_time(fake_sglang):
    """Two shards' schedulers on one worker (--shards-per-worker 2): the engine's loop takes one call at a time."""
    fake_sglang.engine_args = {"delay": 0.05}
    b = _build()
    ts = [threading.Thread(target=b.generate, args=([GenRequest(f"p{i}", 2, i, "g")], SamplingConfig()))
          for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(b.engine.calls) == 4 and not b.engine.overlapped
    assert b.stats.samples == 8 and b.stats.generate_seconds >= 4 * 0.05


# -------------------------------------------------------------------------------------------------- the pipeline
def test_a_shard_labeled_through_the_pipeline(fake_sglang, tmp_path):
    """``--backend sglang`` from the config to the shard file, on the stand-in engine: built by the registry from
    the vllm section, one generate per round (offline), token ids from the engine and prompt ids from
    ``encode_prompt`` (the bundled model's tokenizer) make rollout reuse count exactly as with vLLM."""
    AutoTokenizer = pytest.importorskip("transformers").AutoTokenizer
    from pipeline.execution.shard_worker import ShardWorker
    from pipeline.solution import Solution
    from pipeline.storage.store import CorpusStore

    tok = AutoTokenizer.from_pretrained(str(MODEL))
    row = json.loads((ROOT / "data" / "sample.jsonl").read_text().splitlines()[1])  # a correct solution
    sol = Solution(row["id"], row["problem"], row["answer"], tuple(row["steps"]))

    def rest(prompt):  # the solution's own next steps, verbatim: every later prefix can take it as a draw
        for i in range(len(sol.steps)):
            if prompt.rstrip("\n").endswith(sol.steps[i]):
                return "\n".join(sol.steps[i + 1:])
        raise AssertionError(prompt)

    def ids(prompt, text):  # what the model would have generated: the tokens after the prompt's
        p = tok(prompt)["input_ids"]
        full = tok(prompt + text)["input_ids"]
        assert full[: len(p)] == p
        return full[len(p):]

    fake_sglang.engine_args = {"answer": rest, "ids": ids, "finish": "stop"}
    cfg = LabelConfig(backend="sglang", model=str(MODEL), output=str(tmp_path / "out"), k=2, strategy="per-step",
                      max_new_tokens=64, tensor_parallel_size=1, max_model_len=512)
    w = ShardWorker(cfg, cpus=1)
    try:
        res = w.process(1, 0, [sol])
    finally:
        w.close()
    eng = ScriptedEngine.made[-1]
    assert eng.kwargs["model_path"] == str(MODEL) and eng.kwargs["context_length"] == 512
    assert res["rows"] == 1 and res["reused_rollouts"] > 0  # token ids + encode_prompt: reuse works
    (got,) = CorpusStore(str(tmp_path / "out")).read_table(res["path"]).to_pylist()
    assert got["id"] == sol.id and got["first_error"] == -1 and all(c > 0 for c in got["mc_correct"][:-1])
    assert eng.calls[-1] == "shutdown" and len(eng.calls) >= 2  # rounds, each one generate
