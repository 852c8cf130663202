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


# What to do when the bundled model meets problems it was not trained on, said the same way by every message
# (the bundled-model and no-success warnings, rows too long for its context); the docs' section says how to pick one
MODEL_ADVICE = ("use --model NAME, a model that can solve problems like yours (docs/inputs.md, \"Your own problems: "
                "picking a model\")")


def is_bundled_model(model: str | None) -> bool:
    """Whether ``model`` is the bundled model (empty: the default, which is it)."""
    if not model:
        return True
    try:
        return Path(model).expanduser().resolve() == MODEL_DIR.resolve()
    except OSError:
        return False


def is_bundled_task(problem: str) -> bool:
    """Whether ``problem`` is one of the bundled synthetic task's (``Compute <expression>.``), the only task the
    bundled model knows."""
    from pipeline.bundled.synthetic import parse_problem

    try:
        parse_problem(problem)
    except Exception:  # noqa: BLE001 - ValueError and the parser's own limits alike: not the bundled task
        return False
    return True
