"""Slow integration tests hold on a loaded 2-core machine: a subprocess never gets more time than its test's
pytest-timeout budget has left (`test_training_quick_path` once let its command run 1,800 s under a 900 s test
budget, and pytest-timeout stopped it with no word on which command), and the slowest doc test states a budget
sized for the main job as written."""

from __future__ import annotations

import re

import pytest

from .conftest import BUDGET_MARGIN_S, ROOT, budget


@pytest.mark.timeout(120)
def test_a_subprocess_gets_what_is_left_of_the_test_budget():
    assert budget(1800) <= 120 - BUDGET_MARGIN_S
    assert budget(5) == 5
    import subprocess
    import sys

    with pytest.raises(subprocess.TimeoutExpired) as e:  # a command over budget ends naming itself
        subprocess.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=budget(1.0))
    assert "sleep" in str(e.value.cmd)


def test_doc_tests_budgets_cover_their_commands():
    """Every test that runs docs' commands states its own budget, and no command asks for more than it."""
    for name in ("test_doc_commands.py", "test_readme_tour.py"):
        src = (ROOT / "tests" / "integration" / name).read_text()
        marks = [int(x) for x in re.findall(r"@pytest\.mark\.timeout\((\d+)\)", src)]
        tests = re.findall(r"^def (test_\w+)", src, re.M)
        assert len(marks) == len(tests), (name, marks, tests)
        # every command through budget(), called as it runs (directly or from a lambda handed to a runner)
        asked = [int(x) for x in re.findall(r"timeout=(?:lambda: )?budget\((\d+)\)", src)]
        assert asked and not re.search(r"timeout=\d", src), name
        assert max(asked) <= max(marks), (name, asked, marks)
