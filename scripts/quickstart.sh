#!/usr/bin/env bash
# Quickstart (one machine, no cluster): set-up, build, prepare the King James
# Bible (public domain; Debian's bible-kjv) as byte tokens, then train a small
# GPT on 2 local ranks FULL_SHARD (Gloo over loopback) with
# examples/kjv-small.yaml. STEPS=N shortens it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
GREENSHARD_TARGETS=greenshard-worker bash scripts/build.sh
mkdir -p data/kjv runs/kjv-small
if [ ! -f data/kjv/train.bin ]; then
  bible -f "Gen1:1-Rev22:21" > data/kjv/kjv.txt
  build/worker/greenshard-worker prepare --input data/kjv/kjv.txt --out data/kjv
fi
OMP_NUM_THREADS=1 build/worker/greenshard-worker --config examples/kjv-small.yaml --nproc 2 \
  ${STEPS:+--schedule.steps "$STEPS"} "$@"
echo "summary: runs/kjv-small/summary.json"
cat runs/kjv-small/summary.json
