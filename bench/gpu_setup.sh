#!/bin/bash
# On the lent GPU machine: finish the vLLM/Ray install (shared/device recipe) and add mcprm's small pure-Python
# dependencies that the image lacks. Usage: source bench/gpu_setup.sh .xfer/02
set -e
bash "$1/install-stash.sh" "$1" --finish
if ls .xfer/extra/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .xfer/extra/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0
set +e
