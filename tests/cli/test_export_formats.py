"""`mcprm export --format`: its help lists every format export_corpus accepts, from the one list of formats
(pipeline.export.common.ALL_FORMATS), genprm included; an unknown format is named with the same list."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from pipeline.export import export_corpus
from pipeline.export.common import ALL_FORMATS, ExportError


def _format_option():
    from cli.main import app

    (p,) = [p for p in typer.main.get_command(app).commands["export"].params if p.name == "fmt"]
    return p


def test_help_lists_every_format():
    assert "genprm" in ALL_FORMATS and len(set(ALL_FORMATS)) == len(ALL_FORMATS)
    p = _format_option()
    assert p.help.split(" | ") == list(ALL_FORMATS)
    from cli.main import app

    r = CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "250"}, terminal_width=250)
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if "--format" in x)
    assert " | ".join(ALL_FORMATS) in line, line


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_listed_format_is_accepted(fmt, tmp_path):
    """Each listed format gets past the format check (to the missing corpus); an unknown one does not."""
    with pytest.raises(Exception) as e:
        export_corpus(str(tmp_path / "no-corpus"), fmt, str(tmp_path / "x"))
    assert "--format must be one of" not in str(e.value), str(e.value)


def test_unknown_format_names_every_format(tmp_path):
    with pytest.raises(ExportError) as e:
        export_corpus(str(tmp_path / "no-corpus"), "prm800k", str(tmp_path / "x"))
    assert f"--format must be one of {', '.join(ALL_FORMATS)}, got 'prm800k'" in str(e.value)
