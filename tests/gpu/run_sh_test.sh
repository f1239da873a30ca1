#!/usr/bin/env bash
# bench/gpu/run.sh on a machine without a GPU or a CUDA LibTorch: the
# prepared check must fail cleanly, name why, write its logs to the folder
# given, and still end with the RESULT line (nan). Two cases:
#   1. no PyTorch importable            -> "environment FAILED (no torch)"
#   2. a CPU-only LibTorch (Debian's, through a stand-in `torch` module that
#      reports its CMake prefix)        -> configure fails: "needs a CUDA LibTorch"
# What the script does on a GPU is not tested here (no GPU): see docs/gpu.md.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check_common() {  # LOGDIR OUTPUT RC
  local logdir=$1 out=$2 rc=$3
  [[ $rc -eq 1 ]] || fail "exit status $rc, want 1"
  [[ -s "$logdir/run.log" ]] || fail "no $logdir/run.log"
  [[ "$(grep -v '^$' <<<"$out" | tail -1)" == "RESULT gpu mfu=nan tokens_per_s=nan peak_bf16_tflops=nan" ]] ||
    fail "last line is not the nan RESULT line: $(tail -1 <<<"$out")"
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
echo "ok"
