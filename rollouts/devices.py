"""Device checks made before any work: a device name torch does not know, CUDA asked for on a
machine (or a torch build) without it, and a GPU backend on a machine with no GPU are refused with a message
that says what to do, before an output folder is touched or a model is loaded.

Light at import: torch is imported only to check a device other than ``cpu``; the GPU count comes from the
NVIDIA driver's files, so asking it never initialises CUDA.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re

CPU_HINT = "use --device cpu (the default)"


def nvidia_gpus() -> int:
    """NVIDIA GPUs this machine has (0 when none), from the driver's files: no torch, no CUDA."""
    n = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    if n:
        return n
    return sum(1 for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia\d+", p))


def device_problem(device: str) -> str | None:
    """Why the hf backend cannot run on ``device`` on this machine, or None when it can."""
    name = str(device or "").strip()
    if name.lower() == "cpu":
        return None
    try:
        import torch
    except ImportError:  # the backend's own MissingDependency says how to install torch
        return None
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        return (f"--device {name!r} is not a device name: use cpu (the default) or cuda (cuda:N for the N-th "
                f"GPU){'' if nvidia_gpus() else '; this machine has no GPU, so only cpu works here'}")
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        return f"--device {name}: the hf backend runs on cpu or cuda; {CPU_HINT}, or cuda on a machine with a GPU"
    if not torch.cuda.is_available():
        gpus = nvidia_gpus()
        if gpus == 0:
            return (f"--device {name}: this machine has no GPU (no NVIDIA device found); {CPU_HINT}, or run on "
                    "a machine with a GPU (or a Ray cluster with GPUs: --ray-address)")
        if torch.version.cuda is None:
            return (f"--device {name}: this machine has {gpus} GPU(s), but torch {torch.__version__} is a build "
                    "without CUDA. Install a CUDA build of torch (https://pytorch.org/get-started/locally/), or "
                    f"{CPU_HINT}")
        return (f"--device {name}: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none of this "
                f"machine's {gpus} GPU(s) (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, or a "
                f"driver too old for this CUDA); check nvidia-smi, or {CPU_HINT}")
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        return (f"--device {name}: this machine shows {count} GPU(s) to torch (cuda:0 to cuda:{count - 1}); "
                "pick one of those")
    return None


def gpu_engine_problem(backend: str, install: str) -> str | None:
    """Why a GPU engine backend (``vllm``, ``sglang``) cannot run on this machine, or None: no NVIDIA GPU here, or
    its package not installed (``install``: how to install it)."""
    if nvidia_gpus() == 0:
        return (f"--backend {backend} runs on NVIDIA GPUs, and this machine has none (no NVIDIA device found). "
                "Use --backend hf (the default; CPU, or --device cuda on one GPU), --backend openai with a "
                "server, or run on a GPU machine or a Ray cluster with GPUs (--ray-address)")
    if importlib.util.find_spec(backend) is None:
        return f"--backend {backend}: {backend} is not installed. Install it with: {install}"
    return None


def vllm_problem(device: str = "cpu") -> str | None:
    """Why the vllm backend cannot run on this machine (``device`` is not its choice: NVIDIA GPUs), or None."""
    return gpu_engine_problem("vllm", "pip install 'vllm==0.26.0'")
