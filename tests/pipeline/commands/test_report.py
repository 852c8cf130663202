"""``mcprm report``: HTML + PNG files, self-contained, rendered by a real headless chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pipeline.commands.report import build_report
from pipeline.export import export_corpus
from tests.pipeline.prm_fixtures import make_corpus


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    make_corpus(d / "out")
    ref = export_corpus(str(d / "out"), "processbench", str(d / "ref"), file_format="jsonl").files[0]
    res = build_report(str(d / "out"), str(d / "report"), reference=ref)
    return d, res


def _colors(png: Path) -> tuple[int, dict]:
    from PIL import Image

    im = Image.open(png).convert("RGB")
    counts = {c: n for n, c in im.getcolors(maxcolors=im.width * im.height)}
    return len(counts), counts


def test_html_and_pngs(report):
    d, res = report
    page = Path(res.html).read_text()
    names = sorted(Path(f).name for f in res.figures)
    assert names == ["correctness.png", "cost.png", "eval.png", "first_error.png", "label_balance.png", "mc_value.png"]
    for f in res.figures:
        assert Path(f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert _colors(Path(f))[0] > 20
    assert page.count("data:image/png;base64,") == len(res.figures)
    assert not re.search(r"(src|href)=\"(https?:)?//", page) and "http://" not in page and "https://" not in page
    # s1, s5, s6 right answer without error; s2, s3, s4 wrong answer with an error
    assert "right answer, wrong process</th><td>0 (0.0% of right answers)" in page
    assert res.metrics["f1"] == 1.0 and "eval metrics" in page


def test_cli_report(tmp_path):
    from typer.testing import CliRunner

    from cli.main import app

    make_corpus(tmp_path / "out")
    r = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "--output", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "rep" / "report.html").exists() and len(list((tmp_path / "rep").glob("*.png"))) == 5
    r = CliRunner().invoke(app, ["report", str(tmp_path / "nothing"), "--output", str(tmp_path / "rep2")])
    assert r.exit_code == 1 and "not an mcprm corpus" in r.output


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_rendered_in_headless_chromium(report, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; CI installs it with apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    _, res = report
    shot = tmp_path / "shot.png"
    profile = tempfile.mkdtemp(prefix="mcprm-chromium-")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", f"--screenshot={shot}",
           "--window-size=1200,2000", "--hide-scrollbars", Path(res.html).resolve().as_uri()]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert shot.exists(), f"chromium wrote no screenshot (rc {p.returncode}): {p.stderr[-2000:]}"
    n, counts = _colors(shot)
    assert n > 200, f"screenshot looks blank: {n} distinct colors"
    white = counts.get((255, 255, 255), 0)
    assert white < 0.97 * sum(counts.values())
    # the embedded figures were decoded and drawn: the label-balance green is on screen
    green = sum(v for (r, g, b), v in counts.items() if abs(r - 0x2E) < 12 and abs(g - 0x7D) < 12 and abs(b - 0x32) < 12)
    assert green > 500, "no figure pixels in the screenshot"
