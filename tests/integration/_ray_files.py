"""Ray's files for a test's own local cluster (``ray.cluster_utils.Cluster``): a private folder, removed after."""

from __future__ import annotations

import contextlib
import os

from pipeline.execution import ray_temp


@contextlib.contextmanager
def own_ray_files():
    """A fresh private folder for the cluster's ``temp_dir``, with ``RAY_TMPDIR`` pointing at it while it lives.

    Why the variable: ``Cluster`` writes its address to ``<system temp>/ray/ray_current_cluster`` whatever
    ``temp_dir`` says, which fails on a machine where no Ray has made ``/tmp/ray`` yet (a fresh CI machine, the
    test run alone) and otherwise leaves that file behind. Its previous value is put back after."""
    folder = ray_temp.new()
    os.makedirs(os.path.join(folder, "ray"), exist_ok=True)
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = folder
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        ray_temp.remove(folder)
