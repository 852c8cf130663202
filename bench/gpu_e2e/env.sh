# Sourced by the device-side drivers (device.sh, data_run.sh) from the repository root: the settings they share.
# OUT: what comes back from the device call; the E2E_* variables point the same scripts at the bundled model on a
# CPU (see device.sh's README entry).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# mcprm itself: a snapshot of the committed code (carried as .xfer/mcprm_snap with prep, kept in /tmp/mcprm),
# so uncommitted edits in the working tree never reach the run: mcprm runs with its cwd there (Ray puts the
# driver's cwd on its workers' sys.path), every path the drivers pass is absolute
SNAP=${E2E_SNAP:-/tmp/mcprm}
export PYTHONPATH=/tmp/site:$SNAP VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 TOKENIZERS_PARALLELISM=false
M=${E2E_MODEL:-/tmp/qwen}
BK=${E2E_BACKEND:-vllm}
PF=${E2E_PROMPT_FORMAT:-chat}
DEV=${E2E_DEVICE:-cuda}
TPL=${E2E_TPL:-$'Solve the following math problem step by step. Put the final answer in \\boxed{}.\n\n{problem}'}
D=$PWD/bench/gpu_e2e
mc() { (cd "$SNAP" && python3 -m cli.main "$@"); }
