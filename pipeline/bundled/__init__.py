"""Paths of the bundled sample data and the bundled small model (under ``data/`` in the repository)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
MODEL_DIR = DATA_DIR / "model"
PROBLEMS_PATH = DATA_DIR / "problems.jsonl"
SAMPLE_PATH = DATA_DIR / "sample.jsonl"


def _need(p: Path, what: str) -> Path:
    if not p.exists():
        raise FileNotFoundError(
            f"the bundled {what} is missing at {p}. mcprm finds it in the data/ folder of its source checkout: "
            "install with `pip install -e .` from a clone, or pass --model/--input explicitly."
        )
    return p


def model_dir() -> Path:
    return _need(MODEL_DIR, "model")


def sample_path() -> Path:
    return _need(SAMPLE_PATH, "sample solutions")


def problems_path() -> Path:
    return _need(PROBLEMS_PATH, "problems")
