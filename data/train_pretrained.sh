#!/usr/bin/env bash
# Trains the shipped checkpoints (plugins/pretrained/<profile>/<model>/, see its README) on the
# bundled dataset, one per CPU profile and model, with bert-tiny held out for evaluation.
# Usage: data/train_pretrained.sh [EPOCHS [PROFILE...]]   (default 50 epochs, the three profiles;
# each run prints its held-out figures and keeps its log in runs/). The shipped checkpoints
# kept the epoch of best validation Top-1 (keep_by=top1), as written here.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-50}
shift || true
PROFILES=${*:-x86-avx2 x86-avx512 x86-generic}
OUT=plugins/pretrained
mkdir -p runs
for profile in $PROFILES; do
  for model in mlp tlp mamba; do
    rm -rf "$OUT/$profile/$model.new"
    OMP_NUM_THREADS=1 .venv/bin/tcl train --model "$model" --data "data/bundled/$profile" \
      --held-out bert-tiny --epochs "$EPOCHS" --option keep_by=top1 --out "$OUT/$profile/$model.new" \
      2>&1 | tee "runs/pretrained-$profile-$model.log" | grep -v "^\[$model\] epoch"
    rm -rf "$OUT/$profile/$model" && mv "$OUT/$profile/$model.new" "$OUT/$profile/$model"
  done
done
