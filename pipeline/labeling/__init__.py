"""Labeling: strategies (which prefixes to sample), the reach gate, the scheduler, label rules."""

# The sequential strategy registers itself with the strategy registry, and the reach gate binary-search's gated
# generator: imported with the package, so the registry is whole whichever module of it is imported first.
from pipeline.labeling import reach, sequential  # noqa: F401
