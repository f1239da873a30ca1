#!/usr/bin/env bash
# The test command: set-up, build, every test. Runs on a fresh Debian machine.
#
# With no arguments it also runs the LibTorch-free targets (carbon/,
# controller/, the CLI and their tests) once more under ASan + UBSan, every
# report fatal (scripts/sanitize.sh; build-asan-lite/). That build runs
# beside the suite at the lowest priority, on the cycles the tests leave
# idle (many wait on sockets, deadlines and child processes), and its tests
# run after the suite. With arguments (a ctest selection) only ctest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/setup.sh
bash scripts/build.sh
BUILD=${GREENSHARD_BUILD_DIR:-build}

asan_pid=
if [ $# -eq 0 ]; then
  mkdir -p "$BUILD"
  SANITIZE_SCOPE=libtorch-free SANITIZE_RUN=0 nice -n 19 bash scripts/sanitize.sh asan \
    >"$BUILD/asan-lite-build.log" 2>&1 &
  asan_pid=$!
fi

cd "$BUILD"
# Rank processes use one thread each; the tests start their own ranks.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Every test has its kind (tests/labels.cmake: unit, multirank, e2e, build).
unkinded=$(ctest -N -LE '^(unit|multirank|e2e|build)$' | grep -E '^ *Test +#' || true)
if [ -n "$unkinded" ]; then
  echo "test.sh: tests without a kind label (tests/labels.cmake):" >&2
  echo "$unkinded" >&2
  [ -z "$asan_pid" ] || kill "$asan_pid" 2>/dev/null || true
  exit 1
fi
# No retry: a test that fails once is a failure (a flake is a bug to find).
set +e
ctest --output-on-failure --timeout 900 "$@"
rc=$?
set -e
# The 15 slowest tests of this run (CTest's record: name, runs, seconds).
echo "test.sh: the 15 slowest tests"
# awk reads to the end (no head): under pipefail an early reader's exit
# would kill the writer with SIGPIPE and end this script with 141.
if [ -f Testing/Temporary/CTestCostData.txt ]; then
  sort -k3 -g -r Testing/Temporary/CTestCostData.txt |
    awk 'NF == 3 && shown < 15 { printf "  %8.1f s  %s\n", $3, $1; ++shown }'
fi
cd "$ROOT"

if [ -n "$asan_pid" ]; then
  if ! wait "$asan_pid"; then
    echo "test.sh: the ASan + UBSan build failed; its log: $BUILD/asan-lite-build.log" >&2
    tail -30 "$BUILD/asan-lite-build.log" >&2
    exit 1
  fi
  [ "$rc" -eq 0 ] || exit "$rc"
  SANITIZE_SCOPE=libtorch-free bash scripts/sanitize.sh asan
fi
exit "$rc"
