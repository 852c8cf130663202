"""A huge field is refused before it costs memory: a problem over its limit is rejected right after the row is
decoded, before the prompt check's tokenizer copies it (a 10 MB problem took 2.2 GB there); a line longer than any
valid row can be (the row limits say how long) is refused as it streams in, never decoded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.bundled import SAMPLE_PATH
from pipeline.input import InputError, InputSpec
from pipeline.input.files import MAX_LINE_BYTES
from tests.input_files import iter_solutions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(spec: InputSpec, skip_bad: bool = False) -> list:
    return list(iter_solutions(spec, skip_bad=skip_bad, on_reject=(lambda *a, **k: None) if skip_bad else None))


def _rows(n: int = 2) -> list[dict]:
    return [json.loads(x) for x in SAMPLE_PATH.read_text().splitlines()[:n]]


def _write(path, rows) -> str:
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_problem_over_its_limit_never_reaches_the_prompt_check(tmp_path):
    good, other = _rows()
    p = _write(tmp_path / "in.jsonl", [good, dict(other, problem="x" * 200_001, id="big")])
    seen: list = []

    def check(sols):
        seen.extend(s.id for s in sols)
        return [None] * len(sols)

    with pytest.raises(InputError, match=r"line 2, field 'problem': problem has 200,001 characters, over the limit"):
        _load(InputSpec(paths=(p,), prompt_check=check))
    kept = _load(InputSpec(paths=(p,), prompt_check=check), skip_bad=True)
    assert len(kept) == 1 and kept[0].id != "big" and "big" not in seen


def test_the_line_limit_follows_the_row_limits():
    spec = InputSpec(paths=("x",))
    assert spec.max_line_bytes() < MAX_LINE_BYTES
    assert InputSpec(paths=("x",), max_steps=10, max_step_chars=100).max_line_bytes() < spec.max_line_bytes()


def test_a_line_longer_than_any_valid_row_is_refused_as_it_streams(tmp_path):
    good, _ = _rows()
    p = _write(tmp_path / "in.jsonl", [good, dict(good, steps=["s" * 1000] * 300, id="long"), good])
    spec = InputSpec(paths=(p,), max_steps=20, max_step_chars=1000, max_problem_chars=1000)
    assert spec.max_line_bytes() < 300_000
    with pytest.raises(InputError, match=r"line 2: line is \d+ bytes, over the \d+-byte limit for one row"):
        _load(spec)


PEAK = """
import json, resource, sys
sys.path.insert(0, {root!r})
from pipeline.config import LabelConfig
from pipeline.input import IngestStats, iter_keyed_solutions
from pipeline.run.plan import input_spec
cfg = LabelConfig(input=[{inp!r}], output={out!r}, skip_bad=True).resolved()
try:
    list(iter_keyed_solutions(input_spec(cfg), False, None, IngestStats()))
    said = "nothing refused"
except Exception as e:
    said = str(e)
print(json.dumps({{"error": said, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""


def test_a_ten_megabyte_problem_is_refused_without_gigabytes_of_memory(tmp_path):
    """The real prompt check (the bundled model's tokenizer) behind the real reader, in a process of its own: its
    peak memory is that of a run of two ordinary rows, not 2 GB."""
    good, other = _rows()
    p = _write(tmp_path / "in.jsonl", [good, dict(other, problem="What is 1+1? " * 800_000, id="big")])
    r = subprocess.run([sys.executable, "-c", PEAK.format(root=ROOT, inp=p, out=str(tmp_path / "out"))],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert "problem has 10,400,000 characters, over the limit" in got["error"], got
    assert got["peak_kb"] / 1024 < 1200, f"peak {got['peak_kb'] / 1024:.0f} MB"  # (2,200 MB before the limit)
