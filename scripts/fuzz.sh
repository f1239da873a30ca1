#!/usr/bin/env bash
# Long libFuzzer campaigns over the parsers of outside input
# (tests/controller/fuzz.cmake lists the targets; docs/controller.md, "Fuzzing").
#
#   scripts/fuzz.sh [TARGET] [SECONDS] [EXECUTIONS]
#                     # default: every target, 300 s each; with EXECUTIONS, a
#                     # target also stops once it has run that many inputs
#   scripts/fuzz.sh fuzz_carbon_csv 7200 10000000   # a 10 M campaign
#
# Each target is built with clang++ -fsanitize=fuzzer,address,undefined (as the
# CTest entries build it), seeded from tests/controller/fuzz_corpus/ and run on
# one core for SECONDS, in processes of at most FUZZ_CHUNK inputs each
# (a fresh process goes on from the grown corpus: one libFuzzer process
# slows down several-fold as it runs, e.g. fuzz_worker_config ran ~840/s
# after 1 M inputs and ~3,000/s fresh on the same corpus). A crash is saved under $FUZZ_DIR/artifacts/ and the
# run goes on (libFuzzer is restarted for the time left; at most 5 restarts)
# so one bug does not end the campaign. Prints executions and crashes per
# target; exits 1 when any target crashed.
#
# Environment: BUILD (default build: the CMake build whose static libraries
# some targets link), FUZZ_DIR (default $BUILD/fuzz-campaign: binaries, the
# growing corpora, artifacts, logs), CLANGXX (default clang++), FUZZ_ARGS
# (extra libFuzzer flags), FUZZ_CHUNK (inputs per libFuzzer process,
# default 200000).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ALL=(fuzz_parsers fuzz_worker_config fuzz_checkpoint_manifest fuzz_carbon_csv fuzz_provider_json
     fuzz_controller_config fuzz_kubeconfig fuzz_k8s_answers fuzz_auth_tokens fuzz_token_file
     fuzz_http_request)
TARGETS=("${ALL[@]}")
SECONDS_EACH=300
if [[ $# -ge 1 && $1 != all ]]; then
  if [[ ! " ${ALL[*]} " == *" $1 "* ]]; then
    echo "fuzz.sh: unknown target '$1' (targets: ${ALL[*]})" >&2
    exit 2
  fi
  TARGETS=("$1")
fi
[[ $# -ge 2 ]] && SECONDS_EACH=$2
EXECS_EACH=0
[[ $# -ge 3 ]] && EXECS_EACH=$3
[[ $SECONDS_EACH =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS: '$SECONDS_EACH' is not a positive integer" >&2; exit 2; }
[[ $EXECS_EACH =~ ^[0-9]+$ ]] || { echo "fuzz.sh: EXECUTIONS: '$EXECS_EACH' is not a non-negative integer" >&2; exit 2; }
CHUNK=${FUZZ_CHUNK:-200000}
[[ $CHUNK =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_CHUNK: '$CHUNK' is not a positive integer" >&2; exit 2; }
BUILD=${BUILD:-$ROOT/build}
FUZZ_DIR=${FUZZ_DIR:-$BUILD/fuzz-campaign}
CLANGXX=${CLANGXX:-$(command -v clang++ || command -v clang++-16 || command -v clang++-15 || command -v clang++-14 || true)}
[[ -n $CLANGXX ]] || { echo "fuzz.sh: clang++ not found" >&2; exit 2; }
# controller/'s rooms top down (controller/CMakeLists.txt), then what they use.
LIBS="$BUILD/controller/libcontroller_tools.a|$BUILD/controller/libcontroller_api.a|$BUILD/controller/libcontroller_scheduling.a|$BUILD/controller/libcontroller_config.a|$BUILD/controller/libcontroller_executors.a|$BUILD/controller/libcontroller_store.a|$BUILD/controller/libcontroller_core.a|$BUILD/libgreenshard_spec.a|$BUILD/carbon/libcarbon.a"
mkdir -p "$FUZZ_DIR/artifacts" "$FUZZ_DIR/logs"

total_crashes=0
summary=()
for t in "${TARGETS[@]}"; do
  # Build (and refresh the corpus from the seeds) without running.
  cmake -DCLANGXX="$CLANGXX" -DSRC="$ROOT" -DOUT="$FUZZ_DIR" -DFUZZER="$t" -DRUN=OFF "-DLIBS=$LIBS" \
        -P "$ROOT/tests/controller/fuzz.cmake" >"$FUZZ_DIR/logs/$t.build.log" 2>&1 ||
    { echo "fuzz.sh: building $t failed; see $FUZZ_DIR/logs/$t.build.log" >&2; exit 2; }
  execs=0 crashes=0 restarts=0
  end=$(( $(date +%s) + SECONDS_EACH ))
  log="$FUZZ_DIR/logs/$t.log"
  : >"$log"
  while :; do
    left=$(( end - $(date +%s) ))
    (( left > 0 )) || break
    runs=$CHUNK
    if (( EXECS_EACH > 0 )); then
      remaining=$(( EXECS_EACH - execs ))
      (( remaining > 0 )) || break
      (( remaining < runs )) && runs=$remaining
    fi
    rc=0
    "$FUZZ_DIR/$t" -max_total_time="$left" -runs="$runs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$FUZZ_DIR/artifacts/$t-" ${FUZZ_ARGS:-} "$FUZZ_DIR/$t-corpus" >>"$log.run" 2>&1 || rc=$?
    # Executions: the final stats, else (a crash) the last status line.
    n=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log.run" | tail -1 | awk '{print $2}' || true)
    [[ -n $n ]] || n=$(grep -oE '^#[0-9]+' "$log.run" | tail -1 | tr -d '#' || true)
    execs=$(( execs + ${n:-0} ))
    cat "$log.run" >>"$log"; rm -f "$log.run"
    (( rc == 0 )) && continue  # the chunk or the time ended: a fresh process, if any is left
    crashes=$(( crashes + 1 ))
    restarts=$(( restarts + 1 ))
    (( restarts <= 5 )) || break
  done
  total_crashes=$(( total_crashes + crashes ))
  took=$(( SECONDS_EACH - (end - $(date +%s)) ))
  (( took <= SECONDS_EACH )) || took=$SECONDS_EACH
  line=$(printf '%-26s %12d executions %3d crashes  (%d s; log %s)' "$t" "$execs" "$crashes" "$took" "$log")
  echo "$line"
  summary+=("$line")
done
echo "---"
printf '%s\n' "${summary[@]}"
if (( total_crashes > 0 )); then
  echo "crash inputs: $FUZZ_DIR/artifacts/ (reproduce: $FUZZ_DIR/<target> <file>)"
  exit 1
fi
