#!/usr/bin/env bash
# Sanitizer builds of GreenShard, and the tests run under them.
#
#   scripts/sanitize.sh asan [ctest args]   # build-asan/: ASan + UBSan, every report fatal
#   scripts/sanitize.sh tsan [ctest args]   # build-tsan/: TSan
#
# Each configures its own build folder with the project's CMake
# (-DGREENSHARD_SANITIZE=address|thread), builds it and runs ctest there.
# Reports of every process (the tests and the controllers, CLIs, workers
# and ranks they start) go to <build>/sanitizer-reports/; the script counts
# them after ctest and fails when there is any, naming the files.
#
# SANITIZE_SCOPE:
#   all            (default) the whole project; asan runs the whole suite,
#                  tsan the threaded set below
#   libtorch-free  carbon/, controller/, the CLI and their tests only
#                  (build-<mode>-lite/; the test command runs asan this way)
# SANITIZE_RUN=0 builds without running the tests.
# SANITIZE_TARGETS limits the build to some targets (pass the matching
# ctest -R), e.g.
#   SANITIZE_TARGETS=checkpoint_lifetime_test scripts/sanitize.sh tsan -R CheckpointLifetime
#
# Not run under a sanitizer (ctest -E): the libFuzzer targets (each is its
# own ASan + UBSan build already), the image build (it copies binaries
# into images that run without the sanitizer runtime), the 15 tests that
# load SentencePiece's module (RTLD_DEEPBIND, which the runtimes refuse; the
# list is below), and the 2 tests of a peak resident-set goal (the
# sanitizer's memory, not the program's).
#
# Suppressions (tests/sanitizers/*.supp) name frames of LibTorch, OpenBLAS,
# Gloo and other uninstrumented libraries only, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

mode=${1:-}
case "$mode" in
  asan) san=address ;;
  tsan) san=thread ;;
  *) echo "usage: scripts/sanitize.sh asan|tsan [ctest args]" >&2; exit 2 ;;
esac
shift
scope=${SANITIZE_SCOPE:-all}
case "$scope" in
  all) dir=build-$mode; extra=() ;;
  libtorch-free)
    dir=build-$mode-lite
    extra=(-DGREENSHARD_SKIP_DIRS="shard;worker;charts;images;gpu" -DGREENSHARD_GPU_COMPILE_CHECK=OFF) ;;
  *) echo "sanitize.sh: SANITIZE_SCOPE: 'all' or 'libtorch-free', got '$scope'" >&2; exit 2 ;;
esac
dir=${SANITIZE_BUILD_DIR:-$dir}

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S . -B "$dir" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGREENSHARD_BENCH=OFF \
        -DGREENSHARD_SANITIZE=$san "${extra[@]}"
fi
# SANITIZE_TARGETS: build only these (and what they need), e.g. one test
# executable with its binaries; ctest then gets the matching -R.
cmake --build "$dir" -j "$(nproc)" ${SANITIZE_TARGETS:+--target $SANITIZE_TARGETS}
# SANITIZE_RUN=0: build only (the test command builds beside its suite).
[ "${SANITIZE_RUN:-1}" = 0 ] && exit 0

reports=$ROOT/$dir/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
supp=$ROOT/tests/sanitizers
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:log_path=$reports/asan:suppressions=$supp/asan.supp"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:log_path=$reports/tsan:suppressions=$supp/tsan.supp"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# The tests that load SentencePiece's module (BPE tokens): it is dlopen'ed
# with RTLD_DEEPBIND, to keep its own protobuf copy apart from LibTorch's
# (worker/sentencepiece_shim.cpp), and the sanitizer runtimes refuse
# RTLD_DEEPBIND (the process exits 66 before the test's first step).
# The quickstart prepares its corpus with the BPE tokenizer too.
spm='worker\.(Bpe|BpeTrainer|LoadSentencepiece)\.|worker\.Prepare\.(BpeShards|AHandBuiltModel)|worker\.Prepare/BadInput\..*/(vocab_too_large|a_missing_model|not_a_model)|worker\.Worker\.TrainsOnBpe|worker\.Table/BadInput\..*/(a_model_vocab_smaller|validation_shards_of_another_tokenizer)|quickstart\.'
# The tests of a peak resident-set goal (VmHWM, ru_maxrss): under ASan the
# resident set is the sanitizer's (redzones around every block, 256 MB of
# freed blocks in quarantine, shadow memory), not the program's. (Heap
# counts are the sanitizer allocator's own: shard/src/host_memory.cpp.)
rss='shard\.UnitByUnitInit\.PeakMemory|worker\.Prepare\.StreamsACorpusThreeTimesTheMemoryBound'
exclude="fuzz_|images\.|$spm|$rss"
args=("$@")
if [ ${#args[@]} -eq 0 ] && [ "$mode" = tsan ]; then
  # The threaded parts: controller/ and carbon/ (HTTP pools, the store's
  # group commit, file watches, the scheduler), the OpenAPI run against a
  # real controller, the checkpoint saver and stores, the S3 client, the
  # communicators and rendezvous, and the worker's reporter and status
  # threads.
  args=(-R '^(carbon\.|controller\.|openapi\.|shard\.(S3|S3Retry|S3Config|S3Detail|S3Url|S3ServerFixture|AsyncSave|CheckpointLifetime|CheckpointRetention|Communicator|Concurrency|Failure|Subgroups|RendezvousEnv|.*Collectives)\.|worker\.(Status|Worker)\.)')
fi
set +e
(cd "$dir" && ctest --output-on-failure --timeout 1800 -E "$exclude" "${args[@]}")
rc=$?
set -e

# Every report of every process, also those a test did not look at: an
# error, a leak, a race, or the runtime refusing or aborting (a dlopen it
# does not support, a failed internal check). Other output (the runtime's
# warnings) is listed after, without failing the run.
fatal='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer|FATAL: ThreadSanitizer|incompatible with sanitizer runtime|Sanitizer CHECK failed'
found=$(grep -lE "$fatal" "$reports"/* 2>/dev/null || true)
other=$(grep -LE "$fatal" "$reports"/* 2>/dev/null || true)
if [ -n "$other" ]; then
  echo "sanitize.sh: other sanitizer output (not counted):"
  for f in $other; do echo "  $f: $(head -c 200 "$f" | tr '\n' ' ')"; done
fi
n=$(printf '%s' "$found" | grep -c . || true)
echo "sanitize.sh: $mode ($scope): $n report file(s) in $reports"
if [ "$n" -gt 0 ]; then
  printf '  %s\n' $found
  for f in $found; do
    echo "---- $f"
    head -40 "$f"
  done
  exit 1
fi
exit $rc
