#!/usr/bin/env bash
# Collects the dataset in data/dataset (see data/README.md, "The dataset"): the networks of
# data/split.toml, measured with `tcl collect --idle-only` in resumable stages. Measures into
# data/.collect-dataset (plain TVM JSONDatabases, not committed) and packs into data/dataset
# after every step that measured something. Safe to interrupt and rerun: each stage resumes
# where it stopped, and the random sampler's fixed per-task order makes a resumed or later
# stage pick the same programs (so the other profiles get the programs x86-avx2 has).
# Ctrl-C stops after the current batch, packs what was measured and ends the script.
#
#   STAGES="1 2" data/collect_dataset.sh     # only some stages (default: all, in order)
#   TRAIN_TASKS=264 CHUNK=50 ...            # training tasks measured (round-robin over the
#                                           # networks, most work first), added CHUNK per step
#   TEST_CHUNK=12 ...                       # test tasks stage 6 completes per step (each step
#                                           # is packed, so an interruption loses one step at most)
#   TEST_FROM=48 ...                        # stage 6's first step (skips steps already whole)
#   OTHER_PROFILES=x86-generic ...          # stages 4 and 5 on these profiles only (default both;
#                                           # x86-avx512 needs a CPU with AVX-512)
set -euo pipefail
cd "$(dirname "$0")/.."
TCL=.venv/bin/tcl
WORK=data/.collect-dataset
OUT=data/dataset
STAGES=${STAGES:-1 2 3 4 5 6}
TRAIN_TASKS=${TRAIN_TASKS:-264}  # the training and validation networks have 494 tasks
TEST_TASKS=51                    # the test networks' tasks
CHUNK=${CHUNK:-50}
TEST_CHUNK=${TEST_CHUNK:-12}
OTHER_PROFILES=${OTHER_PROFILES:-x86-avx512 x86-generic}
POOL_SIZE=1000
part() {  # the comma-separated networks of a part of data/split.toml
  .venv/bin/python -c "import sys; from tcl.records.splits import load_split; s = load_split('data/split.toml'); print(','.join(n for p in sys.argv[1:] for n in getattr(s, p)))" "$@"
}
TEST=$(part test)
TRAIN=$(part train validation)
if [ ! -d "$WORK" ] && [ -d "$OUT" ]; then  # a fresh clone: continue from what data/dataset holds
  mkdir -p "$WORK"
  for p in "$OUT"/*/; do "$TCL" dataset unpack "$p" --out "$WORK/$(basename "$p")"; done
fi
pack() {
  rm -rf "$OUT.new" "$OUT.old" && mkdir "$OUT.new"
  for p in "$WORK"/*/; do "$TCL" dataset pack "$p" --out "$OUT.new/$(basename "$p")"; done
  if [ -d "$OUT" ]; then mv "$OUT" "$OUT.old"; fi
  mv "$OUT.new" "$OUT" && rm -rf "$OUT.old"
}
measure() {  # profile networks sampler budget [collect options...]: one resumable step
  local profile=$1 networks=$2 sampler=$3 budget=$4
  shift 4
  local before after status=0
  before=$( (cat "$WORK/$profile/database_tuning_record.json" 2>/dev/null || true) | wc -l)
  # half of each new pool from random sampling, half from evolutionary search (labelled by origin)
  "$TCL" collect --profile "$profile" --network "$networks" --pool-size "$POOL_SIZE" --pool-random 0.5 \
    --pool "$WORK/pool" --out "$WORK/$profile" --sampler "$sampler" --budget "$budget" --idle-only "$@" ||
    status=$?
  after=$( (cat "$WORK/$profile/database_tuning_record.json" 2>/dev/null || true) | wc -l)
  [ "$before" = "$after" ] || pack  # also after Ctrl-C: what was measured is kept
  [ "$status" != 130 ] || exit 130  # Ctrl-C stops the whole script, not only this step
  return "$status"
}
in_steps() {  # profile networks sampler budget tasks chunk [first]: the first tasks, chunk more per step
  local n
  for ((n = ${7:-$6}; n < $5 + $6; n += $6)); do
    measure "$1" "$2" "$3" "$4" --max-tasks "$((n < $5 ? n : $5))"
  done
}
training() { in_steps "$1" "$TRAIN" random "$2" "$TRAIN_TASKS" "$CHUNK"; }  # profile budget
for stage in $STAGES; do
  echo "== stage $stage"
  case $stage in
    1) measure x86-avx2 "$TEST" random 100 ;;     # held-out test tasks: 100 of each pool first
    2) training x86-avx2 200 ;;                    # training tasks: 200 of each pool
    3) measure x86-avx2 "$TEST" random 300 ;;     # test tasks: 300 (stage 1's 100 and 200 more)
    4) for p in $OTHER_PROFILES; do in_steps "$p" "$TEST" random 300 "$TEST_TASKS" "$TEST_CHUNK"; done ;;  # the same 300
    5) for p in $OTHER_PROFILES; do training "$p" 30; done ;;
    6) in_steps x86-avx2 "$TEST" all 1 "$TEST_TASKS" "$TEST_CHUNK" "${TEST_FROM:-$TEST_CHUNK}" ;;  # the rest of every test pool
    *) echo "collect_dataset.sh: unknown stage $stage (stages: 1-6)" >&2 && exit 2 ;;
  esac
done
