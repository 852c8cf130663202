"""Every relative link in README.md and docs/*.md points at a file or folder that exists (anchors not checked)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) outside code spans; the target up to a space, ')' or '#'
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]*)(?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\)")


def _links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # fenced code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    return [t for t in LINK.findall(text) if t and not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_docs_have_links_to_check():
    assert (ROOT / "docs").is_dir() and len(DOCS) > 1
    assert _links((ROOT / "README.md").read_text()), "README.md links into docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path):
    broken = [t for t in _links(doc.read_text()) if not (doc.parent / t).exists()]
    assert not broken, f"{doc.relative_to(ROOT)}: links to missing files: {broken}"


def test_a_broken_link_is_found(tmp_path: Path):
    doc = tmp_path / "page.md"
    doc.write_text("see [a](missing.md#x), [b](https://example.org/x.md), `[c](nope.md)`, [d](page.md)\n")
    assert [t for t in _links(doc.read_text()) if not (doc.parent / t).exists()] == ["missing.md"]
