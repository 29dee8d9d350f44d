#!/usr/bin/env bash
# Collects the bundled dataset (see data/README.md): one shared pool, measured on the three CPU
# profiles, eight tasks at a time on each profile so that a partial run still has every task it
# holds on all three profiles. Measures into data/.collect (plain TVM JSONDatabases, not
# committed; rebuilt from data/bundled when missing) and packs the result into data/bundled after
# each step. Safe to rerun or interrupt: tcl collect resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
TCL=.venv/bin/tcl
WORK=data/.collect
NETWORKS=bert-tiny,gpt-block,mlp-mixer,vit-tiny,resnet-18
POOL_SIZE=200
[ -d "$WORK" ] || "$TCL" dataset unpack data/bundled --out "$WORK"
pack() {
  rm -rf data/bundled.new
  "$TCL" dataset pack "$WORK" --out data/bundled.new
  rm -rf data/bundled.old
  mv data/bundled data/bundled.old && mv data/bundled.new data/bundled && rm -rf data/bundled.old
}
for n in 8 16 24 32 40 48 56 64; do
  for profile in x86-avx2 x86-avx512 x86-generic; do
    before=$(cat "$WORK/$profile/database_tuning_record.json" 2>/dev/null | wc -l)
    "$TCL" collect --profile "$profile" --network "$NETWORKS" --pool-size "$POOL_SIZE" \
      --pool "$WORK/pool" --out "$WORK/$profile" --max-tasks "$n"
    after=$(cat "$WORK/$profile/database_tuning_record.json" | wc -l)
    [ "$before" = "$after" ] || pack
  done
done
