"""Hostile answers: each gives a verdict that is not "correct", with a reason, and nothing is executed.

The time limit itself is enforced by the killable worker pool (tests/graders/test_pool.py checks that a
hung comparison is killed and reported as "timeout"); wall-clock speed is measured in bench/, not here.
"""

from __future__ import annotations

import pytest

from graders import GraderConfig, grade, grade_batch

TIMEOUT = 1.0


def _injections(marker: str) -> list[str]:
    return [
        f"__import__('os').system('touch {marker}')",
        f'__import__("os").system("touch {marker}")',
        f"exec(\"open('{marker}', 'w')\")",
        f"eval(compile('open(\"{marker}\",\"w\")', 's', 'exec'))",
        f"(lambda: __import__('os').system('touch {marker}'))()",
        f"().__class__.__base__.__subclasses__()[0]('{marker}')",
        f"Symbol('x').__class__('touch {marker}')",
        f"\\input{{{marker}}}",
    ]


EXPLOSIVE = [
    r"9^{9^{9}}",
    r"2^{2^{2^{2^{2^{2}}}}}",
    r"10^{10^{10}}",
    "9**9**9",
    r"2^{99999999}",
    "100000!",
    r"(10^{100})! + 1",
    "1+" * 300_000 + "1",  # a megabyte-scale string
    "(" * 5_000 + "1" + ")" * 5_000,  # deep nesting
    r"\frac{" * 200 + "1" + "}{2}" * 200,
    "{" * 100_000,
    r"\prod_{n=1}^{9999} n^{n}",  # passes the pre-screen: only the time limit stops it
    r"\sum_{n=1}^{10^{9}} n^{n}",
    "x" * 2_000,
    "\\boxed{" * 50_000,
]


@pytest.fixture(scope="module", autouse=True)
def warm_pool():
    grade(r"\sqrt{2}", r"\boxed{\sqrt{2}+0}")  # start the workers outside the timed checks


@pytest.mark.parametrize("where", ["boxed", "plain"])
def test_injection_is_never_executed(tmp_path, where):
    marker = tmp_path / "pwned"
    cfg = GraderConfig(timeout_s=TIMEOUT)
    for payload in _injections(str(marker)):
        response = f"\\boxed{{{payload}}}" if where == "boxed" else f"The answer is {payload}"
        v = grade("5", response, cfg)
        assert v.correct is not True, (payload, v)
        assert v.reason, (payload, v)
    assert not marker.exists()


@pytest.mark.parametrize("payload", EXPLOSIVE, ids=lambda p: p[:30])
def test_explosive_inputs_are_null_within_limit(payload):
    cfg = GraderConfig(timeout_s=TIMEOUT)
    v = grade("5", f"\\boxed{{{payload}}}", cfg)
    if v.no_answer:  # an unclosed box: nothing to grade, a failed continuation
        assert v.correct is False
    else:
        assert v.correct is None, v
        assert v.reason.startswith(("too large", "timeout", "answer unparseable")), v.reason


def test_batch_of_hostile_inputs_keeps_order_and_limit(tmp_path):
    marker = tmp_path / "pwned"
    hostile = [*EXPLOSIVE, *_injections(str(marker))]
    pairs = []
    for i, h in enumerate(hostile):
        pairs.append(("5", f"\\boxed{{{h}}}"))
        pairs.append((str(i), f"The answer is \\boxed{{{i}}}"))
    vs = grade_batch(pairs, GraderConfig(timeout_s=TIMEOUT))
    assert all(v.correct is not True for v in vs[0::2])
    assert all(v.correct is True for v in vs[1::2])
    assert not marker.exists()


def test_timeouts_are_not_cached():
    cfg = GraderConfig(timeout_s=0.3)
    assert grade("1", r"\boxed{\prod_{n=1}^{9998} n^{n}}", cfg).reason == "timeout"
    from graders import CACHE

    assert all(v[1] != "timeout" for v in CACHE._d.values())
