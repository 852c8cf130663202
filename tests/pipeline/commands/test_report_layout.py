"""The report's figures fit their canvas (issue 25: the correctness chart's title was clipped at both edges)."""

from __future__ import annotations

from collections import Counter

from pipeline.commands.report import _fig_correctness_counts


def test_correctness_title_and_legend_lie_inside_the_figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # large counts make the longest title: "... 123,456 of 246,912 (50.0%)"
    counts = Counter({(True, False): 123_456, (True, True): 123_456, (False, True): 34_567, (None, True): 5})
    fig, rate = _fig_correctness_counts(counts)
    assert rate == 0.5
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    box = fig.bbox
    ax = fig.axes[0]
    for artist in (ax.title, ax.get_legend()):
        e = artist.get_window_extent(r)
        assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, (artist, e, box)
    assert "123,456 of 246,912 (50.0%)" in ax.get_title()
