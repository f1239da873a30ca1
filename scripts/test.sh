#!/usr/bin/env bash
# The test command: set-up, build, every test. Runs on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${GREENSHARD_BUILD_DIR:-build}"
# Rank processes use one thread each; the tests start their own ranks.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# No retry: a test that fails once is a failure (a flake is a bug to find).
ctest --output-on-failure --timeout 900 "$@"
cd - >/dev/null
# The LibTorch-free targets (carbon/, controller/, the CLI and their tests)
# once more under ASan + UBSan, every report fatal (scripts/sanitize.sh;
# build-asan-lite/). Not when ctest was given a selection.
if [ $# -eq 0 ]; then
  SANITIZE_SCOPE=libtorch-free bash scripts/sanitize.sh asan
fi
