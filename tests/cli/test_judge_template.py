"""``mcprm judge --prompt-template URL`` reads the template from any URL storage opens (here ``memory://``, in
the process CliRunner runs the command in): its text is checked before any model is loaded, and a missing file is
named with exit code 1 and no traceback."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner


def _judge(template: str):
    from cli.main import app

    return CliRunner().invoke(app, ["judge", "unused-corpus", "--backend", "openai", "--model", "m",
                                    "--base-url", "http://127.0.0.1:9/v1", "--prompt-template", template])


def test_template_read_from_a_url():
    from pipeline.storage.fs import open_url

    url = f"memory://{uuid.uuid4().hex}/judge.txt"
    with open_url(url, "w", encoding="utf-8") as f:
        f.write("Where is the first error?\n{problem}\n")  # no {tagged_response}: its text was read
    r = _judge(url)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "the judge prompt template must contain {tagged_response} exactly once" in r.output, r.output
    assert "contain {problem}" not in r.output


def test_missing_template_is_named(tmp_path):
    missing = tmp_path / "no-such-template.txt"
    r = _judge(str(missing))
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert str(missing) in r.output and "No such file" in r.output, r.output
