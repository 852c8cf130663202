"""``plan``'s input pass keeps content keys compactly and still counts and samples exactly as a set would."""

from __future__ import annotations

import hashlib
import heapq
import json

import pytest

from pipeline.commands.plan import sample_solutions
from pipeline.config import LabelConfig


def _reference(rows: list[dict], pilot: int, seed: int) -> tuple[int, list[str]]:
    """The pilot sample as computed with a set of every key seen (before issue 17)."""
    from pipeline.solution import content_key

    seen, heap = set(), []
    for i, r in enumerate(rows):
        key = content_key(r["problem"], r["answer"], r["steps"])
        if key in seen:
            continue
        seen.add(key)
        h = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big")
        item = (-h, i, r["id"])
        if len(heap) < pilot:
            heapq.heappush(heap, item)
        elif -h > heap[0][0]:
            heapq.heapreplace(heap, item)
    return len(seen), [rid for _, _, rid in sorted(heap, key=lambda t: t[1])]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_sample_with_many_duplicates_matches_a_set(tmp_path, seed):
    rows = []
    for i in range(400):
        j = (i * 7919) % 90  # 90 distinct solutions, each repeated (exact duplicates: same id and content)
        rows.append({"id": f"s{j}", "problem": f"Compute {j} + 1.", "answer": str(j + 1),
                     "steps": [f"{j} + 1 = {j + 1}", f"The answer is \\boxed{{{j + 1}}}."]})
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    n, sample = sample_solutions(LabelConfig(input=[str(path)]), 8, seed)
    want_n, want_ids = _reference(rows, 8, seed)
    assert n == want_n == 90
    assert [s.id for s in sample] == want_ids
