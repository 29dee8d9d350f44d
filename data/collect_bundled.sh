#!/usr/bin/env bash
# Collects the bundled dataset (see data/README.md): one shared pool, measured on the three CPU
# profiles, eight tasks at a time on each profile so that a partial run still has every task it
# holds on all three profiles. Measures into data/.collect (plain TVM JSONDatabases, not
# committed; rebuilt from data/bundled and the pool when missing) and packs the records into
# data/bundled and the pool into plugins/networks/pool (where the networks plugin ships it)
# after each step. Safe to rerun or interrupt: tcl collect resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
TCL=.venv/bin/tcl
WORK=data/.collect
NETWORKS=bert-tiny,gpt-block,mlp-mixer,vit-tiny,resnet-18
POOL_SIZE=200
POOL=plugins/networks/pool
if [ ! -d "$WORK" ]; then
  "$TCL" dataset unpack data/bundled --out "$WORK"
  "$TCL" dataset unpack "$POOL" --out "$WORK/pool"
fi
replace() {  # NEW FINAL: put a finished packing in place of FINAL
  rm -rf "$2.old"
  if [ -d "$2" ]; then mv "$2" "$2.old"; fi
  mv "$1" "$2" && rm -rf "$2.old"
}
pack() {
  rm -rf data/bundled.new "$POOL.new" && mkdir data/bundled.new
  for p in "$WORK"/x86-*/; do "$TCL" dataset pack "$p" --out "data/bundled.new/$(basename "$p")"; done
  "$TCL" dataset pack "$WORK/pool" --out "$POOL.new"
  replace data/bundled.new data/bundled && replace "$POOL.new" "$POOL"
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
