#!/usr/bin/env bash
# bench/gpu/run.sh on a machine without a GPU or a CUDA LibTorch: the
# prepared check must fail cleanly, name why, write its logs to the folder
# given, and still end with the RESULT line (nan). Two cases:
#   1. no PyTorch importable            -> "environment FAILED (no torch)"
#   2. a CPU-only LibTorch (Debian's, through a stand-in `torch` module that
#      reports its CMake prefix)        -> configure fails: "needs a CUDA LibTorch"
#   3. --worker, no PyTorch               -> the same, and the last line is
#      the nan gpu_worker RESULT line with checkpoint_device_ok=0
#   4. --worker, the CPU-only LibTorch, an empty carried folder
#                                         -> "third_party FAILED", the
#      missing parts named, no worker build
#   5. a bad argument                     -> usage, exit 2
# What the script does on a GPU is not tested here (no GPU): see docs/gpu.md.
# The worker part of --worker runs on the CPU in gpu.worker_run_on_cpu.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

GPU_NAN="RESULT gpu mfu=nan tokens_per_s=nan peak_bf16_tflops=nan"
WORKER_NAN="RESULT gpu_worker worker_mfu=nan worker_vs_bench_mfu=nan resume_ok=0 nvml_energy_j=nan checkpoint_device_ok=0"
check_common() {  # LOGDIR OUTPUT RC [worker]
  local logdir=$1 out=$2 rc=$3 mode=${4:-}
  [[ $rc -eq 1 ]] || fail "exit status $rc, want 1"
  [[ -s "$logdir/run.log" ]] || fail "no $logdir/run.log"
  if [[ "$mode" == worker ]]; then
    [[ "$(grep -v '^$' <<<"$out" | tail -2 | head -1)" == "$GPU_NAN" ]] ||
      fail "the line before last is not the nan gpu RESULT line: $(tail -2 <<<"$out")"
    [[ "$(grep -v '^$' <<<"$out" | tail -1)" == "$WORKER_NAN" ]] ||
      fail "last line is not the nan gpu_worker RESULT line: $(tail -1 <<<"$out")"
  else
    [[ "$(grep -v '^$' <<<"$out" | tail -1)" == "$GPU_NAN" ]] ||
      fail "last line is not the nan RESULT line: $(tail -1 <<<"$out")"
  fi
  grep -q "GreenShard GPU check: summary" <<<"$out" || fail "no summary"
}

# 1. no torch
out=$(PYTHON=/nonexistent/python3 bash "$ROOT/bench/gpu/run.sh" "$TMP/logs1" 2>&1)
rc=$?
check_common "$TMP/logs1" "$out" "$rc"
grep -qE "environment +FAILED \(no torch\)" <<<"$out" || fail "case 1: summary does not say no torch: $out"

# 2. a CPU-only LibTorch
torch_cmake=""
for d in /usr/lib/x86_64-linux-gnu/cmake /usr/lib/aarch64-linux-gnu/cmake /usr/share/cmake; do
  [[ -f "$d/Torch/TorchConfig.cmake" ]] && torch_cmake=$d && break
done
if [[ -z "$torch_cmake" ]]; then
  echo "case 2 skipped: no TorchConfig.cmake of a system LibTorch"
else
  mkdir -p "$TMP/py/torch"
  cat >"$TMP/py/torch/__init__.py" <<PY
__version__ = "cpu-stand-in"
class version:
    cuda = None
class cuda:
    @staticmethod
    def is_available():
        return False
class utils:
    cmake_prefix_path = "$torch_cmake"
PY
  out=$(PYTHONPATH="$TMP/py" GREENSHARD_GPU_BUILD_DIR="$TMP/build" bash "$ROOT/bench/gpu/run.sh" "$TMP/logs2" 2>&1)
  rc=$?
  check_common "$TMP/logs2" "$out" "$rc"
  grep -qE "configure +FAILED" <<<"$out" || fail "case 2: configure did not fail: $out"
  grep -qE "needs a CUDA LibTorch|CUDAToolkit" "$TMP/logs2/configure.log" || fail "case 2: configure.log does not say why"
  grep -qE "^ +build " <<<"$out" && fail "case 2: a build step ran after a failed configure"
fi

# 3. --worker, no torch
out=$(PYTHON=/nonexistent/python3 bash "$ROOT/bench/gpu/run.sh" --worker "$TMP/logs3" 2>&1)
rc=$?
check_common "$TMP/logs3" "$out" "$rc" worker
grep -qE "environment +FAILED \(no torch\)" <<<"$out" || fail "case 3: summary does not say no torch: $out"

# 4. --worker, a CPU-only LibTorch, an empty carried folder
if [[ -n "$torch_cmake" ]]; then
  mkdir -p "$TMP/empty-third-party"
  out=$(PYTHONPATH="$TMP/py" GREENSHARD_GPU_BUILD_DIR="$TMP/build" GREENSHARD_THIRD_PARTY="$TMP/empty-third-party" \
        bash "$ROOT/bench/gpu/run.sh" --worker "$TMP/logs4" 2>&1)
  rc=$?
  check_common "$TMP/logs4" "$out" "$rc" worker
  grep -qE "third_party +FAILED" <<<"$out" || fail "case 4: the carried folder was not refused: $out"
  grep -q "missing yaml-cpp/CMakeLists.txt" "$TMP/logs4/third_party.log" || fail "case 4: third_party.log names no missing part"
  grep -qE "^ +(worker_build|worker_run) " <<<"$out" && fail "case 4: a worker step ran without the carried folder"
fi

# 5. usage
out=$(bash "$ROOT/bench/gpu/run.sh" --worker 2>&1)
rc=$?
[[ $rc -eq 2 ]] && grep -q "usage: .*run.sh \[--worker\] LOGDIR" <<<"$out" || fail "case 5: no usage (exit $rc): $out"
echo "ok"
