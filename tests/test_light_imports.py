"""graders, pipeline and the CLI import without torch, transformers, ray or vllm (CPU-only machines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_light_imports():
    code = (
        "import sys, importlib, pkgutil\n"
        "import graders, pipeline, rollouts, cli.main\n"
        "for pkg in (pipeline, graders):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "heavy = [m for m in ('torch', 'transformers', 'ray', 'vllm') if m in sys.modules]\n"
        "print(heavy)\n"
        "assert not heavy, heavy\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_help_without_arguments():
    r = subprocess.run([sys.executable, "-m", "cli.main"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    for cmd in ("label", "generate", "grade", "stats", "eval", "prune", "export", "report", "plan"):
        assert cmd in out
