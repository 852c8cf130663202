#!/bin/bash
# Label quality against people on the data run's machine (after its `setup`: the model at /tmp/qwen, the
# ProcessBench-MATH file at /tmp/dr/pb.jsonl.gz): bench_human_labels.py on the dev part with the settings of
# device.sh's `human` stage (the same template, 512 new tokens, context 4,096) and the seed given, one call per
# group of configurations. The table, the results lines and the corpora (for paired differences without a GPU:
# human_labels_breakdown.py, replay_reach_gate.py) come back in $OUT as WORKNAME_*.
#   bash bench/gpu_e2e/human.sh /tmp/h50a 50501 per-step-k8:"--strategy per-step --k 8"
# E2E_HUMAN_PART=aside reads the held-aside quarter instead (with --final: the one look at the end).
set -u
. "$PWD/bench/gpu_e2e/env.sh"
W=$1; seed=$2; shift 2
tag=$(basename "$W")
part=${E2E_HUMAN_PART:-dev}; final=(); [ "$part" = aside ] && final=(--final)
common=$(python3 -c 'import shlex, sys; print(shlex.join(sys.argv[1:]))' --backend "$BK" --model "$M" \
  --prompt-format "$PF" --prompt-template "$TPL" --max-new-tokens 512 --max-model-len 4096 --keep-warm 0 --seed "$seed")
cfgs=(); for c in "$@"; do cfgs+=(--config "$c"); done
(cd "$SNAP" && python3 bench/bench_human_labels.py "${E2E_HUMAN_SET:-/tmp/dr/pb.jsonl.gz}" "$W" --part "$part" "${final[@]}" \
   --common "$common" "${cfgs[@]}") | tee "$OUT/${tag}_table.md"
rc=${PIPESTATUS[0]}
cp "$W/$part/results.jsonl" "$OUT/${tag}_results.jsonl" 2>/dev/null
tar czf "$OUT/${tag}_corpus.tgz" -C "$W/$part" --exclude='*.jsonl' . 2>/dev/null
exit "$rc"
