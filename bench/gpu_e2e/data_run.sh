#!/bin/bash
# The data run on the lent GPU machine, in stages that each fit a 10-minute device call (bench/gpu_e2e/README.md,
# "The data run"; `python bench/gpu_e2e/data_run.py next` prints the calls to make). Stages, several to a call
# joined by `+`:
#   part NN                 a model part (carried as .xfer/gguf/part.NN) into /tmp/model.gguf
#   setup                   after the parts: sha256, wheels (.xfer/extra), convert.py, the pinned code's snapshot
#                           and the ProcessBench file (.xfer/data_run), the corpora of results/data_run restored
#   gen [CHUNK...]          the generation chunks not done yet (all, or those named), while the call's time lasts
#   label CORPUS SIZE       label (or refresh) corpus c_CORPUS to its first SIZE training solutions; resumable
#   row NAME                train a row's PRM and measure it (PB-MATH dev, PRM-only; best-of-8 against majority
#                           vote); the PRM never leaves the machine, so both run in the same call
#   train NAME / measure NAME   the two halves of a row, in two calls on the same warm machine
#   final NAME              a row's PRM trained again and measured on the held-aside part of PB-MATH: once, last
# What lasts goes to $OUT (at most 8 files of 16 MiB, checked before anything is written, each placed
# atomically): gen-CHUNK.jsonl.gz, c_CORPUS.tgz, row-NAME.tgz, final-NAME.tgz, and the call's record call.json
# and log.txt. `python bench/gpu_e2e/data_run.py land FILES_AT` puts them into bench/gpu_e2e/results/data_run/,
# to commit: the next call on a fresh machine restores from there.
# Exit status: 0 every stage done; 3 stopped before the call's time ran out (or $OUT is full): run the same
# stages again to go on; 4 a fresh machine (make the set-up calls); anything else: the failing stage's status.
# On a CPU, the plumbing with the bundled model (tests/bench/test_data_run.py): DR_CPU=1 E2E_SNAP=$PWD
# E2E_MODEL=data/model E2E_BACKEND=hf E2E_PROMPT_FORMAT=plain E2E_DEVICE=cpu DR_PB=FILE DR_PROBLEMS=N
# DR_TOKENS=N DR_EST_SCALE=0 OUT=DIR DR_WORK=DIR DR_RESULTS=DIR.
set -euo pipefail
W=${DR_WORK:-/tmp/dr}; mkdir -p "$W"
# shellcheck source=bench/gpu_e2e/env.sh
. "$PWD/bench/gpu_e2e/env.sh"
PY=(python3 "$D/data_run.py")
R=${DR_RESULTS:-$D/results/data_run}
export DR_RESULTS=$R DR_OUT_RESERVED=2   # two of the eight files that come back: call.json and log.txt
export DR_T0=${DR_T0:-$(date +%s)}
CALL_S=${DR_CALL_S:-570}       # this call's budget from its start: the 600 s limit less what packing may need
RESERVE=${DR_RESERVE_S:-30}    # seconds kept after the last stage for packing and the call's record
SCALE=${DR_EST_SCALE:-1}       # 0 on a CPU: the estimates are an H200's
EV=$W/events.$DR_T0.jsonl; LOG=$W/log.$DR_T0.txt
ROLL=(--backend "$BK" --model "$M" --prompt-format "$PF" --prompt-template "$TPL" --max-new-tokens "${DR_TOKENS:-512}")
VLLM_OPTS=(); [ "$BK" = vllm ] && VLLM_OPTS=(--max-model-len 4096)
# PB-MATH's solutions run past the score's default 2,048 tokens (a long solution's last steps would go unscored)
SCORE_OPTS=(); [ "$BK" = vllm ] && SCORE_OPTS=(--max-length 4096)

left() { echo $((CALL_S - ($(date +%s) - DR_T0))); }
budget() {  # [MORE]: seconds a command may run, the reserve (and MORE) kept; never 0, which `timeout` reads as no limit
  local b=$(($(left) - RESERVE - ${1:-0})); [ "$b" -ge 1 ] || b=1
  # DR_CMD_TIMEOUT_S: a lower cap, for the test of a command stopped at its limit
  if [ -n "${DR_CMD_TIMEOUT_S:-}" ] && [ "$DR_CMD_TIMEOUT_S" -lt "$b" ]; then b=$DR_CMD_TIMEOUT_S; fi
  echo "$b"
}
fits() {  # STAGE ARGS...: does the stage's estimate fit the time left (less the reserve)?
  local est
  est=$("${PY[@]}" estimate "$@") || { echo "no estimate for $*"; exit 2; }
  est=$((est * SCALE))
  if [ $(($(left) - RESERVE)) -lt "$est" ]; then
    echo "$*: not started, about $est s needed, $(($(left) - RESERVE)) s left in this call"; return 1
  fi
}
snapdir() {  # label | label-CORPUS | train: the pinned code, unpacked once per machine
  if [ -n "${E2E_SNAP:-}" ]; then echo "$E2E_SNAP"; else echo "/tmp/mcprm-$("${PY[@]}" get code "$1" | cut -c1-12)"; fi
}
mcx() {  # ROLE mcprm-args...: mcprm from the pinned code (its cwd there: Ray puts it on the workers' sys.path)
  local s; s=$(snapdir "$1"); shift
  (cd "$s" && PYTHONPATH=/tmp/site:$s timeout -k 30 "$(budget)" python3 -m cli.main "$@")
}
logcmd() {  # FILE CMD...: the exact command, shell-quoted, for whoever reruns a row
  local f=$1; shift; printf '%q ' "$@" >> "$f"; echo >> "$f"
}
need_setup() {
  if [ ! -e "$W/done.setup" ]; then
    echo "a fresh machine ($W/done.setup missing): make the set-up calls first (python bench/gpu_e2e/data_run.py next)"
    exit 4
  fi
}

stage_part() { "${PY[@]}" put-part "$1"; }

stage_setup() {
  if [ -e "$W/done.setup" ]; then echo "setup: done on this machine"; return 0; fi
  if [ -z "${DR_CPU:-}" ]; then
    "${PY[@]}" check-model /tmp/model.gguf
    compgen -G ".xfer/extra/*.whl" > /dev/null || { echo ".xfer/extra/*.whl did not travel: carry .xfer/extra"; exit 4; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .xfer/extra/*.whl
    # pip --target keeps an existing bin/ (the vLLM stash's, with ray) and drops the new wheels' scripts from it, so
    # py-spy's binary (critical_path.sh's CP_PYSPY) is linked in from a target of its own
    if compgen -G ".xfer/extra/py_spy-*.whl" > /dev/null; then
      python3 -m pip install -q --no-index --no-deps --no-cache-dir --target /tmp/pyspy .xfer/extra/py_spy-*.whl
      ln -sf /tmp/pyspy/bin/py-spy /tmp/site/bin/py-spy && /tmp/site/bin/py-spy --version
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    for role in $("${PY[@]}" get roles); do
      local s; s=$(snapdir $role)
      if [ ! -d "$s" ]; then
        local f; f=.xfer/data_run/$("${PY[@]}" get snap $role)
        [ -f "$f" ] || { echo "$f did not travel: carry .xfer/data_run (python bench/gpu_e2e/data_run.py prepare)"; exit 4; }
        rm -rf "$s.tmp" && mkdir -p "$s.tmp" && tar -xzf "$f" -C "$s.tmp" && mv "$s.tmp" "$s"
      fi
    done
    # the pinned code's convert.py: the model folder's fingerprint (its name, JSON files and file sizes) is part
    # of the corpora's identity, so every machine writes the same folder at the same path (the seed's /tmp/qwen);
    # the marker (a name the fingerprint skips) is written last, so a cut conversion is done again
    # (with the model's small files of an earlier set-up, .xfer/data_run/model_meta.tgz, only the weights are
    # dequantized: convert_fast.py, byte-identical weights; else convert.py, whose small files then go back in
    # $OUT for the next set-ups)
    if [ ! -f "$M/.converted" ]; then
      rm -rf "$M"
      if [ -f .xfer/data_run/model_meta.tgz ]; then
        python3 "$D/convert_fast.py" /tmp/model.gguf .xfer/data_run/model_meta.tgz "$M" || exit 1
      else
        python3 "$(snapdir label)/bench/gpu_e2e/convert.py" /tmp/model.gguf "$M" || exit 1
        python3 "$D/convert_fast.py" --meta "$M" "$OUT/model_meta.tgz"
      fi
      touch "$M/.converted"
    fi
  fi
  local pb=${DR_PB:-.xfer/data_run/processbench_math_dev.jsonl.gz}
  [ -f "$pb" ] || { echo "$pb did not travel: carry .xfer/data_run"; exit 4; }
  cp "$pb" "$W/pb.jsonl.gz"
  for f in "$R"/c_*.tgz; do  # the corpora as committed, unless this machine has them already
    [ -e "$f" ] || continue
    local c; c=$(basename "$f" .tgz)
    if [ ! -d "$W/$c" ]; then tar -xzf "$f" -C "$W" && echo "restored $c"; fi
  done
  touch "$W/done.setup"
}

stage_gen() {
  need_setup
  local chunks=("$@")
  if [ ${#chunks[@]} -eq 0 ]; then
    local all; all=$(python3 -c "import sys; sys.path.insert(0, '$D'); import data_run as d; print(' '.join(d.CHUNKS))")
    read -r -a chunks <<< "$all"
  fi
  mkdir -p "$W/gen"
  for c in "${chunks[@]}"; do
    if [ -e "$W/gen/$c.jsonl.gz" ] || [ -e "$R/gen/$c.jsonl.gz" ]; then echo "gen $c: done before"; continue; fi
    fits gen "$c" || return 3
    local info split k; info=$("${PY[@]}" chunk "$c" "$W/gen" ${DR_PROBLEMS:+--limit "$DR_PROBLEMS"})
    read -r split k <<< "$info"
    local t0 rc=0; t0=$(date +%s)
    # generate writes its output whole at the end: a chunk cut off by the time limit leaves nothing half-written
    timeout -s INT -k 30 "$(budget)" bash -c 'cd "$0" && PYTHONPATH=/tmp/site:$0 exec python3 -m cli.main "$@"' \
      "$(snapdir label)" generate -i "$W/gen/$c.problems.jsonl" -o "$W/gen/$c.raw.jsonl" --n "$k" "${ROLL[@]}" \
      --temperature 0.7 --top-p 0.95 --seed 0 --no-progress || rc=$?
    case $rc in
      0) ;;
      124|137) echo "gen $c: stopped at the call's time limit; nothing of it kept, run gen again"; return 3 ;;
      *) echo "gen $c: FAILED (rc $rc)"; return "$rc" ;;
    esac
    local pt=$W/gen/empty.jsonl ph=$W/gen/empty.jsonl
    if [ "$split" = train ]; then pt=$W/gen/$c.problems.jsonl; else ph=$W/gen/$c.problems.jsonl; fi
    python3 "$D/split.py" "$W/gen/$c.raw.jsonl" "$pt" "$ph" "$W/gen/$c.jsonl" "$W/gen/$c.held.jsonl" "$k" "$k" \
      | tee "$W/gen/$c.split.json"
    if [ "$split" = heldout ]; then mv "$W/gen/$c.held.jsonl" "$W/gen/$c.jsonl"; fi
    "${PY[@]}" gz "$W/gen/$c.jsonl" "$W/gen/$c.jsonl.gz.part"
    "${PY[@]}" pack "$W/gen" "$OUT" "gen-$c.jsonl.gz" "$c.jsonl.gz.part"
    mv "$W/gen/$c.jsonl.gz.part" "$W/gen/$c.jsonl.gz"
    # shellcheck disable=SC2046
    "${PY[@]}" event "$EV" gen "$c" "solutions=$(wc -l < "$W/gen/$c.jsonl")" "samples_per_problem=$k" \
      "wall_s=$(($(date +%s) - t0))" "split=$(tr -d ' ' < "$W/gen/$c.split.json")"
  done
}

stage_label() {
  need_setup
  local name=$1 size=$2 dir=$W/c_$1
  if "${PY[@]}" version-of "$dir" "$size" > /dev/null 2>&1; then echo "label $name $size: done before"; return 0; fi
  "${PY[@]}" input "$W" "$size" "$W/in/train_$size.jsonl"
  # a cut run keeps its finished shards: start when a useful part fits, not only the whole
  local min=$(( ${DR_LABEL_MIN_S:-180} * SCALE ))
  if [ "$(budget 60)" -lt "$min" ] || [ $(($(left) - RESERVE - 60)) -lt 1 ]; then
    echo "label $name $size: not started, $(($(left) - RESERVE - 60)) s left in this call (at least $min s wanted)"
    return 3
  fi
  local opts; opts=$("${PY[@]}" get corpus-opts "$name")
  local t0 rc=0; t0=$(date +%s)
  # SIGINT first: the run stops between shards and releases its lock; KILL 60 s later if it has not
  # shellcheck disable=SC2086
  timeout -s INT -k 60 "$(budget 60)" bash -c 'cd "$0" && PYTHONPATH=/tmp/site:$0 exec python3 -m cli.main "$@"' \
    "$(snapdir "label-$name")" label --input "$W/in/train_$size.jsonl" --output "$dir" --no-progress "${ROLL[@]}" \
    "${VLLM_OPTS[@]}" $opts ${DR_LABEL_EXTRA:-} || rc=$?
  local partial=null
  case $rc in
    0) echo "label $name $size: finished" ;;
    124|137|130) echo "label $name $size: stopped at the call's time limit; the same stage goes on from its finished shards"
       partial="\"$size\"" ;;
    *) echo "label $name $size: FAILED (rc $rc)" ;;
  esac
  if [ -d "$dir" ]; then  # what it finished is kept either way
    if [ -f "$dir/manifest.json" ]; then mcx label stats "$dir" > "$W/stats_$name.txt" 2>&1 || echo "(stats failed)" >> "$W/stats_$name.txt"; fi
    local paths=("c_$name"); [ -f "$W/stats_$name.txt" ] && paths+=("stats_$name.txt")
    "${PY[@]}" pack "$W" "$OUT" "c_$name.tgz" "${paths[@]}"
    # shellcheck disable=SC2046
    "${PY[@]}" event "$EV" corpus "$name" $("${PY[@]}" label-record "$dir") "partial=$partial" "wall_s=$(($(date +%s) - t0))" "rc=$rc"
  fi
  case $rc in 0) return 0 ;; 124|137|130) return 3 ;; *) return "$rc" ;; esac
}

row_spec() { local s; s=$("${PY[@]}" get row "$1"); IFS=$'\t' read -r CORPUS SOLS TOPTS <<< "$s"; }

do_train() {  # NAME DIR: the row's PRM into $W/prm_NAME
  local name=$1 d=$2 v
  row_spec "$name"
  v=$("${PY[@]}" version-of "$W/c_$CORPUS" "$SOLS") || { echo "row $name: label $CORPUS $SOLS first"; return 3; }
  local t0 rc=0; t0=$(date +%s)
  local cmd=(train "$W/c_$CORPUS" --version "$v" --output "$W/prm_$name" --base-model "$M" --no-progress --overwrite)
  # shellcheck disable=SC2206
  cmd+=($TOPTS ${DR_TRAIN_EXTRA:-})
  logcmd "$d/commands.sh" mcprm "${cmd[@]}"
  timeout -k 30 "$(budget)" bash -c 'cd "$0" && PYTHONPATH=/tmp/site:$0 exec python3 -m cli.main "$@"' \
    "$(snapdir train)" "${cmd[@]}" > "$d/train.log" 2>&1 || rc=$?
  tail -n 5 "$d/train.log"
  if [ $rc -ne 0 ]; then tail -n 40 "$d/train.log"; echo "row $name: training FAILED (rc $rc)"; return "$rc"; fi
  rm -rf "$W/prm_$name/checkpoints"
  cp "$W/prm_$name/mcprm_card.json" "$d/card.json"
  local ev=row; [ "$d" = "$W/rows/$name" ] || ev=final
  # the call's record, and the row's own folder (a row measured in a later call still names its training)
  local f; for f in "$EV" "$d/train.jsonl"; do
  "${PY[@]}" event "$f" $ev "$name" "corpus=\"$CORPUS\"" "solutions=$SOLS" "version=$v" "train_s=$(($(date +%s) - t0))" \
    "train_options=\"$TOPTS\"" "code=\"$("${PY[@]}" get code train)\"" "label_code=\"$("${PY[@]}" get code "label-$CORPUS")\"" \
    "rows_trained=$(python3 -c "import json; print(json.load(open('$d/card.json')).get('data', {}).get('train_rows', 'null'))" 2>/dev/null || echo null)"
  done
}

do_measure() {  # NAME DIR PART: score PART of PB-MATH (PRM-only: no answer key) and, for dev, best-of-8
  local name=$1 d=$2 part=$3 t0; t0=$(date +%s)
  [ -d "$W/prm_$name" ] || { echo "measure $name: no PRM on this machine (it never leaves it): run row $name"; return 3; }
  local lim=${DR_PB_LIMIT:-None}
  local wp="import sys; sys.path.insert(0, 'bench'); from pathlib import Path; import bench_human_labels as h; print(h.write_part(h.read_set('$W/pb.jsonl.gz'), '$part', Path('$W/pb/$part'), $lim))"
  { echo "# the inputs: PB-MATH's $part part (the file of .xfer/data_run), and the held-out solutions of the chunks"
    echo "(cd SNAPSHOT && python3 -c $(printf '%q' "$wp"))"
    echo "python3 bench/gpu_e2e/data_run.py input $W heldout $W/in/heldout8.jsonl"; } >> "$d/commands.sh"
  if [ ! -f "$W/pb/$part/input.jsonl" ]; then (cd "$(snapdir train)" && python3 -c "$wp"); fi
  local sc=(score "$W/prm_$name" --input "$W/pb/$part/input.jsonl" --output "$W/sc_pb_$name" --batch-size 64 --device "$DEV"
            --overwrite "${SCORE_OPTS[@]}")
  logcmd "$d/commands.sh" mcprm "${sc[@]}"
  mcx train "${sc[@]}"
  local ev=(eval "$W/sc_pb_$name" --reference "$W/pb/$part/reference.jsonl" --json)
  logcmd "$d/commands.sh" mcprm "${ev[@]}"
  local out=$d/eval_pb.json; [ "$part" = aside ] && out=$d/final_eval_pb.json
  mcx train "${ev[@]}" | tee "$out"
  # step AUROC, F1 at 0.5 and with the threshold chosen on the other half of the solutions (prm_metrics.py)
  local pfx=; [ "$part" = aside ] && pfx=final_
  local pm=(python3 "$D/prm_metrics.py" "$W/sc_pb_$name" "$W/pb/$part/reference.jsonl" --dump "$d/${pfx}scores_pb.jsonl.gz")
  logcmd "$d/commands.sh" "${pm[@]}"
  (s=$(snapdir train); cd "$s" && PYTHONPATH=/tmp/site:$s timeout -k 30 "$(budget)" "${pm[@]}") > "${out%eval_pb.json}metrics_pb.json"
  if [ "$part" = dev ]; then
    [ -f "$W/in/heldout8.jsonl" ] || "${PY[@]}" input "$W" heldout "$W/in/heldout8.jsonl"
    local sb=(score "$W/prm_$name" --input "$W/in/heldout8.jsonl" --output "$W/sc_bo_$name" --batch-size 128 --device "$DEV"
              --overwrite "${SCORE_OPTS[@]}")
    logcmd "$d/commands.sh" mcprm "${sb[@]}"
    mcx train "${sb[@]}"
    # the aggregation (min, product, last, vote) is chosen on 30% of the problems, read on the other 70%
    local bo=(bestofn "$W/sc_bo_$name" --choose-on 0.3 --json)
    logcmd "$d/commands.sh" mcprm "${bo[@]}"
    mcx train "${bo[@]}" | tee "$d/bestofn.json"
    local pd=(python3 "$D/prm_metrics.py" "$W/sc_bo_$name" --dump "$d/scores_bo.jsonl.gz")
    logcmd "$d/commands.sh" "${pd[@]}"
    (s=$(snapdir train); cd "$s" && PYTHONPATH=/tmp/site:$s timeout -k 30 "$(budget)" "${pd[@]}")
  fi
  if [ "$part" = aside ]; then
    "${PY[@]}" event "$EV" final "$name" "measure_s=$(($(date +%s) - t0))" --from-row "$d" --final
  else
    "${PY[@]}" event "$EV" row "$name" "measure_s=$(($(date +%s) - t0))" --from-row "$d"
  fi
}

row_dir() {  # NAME: a fresh folder for what the row keeps, with the code that made it
  local d=$W/rows/$1; rm -rf "$d"; mkdir -p "$d"
  { echo "# row $1: mcprm at $("${PY[@]}" get code train) (labels: $("${PY[@]}" get code label)); inputs restored by"
    echo "# 'bash bench/gpu_e2e/data_run.sh setup' from bench/gpu_e2e/results/data_run (W=$W)"; } > "$d/commands.sh"
  echo "$d"
}

stage_row() {
  need_setup
  local name=$1
  if [ -e "$R/rows/$name/eval_pb.json" ] || [ -e "$W/rows/$name/done" ]; then echo "row $name: done before"; return 0; fi
  fits row "$name" || return 3
  local d; d=$(row_dir "$name")
  do_train "$name" "$d"
  do_measure "$name" "$d" dev
  touch "$d/done"
  "${PY[@]}" pack "$W" "$OUT" "row-$name.tgz" "rows/$name"
  rm -rf "$W/prm_$name"  # 2.9 GB: the disk holds a few
}

stage_train() {
  need_setup
  fits train "$1" || return 3
  local d; d=$(row_dir "$1")
  do_train "$1" "$d"
}

stage_measure() {
  need_setup
  local d=$W/rows/$1
  [ -d "$d" ] || { echo "measure $1: train $1 first on this machine"; return 3; }
  fits measure "$1" || return 3
  do_measure "$1" "$d" dev
  touch "$d/done"
  "${PY[@]}" pack "$W" "$OUT" "row-$1.tgz" "rows/$1"
  rm -rf "$W/prm_$1"
}

stage_final() {  # the held-aside part: read once per row, at the end
  need_setup
  local name=$1
  if [ -e "$R/rows/$name/final_eval_pb.json" ] || [ -e "$W/final/rows/$name/final_eval_pb.json" ]; then
    echo "final $name: the aside part was read for it already (once per row)"; return 2
  fi
  [ -e "$R/rows/$name/eval_pb.json" ] || { echo "final $name: measure row $name on the dev part first"; return 2; }
  fits row "$name" || return 3
  local d=$W/final/rows/$name; rm -rf "$d"; mkdir -p "$d"
  do_train "$name" "$d"
  do_measure "$name" "$d" aside
  # beside the row's own files, never over them: the retrained PRM's card, log and commands as final_*
  local f; for f in "$d"/*; do
    case $(basename "$f") in final_*) ;; *) mv "$f" "$d/final_$(basename "$f")" ;; esac
  done
  "${PY[@]}" pack "$W/final" "$OUT" "final-$name.tgz" "rows/$name"
  rm -rf "$W/prm_$name"
}

if [ "${1:-}" = _one ]; then  # one stage in its own process: errexit and pipefail hold inside it
  shift; s=$1; shift
  "stage_$s" "$@"
  exit 0
fi

usage() { sed -n 2,24p "$0"; exit 2; }
prev=+
for a in "$@" +; do  # every stage named is known before any runs
  if [ "$prev" = + ] && [ "$a" != + ]; then
    case $a in part|setup|gen|label|row|train|measure|final) ;; *) echo "unknown stage: $a"; usage ;; esac
  fi
  prev=$a
done
[ $# -gt 0 ] || usage
started=$(date -u +%FT%TZ)
machine=cpu; command -v nvidia-smi > /dev/null && machine=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
rc=0
finish() {
  "${PY[@]}" finish "$EV" "$LOG" "$OUT" "$DR_T0" "$started" "$rc" "$machine" || echo "the call's record failed"
}
trap finish EXIT
args=("$@" +)
cur=()
for a in "${args[@]}"; do
  if [ "$a" != + ]; then cur+=("$a"); continue; fi
  [ ${#cur[@]} -gt 0 ] || continue
  t0=$(date +%s)
  echo "== ${cur[*]}: start $(date -u +%T), $(left) s left in the call" | tee -a "$LOG"
  set +e
  bash "$0" _one "${cur[@]}" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  set -e
  "${PY[@]}" event "$EV" stage "${cur[0]}" "args=\"${cur[*]:1}\"" "rc=$rc" "wall_s=$(($(date +%s) - t0))"
  echo "== ${cur[*]}: rc $rc after $(($(date +%s) - t0)) s" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || break
  cur=()
done
exit "$rc"
