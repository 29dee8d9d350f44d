#!/usr/bin/env bash
# Trains the shipped checkpoints (plugins/pretrained/<profile>/<model>/, see its README), one per
# CPU profile and model, 30 epochs at most, seed 0.
# - x86-avx2: on the training networks of data/dataset (data/split.toml; its validation networks
#   for early stopping and the kept epoch, by validation pairwise accuracy), so the test
#   networks stay unseen. The shipped ones learnt from data/dataset as of commit c5faabb
#   (`git checkout c5faabb -- data/dataset` to train on exactly that).
# - x86-avx512, x86-generic (data/dataset has no records of them yet): on data/bundled with
#   bert-tiny held out, keeping the epoch of best validation Top-1 (keep_by=top1) as they were.
# Usage: data/train_pretrained.sh [PROFILE...]   (default: the three profiles; each run's log is
# kept in runs/ and its held-out figures printed)
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILES=${*:-x86-avx2 x86-avx512 x86-generic}
OUT=plugins/pretrained
mkdir -p runs
for profile in $PROFILES; do
  if [ "$profile" = x86-avx2 ]; then
    data=(--data data/dataset --split data/split.toml)
  else
    data=(--data "data/bundled/$profile" --held-out bert-tiny --option keep_by=top1)
  fi
  for model in mlp tlp mamba; do
    arch=()
    [ "$model" = mamba ] && arch=(--option layers=1 --option expand=1)
    rm -rf "$OUT/$profile/$model.new"
    .venv/bin/tcl train --model "$model" --profile "$profile" "${data[@]}" "${arch[@]}" --seed 0 \
      --epochs 30 --out "$OUT/$profile/$model.new" 2>&1 |
      tee "runs/pretrained-$profile-$model.log" | grep -v "^\[$model\] epoch"
    rm -rf "$OUT/$profile/$model" && mv "$OUT/$profile/$model.new" "$OUT/$profile/$model"
  done
done
