"""Several engines in one worker (rollouts/multi_engine.py), scheduling logic only: each engine is the real
``loop`` engine thread over a scripted stand-in for ``vllm.LLM`` (tests/rollouts/test_vllm_loop.py)."""

from __future__ import annotations

import pytest

from rollouts.base import GenRequest
from rollouts.multi_engine import MultiEngineBackend

from .test_vllm_loop import SAMPLING, ScriptedEngine, make_backend


def reqs(tag: str, groups: int, per_group: int = 3, n: int = 4) -> list[GenRequest]:
    return [GenRequest(f"{tag}{g}-{j} prompt", n=n, seed=7919 * g + j, group=f"{tag}{g}")
            for g in range(groups) for j in range(per_group)]


def two_engines():
    engs = [ScriptedEngine(), ScriptedEngine()]
    return engs, MultiEngineBackend([make_backend(e) for e in engs])


def test_completions_are_each_requests_own_in_order_and_the_same_as_one_engine():
    rs = reqs("a", 10)
    one = make_backend(ScriptedEngine())
    engs, multi = two_engines()
    try:
        want = one.generate(rs, SAMPLING)
        got = multi.generate(rs, SAMPLING)
    finally:
        one.close()
        multi.close()
    assert [[c.text for c in x] for x in got] == [[c.text for c in x] for x in want]
    assert all(e.steps > 0 for e in engs)  # both engines drew samples


def test_a_group_stays_on_its_engine_across_rounds():
    engs, multi = two_engines()
    try:
        multi.generate(reqs("a", 8), SAMPLING)
        seen = [set() for _ in engs]
        for i, e in enumerate(engs):  # which groups each engine ran: from its batches' prompt tags
            for b in e.batches:
                seen[i] |= {t.split("-")[0] for t in b}
        multi.generate(reqs("a", 8), SAMPLING)  # the same solutions' next round
        again = [set() for _ in engs]
        for i, e in enumerate(engs):
            for b in e.batches:
                again[i] |= {t.split("-")[0] for t in b}
        assert seen[0] and seen[1] and not seen[0] & seen[1]  # split between the engines, no group on both
        assert again == seen  # the second round went where the first did (their prefixes are cached there)
    finally:
        multi.close()


def test_new_groups_go_to_the_least_loaded_engine():
    engs = [ScriptedEngine(step_s=0.05), ScriptedEngine(step_s=0.05)]
    multi = MultiEngineBackend([make_backend(e) for e in engs])
    try:
        big = multi.submit([GenRequest("big prompt", n=64, seed=1, group="big")], SAMPLING)
        small = multi.submit(reqs("s", 4, per_group=1, n=1), SAMPLING)
        assert multi._home["big"] != multi._home["s0"]  # the busy engine is passed over ...
        assert {multi._home[f"s{g}"] for g in range(4)} == {1 - multi._home["big"]}  # ... until it is not the busiest
        for f in big + small:
            f.result(timeout=10)
        assert multi._inflight == [0, 0]
    finally:
        multi.close()


def test_stats_add_up_and_rates_use_the_longest_engine():
    engs, multi = two_engines()
    try:
        multi.generate(reqs("a", 6, n=2), SAMPLING)
        st = multi.stats
        per = [e.stats for e in multi.engines]
        assert st.requests == 18 == sum(p.requests for p in per)
        assert st.rollouts == 36 and st.rollout_tokens == sum(p.rollout_tokens for p in per)
        assert st.generate_seconds == max(p.generate_seconds for p in per)
        assert len(st.as_dict()["engines"]) == 2
    finally:
        multi.close()


def test_an_engine_failure_fails_its_requests_only():
    engs = [ScriptedEngine(fail_at_step=1), ScriptedEngine()]
    multi = MultiEngineBackend([make_backend(e) for e in engs])
    try:
        futs = multi.submit(reqs("a", 6), SAMPLING)
        bad = [f for f in futs if f.exception(timeout=10) is not None]
        assert bad and len(bad) < len(futs)  # engine 0's requests failed, engine 1's came back
        assert "illegal memory access" in str(bad[0].exception())
    finally:
        multi.close()


def test_needs_streaming_engines():
    class Offline:
        streaming = False

    with pytest.raises(ValueError, match="streaming"):
        MultiEngineBackend([Offline()])
