"""What the report's and stats' numbers can show, said with them; the eval figure keeps Brier (lower is better)
off the F1 axis and no text over another; the mc_value title fits its figure; `mcprm --help` has no type for
--help."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.main import app
from pipeline.commands.advice import brier_advice, right_answer_wrong_process_reading, uncertainty_advice
from tests.pipeline.prm_fixtures import make_corpus


def test_right_answer_wrong_process_says_what_it_can_show_under_each_setting():
    trusted = right_answer_wrong_process_reading({"strategy": "binary-search", "trust_correct": True})
    assert trusted.startswith("0 by construction") and "--no-trust-correct" in trusted
    for strategy in ("per-step", "binary-search", "adaptive"):
        text = right_answer_wrong_process_reading({"strategy": strategy, "trust_correct": False})
        assert "completer's misses" in text and "upper bound" in text
    assert "PRM" in right_answer_wrong_process_reading({"strategy": "prm", "trust_correct": None})


def test_advice_comes_only_with_a_bad_number():
    u = {"uncertain_rate": 0.96, "threshold": 0.05}
    assert "--no-early-stop" in uncertainty_advice(u, {"strategy": "binary-search", "k": 20})
    assert "--k" in uncertainty_advice(u, {"strategy": "per-step", "k": 8})
    assert uncertainty_advice({"uncertain_rate": 0.2, "threshold": 0.05}, {"k": 8}) is None
    assert brier_advice(0.2) is None and "--model" in brier_advice(0.25) and "--model" in brier_advice(0.31)


def test_stats_and_report_say_it(tmp_path):
    make_corpus(tmp_path / "out")
    r = CliRunner().invoke(app, ["stats", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "right answer, wrong process: " in r.output
    rep = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "--output", str(tmp_path / "rep")])
    assert rep.exit_code == 0, rep.output
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "What these numbers can and cannot show" in page and "completer&#x27;s misses" in page


def _boxes(fig):
    """The renderer and every text drawn: titles, axis labels, the values written on the axes, legends, and the
    tick labels of ticks inside the axes' limits (matplotlib keeps labels of the others, undrawn)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    texts = []
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            texts += [t.label1 for t in axis.get_major_ticks() if lo <= t.get_loc() <= hi and t.label1.get_visible()]
    return r, [t for t in texts if t.get_text()]


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_eval_figure_brier_on_its_own_axis_and_no_text_overlaps():
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pipeline.commands.report import _fig_eval

    m = {"f1": 0.61, "acc_error": 0.5, "acc_correct": 1.0, "step_accuracy": 0.83, "error_precision": 0.7,
         "error_recall": 0.4, "positive_precision": 0.9, "positive_recall": 1.0, "brier": 0.26, "solutions": 300}
    fig = _fig_eval(m)
    FigureCanvasAgg(fig)
    f1_axis = next(ax for ax in fig.axes if "f1" in [t.get_text() for t in ax.get_yticklabels()])
    assert "brier" not in " ".join(t.get_text() for t in f1_axis.get_yticklabels())
    assert any("brier" in t.get_text() for ax in fig.axes if ax is not f1_axis for t in ax.get_xticklabels())
    r, texts = _boxes(fig)
    page = fig.bbox
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in texts]
    for name, b in boxes:
        assert page.x0 <= b.x0 and b.x1 <= page.x1 and page.y0 <= b.y0 and b.y1 <= page.y1, name
    clash = [(a, b) for i, (a, x) in enumerate(boxes) for b, y in boxes[i + 1:] if _overlap(x, y)]
    assert not clash, clash


def test_mc_value_title_fits_its_figure():
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pipeline.commands.report import _fig_mc_value_counts

    fig = _fig_mc_value_counts([3] * 20, 60, 123_456)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    title = fig.axes[0].title.get_window_extent(fig.canvas.get_renderer())
    assert fig.bbox.x0 <= title.x0 and title.x1 <= fig.bbox.x1


def test_group_help_has_no_type_for_help():
    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert r.exit_code == 0
    assert "<bool>" not in r.output and "BOOL" not in r.output and "--help" in r.output
    assert "label" in r.output and "bestofn" in r.output
