"""The draft SGLang backend (issue 29 item 4), CPU side only: it imports without sglang or torch, says how to
install sglang when it is missing, and its batching logic (n samples per request, a group's requests adjacent,
outputs mapped back to their requests) against a scripted stand-in for ``sglang.Engine``. The real engine has
not run yet (bench/sglang_try.sh on the GPU machine)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rollouts.base import Counters, GenRequest, MissingDependency, SamplingConfig
from rollouts.sglang_backend import SGLangBackend

ROOT = Path(__file__).resolve().parents[2]


def test_imports_light():
    code = ("import sys, rollouts.sglang_backend\n"
            "heavy = [m for m in ('sglang', 'torch', 'transformers') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_missing_sglang_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang", None)  # import sglang -> ImportError, installed or not
    with pytest.raises(MissingDependency, match="sglang==0.5.17"):
        SGLangBackend("some/model")


class ScriptedEngine:
    """Answers each prompt with its own text reversed; the i-th output's length is its position in the batch."""

    def __init__(self, finish="length"):
        self.calls = []
        self.finish = finish

    def generate(self, prompt, sampling_params):
        self.calls.append((list(prompt), list(sampling_params)))
        return [{"text": p[::-1], "output_ids": list(range(i + 1)),
                 "meta_info": {"completion_tokens": i + 1, "prompt_tokens": len(p), "cached_tokens": 1,
                               "finish_reason": {"type": self.finish}}}
                for i, p in enumerate(prompt)]

    def shutdown(self):
        self.calls.append("shutdown")


def _backend(engine, deterministic=False):
    b = SGLangBackend.__new__(SGLangBackend)  # no sglang here: wire the scripted engine in by hand
    b.engine = engine
    b._deterministic = deterministic
    b.stats, b._lock = Counters(), threading.Lock()
    return b


def test_samples_are_mapped_back_and_groups_kept_together():
    eng = ScriptedEngine()
    b = _backend(eng)
    reqs = [GenRequest("a1", 2, 10, "A"), GenRequest("b1", 1, 20, "B"), GenRequest("a2", 3, 30, "A"),
            GenRequest("z", 0, 40, "B")]
    out = b.generate(reqs, SamplingConfig(max_new_tokens=5, stop=("\n\n",)))
    prompts, params = eng.calls[0]
    assert prompts == ["a1", "a1", "a2", "a2", "a2", "b1"]  # group A's requests first, each sample adjacent
    assert [len(c) for c in out] == [2, 1, 3, 0]
    assert [c.text for c in out[2]] == ["2a"] * 3 and out[1][0].text == "1b"
    assert [c.num_tokens for c in out[2]] == [3, 4, 5] and out[1][0].num_tokens == 6
    assert out[2][0].token_ids == (0, 1, 2) and out[0][0].finish_reason == "length"
    assert all(p["stop"] == ["\n\n"] and p["max_new_tokens"] == 5 and "sampling_seed" not in p for p in params)
    assert b.stats.samples == 6 and b.stats.requests == 3 and b.stats.generated_tokens == sum(range(1, 7))
    assert b.stats.cached_prompt_tokens == 6 and b.stats.prompt_tokens == 12
    b.close()
    assert eng.calls[-1] == "shutdown" and b.engine is None


def test_deterministic_mode_gives_each_sample_its_seed_and_abort_is_an_error():
    eng = ScriptedEngine()
    _backend(eng, deterministic=True).generate([GenRequest("p", 3, 100, "g")], SamplingConfig())
    assert [p["sampling_seed"] for p in eng.calls[0][1]] == [100, 101, 102]
    with pytest.raises(RuntimeError, match="aborted"):
        _backend(ScriptedEngine(finish="abort")).generate([GenRequest("p", 1, 1, "g")], SamplingConfig())
