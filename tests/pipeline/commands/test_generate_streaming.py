"""`mcprm generate` keeps a streaming engine busy: later batches are submitted while earlier ones generate, rows
come out in the problems' order. Scheduling logic with a scripted streaming engine; the rows' contract (each
problem's request and so its samples are those of one batch at a time) with the real bundled model."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future

import pytest

from pipeline.bundled import PROBLEMS_PATH
from pipeline.commands.generate import stream_batches
from rollouts.base import Completion, Counters, GenRequest, SamplingConfig

SC = SamplingConfig(max_new_tokens=4)


class ScriptedStreaming:
    """Resolves futures only when told (``finish(i)``: batch i), recording what was in flight at each submit."""

    streaming = True

    def __init__(self):
        self.stats = Counters()
        self.batches: list[tuple[list[GenRequest], list[Future]]] = []
        self.inflight_at_submit: list[int] = []

    def submit(self, reqs, sampling):
        self.inflight_at_submit.append(sum(not f.done() for _, fs in self.batches for f in fs))
        futs = [Future() for _ in reqs]
        self.batches.append((list(reqs), futs))
        return futs

    def finish(self, i, error=None):
        for r, f in zip(*self.batches[i]):
            if error is not None:
                f.set_exception(error)
            else:
                f.set_result([Completion(f"{r.prompt}/{r.seed}/{j}", 1) for j in range(r.n)])


def batches(k, size=2):
    return [[GenRequest(f"b{b}p{i}", 2, 100 * b + i, f"b{b}p{i}") for i in range(size)] for b in range(k)]


def test_later_batches_are_submitted_while_the_first_generates_and_rows_stay_in_order():
    eng = ScriptedStreaming()
    it = stream_batches(eng, iter(batches(5)), SC, ahead=2)
    got = []
    t = threading.Thread(target=lambda: got.extend(it))
    t.start()
    for _ in range(200):  # the consumer submits three batches (the one it waits on and two ahead) ...
        if len(eng.batches) == 3:
            break
        threading.Event().wait(0.01)
    assert len(eng.batches) == 3 and eng.inflight_at_submit == [0, 2, 4]  # ... each while the others are in flight
    for i in (2, 1):  # later batches finish first: nothing comes out before batch 0
        eng.finish(i)
    threading.Event().wait(0.05)
    assert got == []
    eng.finish(0)
    for _ in range(200):
        if len(eng.batches) == 5:
            break
        threading.Event().wait(0.01)
    eng.finish(3)
    eng.finish(4)
    t.join(10)
    assert [[r.prompt for r in b] for b, _ in got] == [[r.prompt for r in b] for b in batches(5)]
    assert [c.text for _, outs in got for comps in outs for c in comps][:2] == ["b0p0/0/0", "b0p0/0/1"]


def test_a_failed_request_raises_in_its_turn():
    eng = ScriptedStreaming()
    it = stream_batches(eng, iter(batches(2)), SC, ahead=4)
    eng_err = RuntimeError("CUDA error")
    out = []
    t = threading.Thread(target=lambda: out.append(pytest.raises(RuntimeError, lambda: list(it))))
    t.start()
    for _ in range(200):
        if len(eng.batches) == 2:
            break
        threading.Event().wait(0.01)
    eng.finish(1)
    eng.finish(0, error=eng_err)
    t.join(10)
    assert out and "CUDA error" in str(out[0].value)


def test_a_non_streaming_backend_is_asked_one_batch_at_a_time():
    calls = []

    class Batch:
        streaming = False

        def generate(self, reqs, sampling):
            calls.append([r.prompt for r in reqs])
            return [[Completion(r.prompt, 1)] * r.n for r in reqs]

    out = list(stream_batches(Batch(), iter(batches(3)), SC))
    assert calls == [[r.prompt for r in b] for b in batches(3)] and len(out) == 3


def _problems(tmp_path, k):
    probs = tmp_path / "problems.jsonl"
    probs.write_text("".join(line + "\n" for line in PROBLEMS_PATH.read_text().splitlines()[:k]))
    return probs


def test_bundled_model_rows_are_each_problems_own_samples_whatever_the_batching(tmp_path):
    """The real bundled model: each problem's samples are those of its own request (prompt, n, seed derived from
    the problem), the same with 1 or 3 problems per batch and the same as asking the backend directly."""
    from pipeline.commands.generate import generate
    from pipeline.config import LabelConfig
    from pipeline.execution.shard_worker import build_backend
    from pipeline.labeling.scheduler import derive_seed

    probs = _problems(tmp_path, 4)
    rows = {}
    for bp in (1, 3):
        cfg = LabelConfig(input=[str(probs)], output=str(tmp_path / f"s{bp}.jsonl"), max_new_tokens=24, seed=5)
        generate(cfg, n=2, batch_problems=bp)
        rows[bp] = (tmp_path / f"s{bp}.jsonl").read_text()
    assert rows[1] == rows[3]
    # the contract, checked against the backend asked directly with the requests generate promises to send
    cfg = LabelConfig(input=[str(probs)], output=str(tmp_path / "x.jsonl"), max_new_tokens=24, seed=5).resolved()
    be = build_backend(cfg)
    fmt = cfg.prompt_builder()
    try:
        got = [json.loads(x) for x in rows[1].splitlines()]
        problems = [json.loads(x) for x in probs.read_text().splitlines()]
        for p in problems:
            pid = str(p.get("id"))
            req = GenRequest(fmt.prefix(p["problem"].strip(), []), 2, derive_seed(5, pid, -1, 0), pid)
            comps = be.generate([req], cfg.sampling_config(fmt))[0]
            want = [[x.strip() for x in c.text.split(fmt.separator) if x.strip()] for c in comps]
            assert [r["steps"] for r in got if r["problem_id"] == pid] == [w for w in want if w]
    finally:
        be.close()
