"""Device checks before any work (issue 25): what each refusal says, on this machine."""

from __future__ import annotations

import pytest

from rollouts.devices import device_problem, nvidia_gpus
from rollouts.registry import backend_problem


def test_cpu_is_always_fine_and_a_ray_cluster_is_not_checked_here():
    assert device_problem("cpu") is None
    assert backend_problem("hf", "cpu") is None
    assert backend_problem("openai") is None
    assert backend_problem("vllm", remote=True) is None and backend_problem("hf", "cuda", remote=True) is None


@pytest.mark.parametrize("name", ["gpu", "GPU0", "cuda0", "nvidia"])
def test_a_name_torch_does_not_know(name):
    pytest.importorskip("torch")
    why = device_problem(name)
    assert why is not None and why.startswith(f"--device {name!r} is not a device name") and "cpu" in why, why


def test_cuda_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() or nvidia_gpus():
        pytest.skip("this machine has a GPU")
    for name in ("cuda", "cuda:1"):
        why = device_problem(name)
        assert why is not None and "this machine has no GPU" in why and "--device cpu" in why, why
    why = backend_problem("vllm")
    assert why is not None and "this machine has none" in why and "pip install" not in why, why


def test_the_hf_backend_refuses_a_bad_device_with_the_same_message():
    pytest.importorskip("torch")
    from pipeline.bundled import model_dir
    from rollouts.hf import HFBackend

    with pytest.raises(ValueError, match="is not a device name"):
        HFBackend(str(model_dir()), device="gpu")
