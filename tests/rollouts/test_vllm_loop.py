"""The vLLM backend's ``loop`` engine (scheduling logic only): a scripted stand-in for ``vllm.LLM`` with the
methods the loop uses (``enqueue``, ``llm_engine.step``, ``llm_engine.has_unfinished_requests``).
The real engine runs in tests/rollouts/test_vllm_gpu.py (GPU marker) and bench/gpu_bench.py."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import pytest

from rollouts.base import BackendStats, GenRequest, SamplingConfig
from rollouts.vllm_backend import VLLMBackend, _EngineLoop, _external_id

SAMPLING = SamplingConfig(temperature=1.0, max_new_tokens=8)


class ScriptedEngine:
    """Finishes a random third of the unfinished requests per step, out of order; records batch sizes."""

    def __init__(self, fail_at_step: int | None = None, step_s: float = 0.002):
        self.unfinished: list[tuple[str, str, object]] = []
        self.steps = 0
        self.sizes: list[int] = []
        self.batches: list[set[str]] = []  # which tags were in the running batch at each step
        self.fail_at_step = fail_at_step
        self.step_s = step_s
        self.rng = random.Random(0)
        self.thread_ids: set[int] = set()

    def has_unfinished_requests(self) -> bool:
        self.thread_ids.add(threading.get_ident())
        return bool(self.unfinished)

    def step(self):
        self.thread_ids.add(threading.get_ident())
        self.steps += 1
        if self.fail_at_step is not None and self.steps >= self.fail_at_step:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        time.sleep(self.step_s)
        self.sizes.append(len(self.unfinished))
        self.batches.append({prompt.split()[0] for _, prompt, _ in self.unfinished})
        self.rng.shuffle(self.unfinished)
        k = max(1, len(self.unfinished) // 3)
        done, self.unfinished = self.unfinished[:k], self.unfinished[k:]
        outs = []
        for ext, prompt, p in done:
            outs.append(SimpleNamespace(
                request_id=ext, finished=True, prompt_token_ids=list(range(len(prompt.split()))),
                outputs=[SimpleNamespace(index=i, text=f"{prompt}|{i}|{p.seed}", token_ids=[7] * (i + 1),
                                         finish_reason="length" if i % 2 else "stop") for i in reversed(range(p.n))],
            ))
        # one unfinished (streaming) output too: the loop must ignore it
        if self.unfinished:
            outs.append(SimpleNamespace(request_id=self.unfinished[0][0], finished=False, outputs=[]))
        return outs


class ScriptedLLM:
    def __init__(self, engine: ScriptedEngine):
        self.llm_engine = engine
        self._next = 0

    def enqueue(self, prompts, params, use_tqdm=False):
        ids = []
        for prompt, p in zip(prompts, params):
            if "too-long" in prompt:
                raise ValueError("The decoder prompt (length 5000) is longer than the maximum model length of 4096")
            self._next += 1
            ext = str(self._next)
            self.llm_engine.unfinished.append((ext, prompt, p))
            ids.append(f"{ext}-{'abcdefgh'}")
        return ids


def make_backend(engine: ScriptedEngine) -> VLLMBackend:
    be = VLLMBackend.__new__(VLLMBackend)  # no vllm import: the engine is scripted
    be._vllm = SimpleNamespace(SamplingParams=lambda **kw: SimpleNamespace(**kw))
    be.stats = BackendStats()
    be._lock = threading.Lock()
    be._last_refresh = 0.0
    be._counters0 = None
    be.engine = None
    be.llm = ScriptedLLM(engine)
    be.streaming = True
    be._steps = _EngineLoop(be)
    return be


def reqs(tag: str, count: int, n: int = 3) -> list[GenRequest]:
    return [GenRequest(f"{tag} prompt {i}", n=n, seed=1000 + i, group=f"{tag}{i // 2}") for i in range(count)]


def test_every_future_gets_its_own_completions_in_index_order():
    eng = ScriptedEngine()
    be = make_backend(eng)
    try:
        rs = reqs("a", 20)
        futs = be.submit(rs, SAMPLING)
        for r, f in zip(rs, futs):
            comps = f.result(timeout=10)
            assert [c.text for c in comps] == [f"{r.prompt}|{i}|{r.seed}" for i in range(r.n)]
            assert [c.num_tokens for c in comps] == [1, 2, 3]
            assert [c.finish_reason for c in comps] == ["stop", "length", "stop"]
        assert be.stats.samples == 60 and be.stats.requests == 20
        assert be.stats.generated_tokens == 20 * 6 and be.stats.generate_seconds > 0
    finally:
        be.close()
    assert len(eng.thread_ids) == 1  # every engine call happened on the loop's own thread
    assert threading.get_ident() not in eng.thread_ids


def test_work_submitted_mid_run_joins_the_running_batch():
    eng = ScriptedEngine(step_s=0.01)
    be = make_backend(eng)
    try:
        first = be.submit(reqs("a", 30), SAMPLING)
        first[0].result(timeout=10)  # the engine is running
        assert eng.unfinished  # ... and still busy with the first batch
        second = be.submit(reqs("b", 30), SAMPLING)
        assert all(len(f.result(timeout=10)) == 3 for f in first + second)
    finally:
        be.close()
    # the second batch was added while the first was still running: some step ran both
    assert {"a", "b"} in eng.batches


def test_generate_waits_and_n_zero_is_empty():
    be = make_backend(ScriptedEngine())
    try:
        out = be.generate([GenRequest("x", 0, 1), GenRequest("y", 2, 5)], SAMPLING)
        assert out[0] == [] and [c.text for c in out[1]] == ["y|0|5", "y|1|5"]
    finally:
        be.close()


def test_engine_error_fails_pending_and_later_requests():
    eng = ScriptedEngine(fail_at_step=3)
    be = make_backend(eng)
    try:
        futs = be.submit(reqs("a", 40), SAMPLING)
        errors = 0
        for f in futs:
            try:
                f.result(timeout=10)
            except RuntimeError as e:
                assert "illegal memory access" in str(e)
                errors += 1
        assert errors > 0  # nothing hangs: unfinished requests fail with the engine's error
        with pytest.raises(RuntimeError, match="engine loop failed"):
            be.submit(reqs("b", 2), SAMPLING)
    finally:
        be.close()


def test_a_rejected_request_fails_alone():
    be = make_backend(ScriptedEngine())
    try:
        rs = reqs("a", 5)
        rs[2] = GenRequest("too-long prompt", 3, 1, "x")
        futs = be.submit(rs, SAMPLING)
        with pytest.raises(ValueError, match="longer than the maximum model length"):
            futs[2].result(timeout=10)
        assert all(len(f.result(timeout=10)) == 3 for i, f in enumerate(futs) if i != 2)
        assert len(be.generate(reqs("b", 3), SAMPLING)) == 3  # the engine goes on
    finally:
        be.close()


def test_close_stops_the_thread():
    be = make_backend(ScriptedEngine())
    loop = be._steps
    be.generate(reqs("a", 4), SAMPLING)
    be.close()
    assert not loop._thread.is_alive()


@pytest.mark.parametrize(("internal", "external"), [("12-abcdefgh", "12"), ("12", "12"), ("a-b-c1234567", "a-b")])
def test_external_id(internal, external):
    assert _external_id(internal) == external
