"""Small inconsistencies a user sees (issue 14, point 9): 1-based step positions in people-facing text (0-based
in the data), export counts that add up, the report's error count equal to stats', no per-strategy chart for one
strategy, example solutions in the report."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from pipeline.commands.report import (
    MAX_POSITIONS,
    _fig_balance_counts,
    _fig_cost_counts,
    _fig_first_error_counts,
    build_report,
)
from pipeline.corpus import corpus_stats, read_corpus
from pipeline.export import export_corpus
from tests.pipeline.prm_fixtures import ROWS, make_corpus


# the charts from plain lists (the report builds the same counts while it streams the corpus)
def _fig_balance(labels: list[list[bool | None]]):
    counts = defaultdict(Counter)
    for ls in labels:
        for i, y in enumerate(ls):
            counts[min(i, MAX_POSITIONS)][y] += 1
    return _fig_balance_counts(counts)


def _fig_first_error(first_error: list[int]):
    hist = Counter(min(f, MAX_POSITIONS) for f in first_error if f != -1)
    return _fig_first_error_counts(hist, sum(1 for f in first_error if f == -1), len(first_error))


def _fig_cost(rollouts: list[int], tokens: list[int], strategy: list[str]):
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for s, r, t in zip(strategy, rollouts, tokens, strict=True):
        by[s][0] += r
        by[s][1] += t
        by[s][2] += 1
    return _fig_cost_counts(Counter(rollouts), Counter(tokens), by)


def test_stats_table_is_one_based_and_json_zero_based(tmp_path):
    make_corpus(tmp_path / "out")
    fe = [r["first_error"] for r in read_corpus(str(tmp_path / "out")).to_pylist()]
    r = CliRunner().invoke(app, ["stats", str(tmp_path / "out"), "--json"])
    hist = json.loads(r.output)["first_error_histogram"]
    assert {int(k) for k in hist} == {f for f in fe if f != -1}  # data: 0-based first_error values
    r = CliRunner().invoke(app, ["stats", str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "first-error step (1 = first step): count" in r.output, r.output
    shown = ", ".join(f"{int(k) + 1}: {v}" for k, v in hist.items())
    assert shown in r.output, r.output


def test_processbench_export_counts_add_up(tmp_path):
    make_corpus(tmp_path / "out")
    res = export_corpus(str(tmp_path / "out"), "processbench", str(tmp_path / "pb"), file_format="jsonl")
    assert res.steps == res.positives + res.negatives + res.unlabeled
    assert res.unlabeled > 0  # steps after the first error
    assert res.rows + sum(res.skipped.values()) == res.corpus_rows == len(ROWS)
    r = CliRunner().invoke(app, ["export", str(tmp_path / "out"), "--format", "processbench", "--output",
                                 str(tmp_path / "pb2"), "--file-format", "jsonl"])
    assert r.exit_code == 0, r.output
    m = re.search(r"wrote (\d+) of (\d+) corpus rows \((\d+) steps: (\d+) positive, (\d+) negative, (\d+) unlabeled "
                  r"\(after the first error\)\)", r.output)
    assert m, r.output
    rows, corpus_rows, steps, pos, neg, unl = map(int, m.groups())
    skipped = sum(int(n) for n in re.findall(r"rows not exported \([^)]*\): (\d+)", r.output))
    assert steps == pos + neg + unl and rows + skipped == corpus_rows


def test_report_examples_positions_and_error_counts(tmp_path):
    make_corpus(tmp_path / "out")
    ref = export_corpus(str(tmp_path / "out"), "processbench", str(tmp_path / "ref"), file_format="jsonl").files[0]
    res = build_report(str(tmp_path / "out"), str(tmp_path / "rep"), reference=ref)
    page = Path(res.html).read_text()
    stats = corpus_stats(str(tmp_path / "out"))
    # the summary's count is stats' solutions_with_error; the eval table's is labelled as the reference's
    assert re.search(r"solutions with an error \(a negative step; = stats&#x27; solutions_with_error\)</th><td>"
                     + str(stats["solutions_with_error"]) + "<", page), page[:2000]
    assert "reference solutions with an error" in page and "differ by" in page
    # example solutions: each step numbered from 1, with its label and mc_value, colour-coded
    assert "Example solutions" in page and page.count('class="example"') >= 3
    assert "first negative label at step 2: the MC labels&#x27; first error" in page or \
        "first negative label at step 2: the MC labels' first error" in page  # s2: first_error == 1
    assert "color:#2e7d32" in page and "color:#c62828" in page and "color:#9e9e9e" in page
    assert "<td>1</td><td>2 * 3 = 6</td>" in page and "<td>0.50</td>" in page
    assert "step N here is index N - 1" in page


def test_per_strategy_chart_only_for_several_strategies():
    one = _fig_cost([4, 8, 12], [80, 160, 240], ["per-step"] * 3)
    titles = [a.get_title() for a in one.axes]
    assert not any("per strategy" in t for t in titles) and any("tokens per solution" in t for t in titles)
    two = _fig_cost([4, 8, 12], [80, 160, 240], ["per-step", "adaptive", "adaptive"])
    assert any("Cost per strategy" in a.get_title() for a in two.axes)


def test_chart_axes_say_positions_are_one_based(tmp_path):
    fb = _fig_balance([[True, False, None]])
    assert "1 = first step" in fb.axes[0].get_xlabel()
    assert [t.get_text() for t in fb.axes[0].get_xticklabels()] == ["1", "2", "3"]
    ff = _fig_first_error([0, 2, -1])
    assert "1 = first step" in ff.axes[0].get_xlabel()
    assert [t.get_text() for t in ff.axes[0].get_xticklabels()] == ["1", "3"]
    # legends sit outside the axes (never over a bar)
    leg = fb.axes[0].get_legend()
    assert leg is not None and leg.get_bbox_to_anchor().x0 >= fb.axes[0].get_window_extent().x1 - 1
