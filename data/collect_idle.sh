#!/usr/bin/env bash
# Re-measures the bundled pool on an idle machine into data/idle (see data/README.md, "Idle
# re-measurement"): network by network, each on the three CPU profiles, with the profiles'
# 3 repeats (latency = fastest repeat). Measures into data/.collect-idle (plain TVM
# JSONDatabases, not committed) and packs into data/idle after each step that measured
# something. Safe to rerun or interrupt: tcl collect resumes. Refuses to start on a busy machine.
set -euo pipefail
cd "$(dirname "$0")/.."
TCL=.venv/bin/tcl
WORK=data/.collect-idle
NETWORKS=${NETWORKS:-bert-tiny gpt-block mlp-mixer vit-tiny resnet-18}
cores=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c / 2) }'; then
  echo "collect_idle.sh: load average $load on $cores cores; stop other work first (timings would be noisy)" >&2
  exit 2
fi
if [ ! -d "$WORK" ] && [ -d data/idle ]; then  # a fresh clone: continue from what data/idle holds
  mkdir -p "$WORK"
  for p in data/idle/x86-*; do "$TCL" dataset unpack "$p" --out "$WORK/$(basename "$p")"; done
fi
[ -d "$WORK/pool" ] || "$TCL" dataset unpack plugins/networks/pool --out "$WORK/pool"
pack() {  # the measured profiles only: the pool stays in plugins/networks/pool
  rm -rf data/idle.new data/idle.old && mkdir data/idle.new
  for p in "$WORK"/x86-*; do "$TCL" dataset pack "$p" --out "data/idle.new/$(basename "$p")"; done
  if [ -d data/idle ]; then mv data/idle data/idle.old; fi
  mv data/idle.new data/idle && rm -rf data/idle.old
}
for network in $NETWORKS; do
  for profile in x86-avx2 x86-avx512 x86-generic; do
    before=$( (cat "$WORK/$profile/database_tuning_record.json" 2>/dev/null || true) | wc -l)
    # --max-tasks 8: each network's 8 tasks with the most work, the ones data/bundled holds
    # (collect_bundled.sh's 40 tasks, round-robin over five networks)
    "$TCL" collect --profile "$profile" --network "$network" --pool-size 200 --max-tasks 8 \
      --pool "$WORK/pool" --out "$WORK/$profile"
    after=$(cat "$WORK/$profile/database_tuning_record.json" | wc -l)
    [ "$before" = "$after" ] || pack
  done
done
