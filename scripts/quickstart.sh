#!/usr/bin/env bash
# Quickstart: set-up, build, then a 2-rank FULL_SHARD training run of a small
# GPT on CPU (ranks are local processes talking Gloo over loopback), on the
# bytes of an English text that ships with every Debian system (the GPL).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
GREENSHARD_TARGETS=greenshard-worker bash scripts/build.sh
DATA=${DATA:-/usr/share/common-licenses/GPL-3}
exec build/worker/greenshard-worker --nproc 2 --strategy FULL_SHARD --data "$DATA" --steps "${STEPS:-80}" "$@"
