#!/usr/bin/env bash
# The test command: set-up, build, every test. Runs on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${GREENSHARD_BUILD_DIR:-build}"
# Rank processes use one thread each; the tests start their own ranks.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# --repeat until-pass:2: a multi-process failure test flaked once (see the
# closing note of issue 2); a real failure fails twice.
ctest --output-on-failure --timeout 900 --repeat until-pass:2 "$@"
