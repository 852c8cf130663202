"""The data model, under its historical name: it lives in :mod:`pipeline.storage.rows` (the ground floor), so that
storage needs nothing from labeling."""

from pipeline.storage.rows import LabeledSolution, Solution, StepStats, content_key

__all__ = ["LabeledSolution", "Solution", "StepStats", "content_key"]
