"""Fixtures shared by the unit tests under tests/pipeline/."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs for one test module, its files in a folder of its own (Ray's default, /tmp/ray, would
    keep a session folder per run), shut down and removed after the module."""
    ray = pytest.importorskip("ray")
    from pipeline.execution import ray_temp

    folder = ray_temp.new()
    ray.init(address="local", num_cpus=2, include_dashboard=False, ignore_reinit_error=True, logging_level="ERROR",
             log_to_driver=False, _temp_dir=folder)
    try:
        yield ray
    finally:
        ray.shutdown()
        ray_temp.remove(folder)
