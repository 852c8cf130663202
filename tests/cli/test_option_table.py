"""docs/options.md's option table is the one `python -m cli.label` makes from the option declarations (no second copy)."""

from __future__ import annotations

import re
from pathlib import Path

OPTIONS_DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_docs_option_table_matches_the_field_docs():
    from cli.label import option_table

    m = re.search(r"<!-- options:[^\n]*-->\n(.*?)<!-- /options -->", OPTIONS_DOC.read_text(), re.S)
    assert m, "docs/options.md has no generated option table"
    assert m.group(1) == option_table(), "docs/options.md's option table is stale: regenerate it with `python -m cli.label`"


def test_every_label_option_has_its_help_from_the_config():
    import typer

    from cli.label import option_help
    from cli.main import app
    from pipeline.config import option_fields

    cmd = typer.main.get_command(app).commands["label"]
    helps = {p.name: p.help for p in cmd.params}
    for name, (f, _t) in option_fields().items():
        if f.metadata.get("cli", True):
            assert helps[name] == option_help(name), name
