#!/usr/bin/env bash
# Collects the bundled dataset (see data/README.md): one shared pool, measured on the three CPU
# profiles, eight tasks at a time on each profile so that a partial run still has every task it
# holds on all three profiles. Safe to rerun: tcl collect resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
NETWORKS=bert-tiny,gpt-block,mlp-mixer,vit-tiny,resnet-18
POOL_SIZE=200
for n in 8 16 24 32 40 48 56 64; do
  for profile in x86-avx2 x86-avx512 x86-generic; do
    .venv/bin/tcl collect --profile "$profile" --network "$NETWORKS" --pool-size "$POOL_SIZE" \
      --pool data/bundled/pool --out "data/bundled/$profile" --max-tasks "$n"
  done
done
