#!/bin/bash
# The data run on the lent GPU machine, in stages that fit 10-minute device calls and 30-minute sessions
# (bench/gpu_e2e/README.md, "The data run"). After `bash bench/gpu_e2e/device.sh prep` (the real 1.5B model at
# /tmp/qwen, vLLM and Ray in /tmp/site, mcprm's snapshot in /tmp/mcprm):
#   bash bench/gpu_e2e/data_run.sh gen                  generate: 8 samples of 3,000 GSM8K-train problems
#   bash bench/gpu_e2e/data_run.sh label NAME "OPTS"    label the 10,000 training solutions into corpus c_NAME
#   bash bench/gpu_e2e/data_run.sh train NAME CORPUS "OPTS"   a PRM prm_NAME from c_CORPUS
#   bash bench/gpu_e2e/data_run.sh measure NAME         prm_NAME: PRM-only F1 on PB-MATH dev, best-of-8
#   bash bench/gpu_e2e/data_run.sh restore              put back what earlier sessions brought home
# label stops itself before the call's limit (DR_LABEL_S, 540 s) and packs the corpus into $OUT either way: a
# cut run resumes where it stopped when the same stage runs again (here, or on a later machine after restore).
# Everything a later session needs leaves in $OUT as one tgz per item (at most 16 MiB each); carry them back in
# .xfer/data_run/ (git-ignored). Timings: one JSON line per step in $OUT/times.jsonl.
# On a CPU, the plumbing with the bundled model: E2E_SNAP=$PWD E2E_MODEL=data/model E2E_BACKEND=hf
# E2E_PROMPT_FORMAT=plain E2E_DEVICE=cpu DR_N=6 DR_TOKENS=128 DR_PB=../shared/data/processbench_math_dev.jsonl.gz OUT=/tmp/o
set -u
W=${DR_WORK:-/tmp/dr}; mkdir -p "$W"
# shellcheck source=bench/gpu_e2e/env.sh
. "$PWD/bench/gpu_e2e/env.sh"
PB=${DR_PB:-/tmp/processbench_math_dev.jsonl.gz}
ROLL=(--backend "$BK" --model "$M" --prompt-format "$PF" --prompt-template "$TPL" --max-new-tokens "${DR_TOKENS:-512}")
VLLM_OPTS=(); [ "$BK" = vllm ] && VLLM_OPTS=(--max-model-len 4096)
# PB-MATH's solutions run past the score's default 2,048 tokens (its warning: a long solution's last steps go
# unscored, so an error there is never found); the real model's context holds them whole
SCORE_OPTS=(); [ "$BK" = vllm ] && SCORE_OPTS=(--max-length 4096)

timed() {  # step name, command...
  local s=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@"; local rc=$?
  echo "{\"step\": \"$s\", \"rc\": $rc, \"wall_s\": $(python3 -c "print(round($(date +%s.%N)-$t0,1))")}" \
    | tee -a "$OUT/times.jsonl"
  return $rc
}
pack() {  # a folder of $W into $OUT/NAME.tgz
  tar -czf "$OUT/$1.tgz" -C "$W" "$1" && ls -la "$OUT/$1.tgz"
}

case "${1:-}" in
gen)
  # DR_N: only the first N problems of each split (the plumbing on a CPU with the bundled model)
  gunzip -c $D/problems_big_train.jsonl.gz | head -n "${DR_N:-2500}" > $W/problems_train.jsonl
  gunzip -c $D/problems_big_heldout.jsonl.gz | head -n "${DR_N:-500}" > $W/problems_heldout.jsonl
  cat $W/problems_train.jsonl $W/problems_heldout.jsonl > $W/problems_all.jsonl
  timed gen mc generate -i $W/problems_all.jsonl -o $W/gen.jsonl --n 8 "${ROLL[@]}" --temperature 0.7 \
    --top-p 0.95 --seed 0 --no-progress ${DR_GEN_EXTRA:-} || exit 1
  # 4 samples of each training problem are labeled; all 8 of each held-out problem are best-of-8's
  python3 $D/split.py $W/gen.jsonl $W/problems_train.jsonl $W/problems_heldout.jsonl $W/train_sols.jsonl \
    $W/heldout8.jsonl 4 | tee "$OUT/split.json"
  mkdir -p $W/sols && mv $W/train_sols.jsonl $W/heldout8.jsonl $W/sols/ && pack sols
  ;;
label)
  name=$2; opts=${3:-}
  # shellcheck disable=SC2086
  timed "label_$name" timeout -s INT -k 60 "${DR_LABEL_S:-540}" \
    bash -c 'cd "$0" && exec python3 -m cli.main "$@"' "$SNAP" label --input $W/sols/train_sols.jsonl \
    --output $W/c_$name --no-progress "${ROLL[@]}" "${VLLM_OPTS[@]}" $opts
  rc=$?
  case $rc in
    0) echo "label $name: finished" ;;
    124|137) echo "label $name: stopped at the time limit; run the stage again to go on" ;;
    *) echo "label $name: FAILED (rc $rc)"; exit $rc ;;
  esac
  [ -f $W/c_$name/manifest.json ] && mc stats $W/c_$name > "$OUT/stats_$name.txt" 2>&1
  pack "c_$name"
  ;;
train)
  name=$2; corpus=$3; opts=${4:-}
  # shellcheck disable=SC2086
  timed "train_$name" mc train $W/c_$corpus --output $W/prm_$name --base-model "$M" --no-progress --overwrite \
    $opts > "$OUT/train_$name.log" 2>&1 || { tail -30 "$OUT/train_$name.log"; exit 1; }
  tail -5 "$OUT/train_$name.log"
  cp $W/prm_$name/mcprm_card.json "$OUT/card_$name.json"
  ;;
measure)
  name=$2
  if [ ! -f $W/pb/dev/input.jsonl ]; then  # PB-MATH's dev part (the held-aside quarter is never read here)
    (cd "$SNAP" && python3 -c "import sys; sys.path.insert(0, 'bench'); from pathlib import Path
import bench_human_labels as h; h.write_part(h.read_set('$PB'), 'dev', Path('$W/pb/dev'), None)")
  fi
  # PRM-only: no --use-answer-key; the gold answers in the inputs are never read by the score
  timed "score_pb_$name" mc score $W/prm_$name --input $W/pb/dev/input.jsonl --output $W/sc_pb_$name \
    --batch-size 64 --device "$DEV" --overwrite "${SCORE_OPTS[@]}" || exit 1
  mc eval $W/sc_pb_$name --reference $W/pb/dev/reference.jsonl --json | tee "$OUT/eval_pb_$name.json"
  timed "score_bo_$name" mc score $W/prm_$name --input $W/sols/heldout8.jsonl --output $W/sc_bo_$name \
    --batch-size 128 --device "$DEV" --overwrite "${SCORE_OPTS[@]}" || exit 1
  # the aggregation (min, product, last, vote) is chosen on 30% of the problems, read on the other 70%
  mc bestofn $W/sc_bo_$name --choose-on 0.3 --json | tee "$OUT/bestofn_$name.json"
  ;;
restore)
  for f in ${DR_FROM:-.xfer/data_run}/*.tgz; do tar -xzf "$f" -C "$W" && echo "restored $f"; done
  ls "$W"
  ;;
*)
  sed -n 2,15p "$0"; exit 2
  ;;
esac
