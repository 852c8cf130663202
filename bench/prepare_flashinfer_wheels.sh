#!/bin/bash
# FlashInfer's sampler for vLLM 0.26 on the lent GPU machine (no network there): the wheels that vLLM's GPU set-up
# (shared/device/prepare-vllm-wheels.sh, whose WHEELS list leaves flashinfer out) lacks for
# VLLM_USE_FLASHINFER_SAMPLER=1, as one folder that travels with a device call.
#
#   bash bench/prepare_flashinfer_wheels.sh            (CPU machine, checkout root)  -> .xfer/flashinfer/*.whl (~26 MB)
#   bash bench/prepare_flashinfer_wheels.sh install    (device, after the vLLM install; carry .xfer/flashinfer)
#
# Pins: vllm 0.26.0 requires flashinfer-python==0.6.14 (its wheel's Requires-Dist). flashinfer 0.6.14 requires
# apache-tvm-ffi (vLLM's set ships 0.1.10, inside its range), cuda-tile, nvidia-cudnn-frontend and
# nvidia-cutlass-dsl, and click, einops, ninja, numpy, nvidia-ml-py, packaging, requests, tabulate, tqdm, torch,
# which the GPU image has. nvidia-cutlass-dsl is left out: only FlashInfer's CuTe-DSL kernels (FA4, some GEMMs)
# import it, not its sampling. There is no flashinfer-cubin for 0.6.14: the sampling kernels are compiled on first
# use by FlashInfer's JIT (nvcc and ninja are in the image) into ~/.cache/flashinfer; `install` compiles them once
# and says how long that took, so that no measured engine start pays it.
set -euo pipefail
X=.xfer/flashinfer
WHEELS="flashinfer-python==0.6.14 cuda-tile==1.7.0 nvidia-cudnn-frontend==1.32.0"
SITE=${SITE:-/tmp/site}

if [ "${1:-}" = "install" ]; then
  [ -d "$X" ] || { echo "no $X here: carry it (run(carry=[\".xfer/flashinfer\"], ...))" >&2; exit 2; }
  t0=$(date +%s)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$X"/*.whl
  echo "flashinfer wheels installed into $SITE in $(( $(date +%s) - t0 )) s"
  PYTHONPATH="$SITE:${PYTHONPATH:-}" python3 - <<'PY' || echo "flashinfer's sampling did not compile or run (above): the flashinfer levers will say so"
import time
t = time.time()
import torch
import flashinfer.sampling as fs
print(f"import flashinfer.sampling: {time.time() - t:.1f} s")
t = time.time()
probs = torch.softmax(torch.randn(64, 151936, device="cuda"), -1)
out = fs.top_k_top_p_sampling_from_probs(probs, top_k=torch.full((64,), 151936, device="cuda", dtype=torch.int32),
                                         top_p=torch.full((64,), 0.95, device="cuda"))
torch.cuda.synchronize()
print(f"flashinfer top-k/top-p sampling compiled and ran in {time.time() - t:.1f} s: {tuple(out.shape)}")
PY
  exit 0
fi

ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
git check-ignore -q "$X/x" || { echo "$X is not ignored by git; aborting" >&2; exit 3; }
mkdir -p "$X"
PLAT="--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64"
PLAT="$PLAT --platform manylinux2014_x86_64 --platform any"
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --only-binary=:all: $PLAT -d "$X" $WHEELS
ls -la "$X"
echo "carry .xfer/flashinfer in the lever call: run(carry=[\".xfer/flashinfer\"], command=\"... bash bench/prepare_flashinfer_wheels.sh install && ...\")"
