#!/usr/bin/env bash
# scripts/bench.sh NAME [flags...]: builds if needed and runs bench/NAME.
# Each benchmark ends with one line "RESULT NAME key=value ...".
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench.sh NAME [flags]   (NAME: $(ls bench/*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' '))" >&2
  exit 2
fi
name=$1; shift
if [ ! -f "bench/$name.cpp" ]; then
  echo "bench.sh: unknown benchmark '$name'" >&2
  exit 2
fi
export GREENSHARD_BUILD_DIR=${GREENSHARD_BUILD_DIR:-build-release}
export CMAKE_BUILD_TYPE=Release
bash scripts/setup.sh >/dev/null
GREENSHARD_TARGETS="bench_$name" bash scripts/build.sh -DGREENSHARD_TESTS=OFF
exec "$GREENSHARD_BUILD_DIR/bench/bench_$name" "$@"
