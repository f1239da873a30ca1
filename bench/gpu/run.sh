#!/usr/bin/env bash
# The prepared GPU check (issue 8): build shard/ against the machine's CUDA
# LibTorch + NCCL, run the GPU tests, then the benchmarks. Self-contained:
# downloads nothing. Target: one NVIDIA H200, < 8 minutes.
#
#   bench/gpu/run.sh LOGDIR
#   bench/gpu/run.sh --worker LOGDIR
#
# --worker (issue 37) also builds the real greenshard-worker from the
# carried third-party folder (scripts/gpu_deps.sh build; the folder travels
# with the working tree: `scripts/gpu_deps.sh prepare` here first, then carry
# third_party/), and runs, in this order: gpu_tests --only checkpoint_device;
# bench/gpu/worker_run.sh (the worker on cuda:0: the KJV as byte tokens, a
# ~124M GPT in bf16 with SDPA, a checkpoint, SIGTERM and a resume, export,
# sample, one /metrics scrape; beside it gpu_mfu on the same GPT); then
# gpu_mfu as without --worker. The full gpu_tests and the abort test are
# left to the plain run. Its last line is
#   RESULT gpu_worker worker_mfu=<x> worker_vs_bench_mfu=<x> resume_ok=<0|1>
#                     nvml_energy_j=<x> checkpoint_device_ok=<0|1>
#
# Needs: python3 with a CUDA PyTorch 2.x (its LibTorch CMake package), cmake
# >= 3.25, a C++20 compiler, nvcc (Torch's CMake enables CUDA), ninja
# (optional), NCCL (PyTorch's nvidia-nccl wheel, or the CUDA toolkit's).
# Builds bench/gpu standalone (no Gloo, GTest, yaml-cpp... needed: every
# group is NCCL) into $GREENSHARD_GPU_BUILD_DIR (default build-gpu-bench).
#
# Steps log to LOGDIR/<step>.log and to LOGDIR/run.log; a failed step is
# reported and the script goes on, so partial results still print. The
# summary ends with the line
#   RESULT gpu mfu=<x> tokens_per_s=<x> peak_bf16_tflops=<x> ...
# Exit status: 0 when every step passed, 1 otherwise.
set -euo pipefail

WORKER_MODE=0
if [[ "${1:-}" == --worker ]]; then
  WORKER_MODE=1
  shift
fi
LOGDIR=${1:-}
if [[ -z "$LOGDIR" || $# -ne 1 ]]; then
  echo "usage: $0 [--worker] LOGDIR" >&2
  exit 2
fi
mkdir -p "$LOGDIR"
LOGDIR=$(cd "$LOGDIR" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GREENSHARD_GPU_BUILD_DIR:-$ROOT/build-gpu-bench}
BUDGET_S=${GREENSHARD_GPU_BUDGET_S:-460}   # stop starting new work after this
START=$SECONDS
exec > >(tee -a "$LOGDIR/run.log") 2>&1

declare -A STATUS=()
ORDER=()
log() { echo "[$(date +%H:%M:%S) +$((SECONDS - START))s] $*"; }
left() { echo $((BUDGET_S - (SECONDS - START))); }

# run_step NAME MAX_SECONDS CMD...: runs CMD with a timeout (bounded by the
# budget left), output to LOGDIR/NAME.log and the console; never exits.
run_step() {
  local name=$1 max=$2
  shift 2
  local t
  t=$(left)
  ((t > max)) && t=$max
  ORDER+=("$name")
  if ((t < 10)); then
    log "SKIP $name: time budget used up"
    STATUS[$name]="skipped (time)"
    return 0
  fi
  log "START $name (timeout ${t}s): $*"
  local rc=0
  timeout --signal=TERM --kill-after=10 "$t" "$@" > >(tee "$LOGDIR/$name.log") 2>&1 || rc=$?
  sleep 0.2  # let tee flush
  if ((rc == 0)); then
    STATUS[$name]="ok"
  elif ((rc == 124 || rc == 137)); then
    STATUS[$name]="TIMEOUT after ${t}s"
  else
    STATUS[$name]="FAILED (exit $rc)"
  fi
  log "END $name: ${STATUS[$name]}"
  return 0
}

summary() {
  local rc=$?
  set +e
  echo
  echo "================ GreenShard GPU check: summary ================"
  for name in "${ORDER[@]}"; do
    printf '  %-22s %s\n' "$name" "${STATUS[$name]:-not run}"
  done
  echo
  for f in gpu_tests gpu_tests_ckpt_device gpu_tests_abort; do
    [[ -f "$LOGDIR/$f.log" ]] && grep -hE '^\[ (PASS|FAIL|SKIP) \]' "$LOGDIR/$f.log" | sed 's/^/  /'
  done
  if [[ -f "$LOGDIR/mfu.log" ]]; then
    echo
    grep -hE '^(#|FAILED| +[0-9]| +(sdpa|explicit) )' "$LOGDIR/mfu.log" | sed 's/^/  /'
  fi
  echo "  logs: $LOGDIR  (wall time $((SECONDS - START)) s)"
  local result=""
  [[ -f "$LOGDIR/mfu.log" ]] && result=$(grep -h '^RESULT gpu ' "$LOGDIR/mfu.log" | tail -1)
  [[ -z "$result" ]] && result="RESULT gpu mfu=nan tokens_per_s=nan peak_bf16_tflops=nan"
  local failed=0
  for name in "${ORDER[@]}"; do [[ "${STATUS[$name]:-}" == ok ]] || failed=1; done
  echo "$result"
  if ((WORKER_MODE)); then
    local wresult="" ckpt_ok=0
    [[ -f "$LOGDIR/worker_run.log" ]] && wresult=$(grep -h '^RESULT gpu_worker ' "$LOGDIR/worker_run.log" | tail -1)
    [[ -z "$wresult" ]] && wresult="RESULT gpu_worker worker_mfu=nan worker_vs_bench_mfu=nan resume_ok=0 nvml_energy_j=nan"
    [[ "${STATUS[gpu_tests_ckpt_device]:-}" == ok ]] && ckpt_ok=1
    echo "$wresult checkpoint_device_ok=$ckpt_ok"
  fi
  sleep 0.3  # let the tee of run.log catch up
  ((rc == 0 && failed == 0)) && exit 0
  exit 1
}
trap summary EXIT

log "GreenShard GPU check: repo $ROOT, build $BUILD, logs $LOGDIR"
{ nvidia-smi || true; } >"$LOGDIR/nvidia-smi.txt" 2>&1
grep -E 'Driver Version|H200|H100|A100|MiB' "$LOGDIR/nvidia-smi.txt" | head -5 || true

# --- environment ------------------------------------------------------------
PY=${PYTHON:-python3}
LIBTORCH=$("$PY" -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>"$LOGDIR/python.err" || true)
TORCH_INFO=$("$PY" -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>>"$LOGDIR/python.err" || true)
log "torch: ${TORCH_INFO:-not importable} cmake prefix: ${LIBTORCH:-none}"
if [[ -z "$LIBTORCH" ]]; then
  log "no PyTorch with a CMake package: cannot build (see $LOGDIR/python.err)"
  ORDER+=(environment)
  STATUS[environment]="FAILED (no torch)"
  exit 1
fi
# NCCL: the library PyTorch loads (the nvidia-nccl wheel) first, so only one
# libnccl.so.2 ends up in the process; headers from the wheel, else the CUDA
# toolkit's (the API is stable across 2.x). NCCL_ROOT overrides both.
NCCL_ARGS=()
NCCL_LIBDIR=""
if [[ -n "${NCCL_ROOT:-}" ]]; then
  NCCL_ARGS=("-DNCCL_ROOT=$NCCL_ROOT")
  NCCL_LIBDIR=$NCCL_ROOT/lib
else
  wheel=$("$PY" -c 'import nvidia.nccl as m;print(list(m.__path__)[0])' 2>/dev/null || true)
  inc=""
  lib=""
  if [[ -n "$wheel" ]]; then
    [[ -f "$wheel/include/nccl.h" ]] && inc=$wheel/include
    for f in "$wheel"/lib/libnccl.so.2 "$wheel"/lib/libnccl.so; do [[ -f "$f" ]] && lib=$f && break; done
  fi
  if [[ -z "$inc" ]]; then
    for d in /usr/local/cuda/include /usr/include; do [[ -f "$d/nccl.h" ]] && inc=$d && break; done
  fi
  if [[ -z "$lib" ]]; then
    for f in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 \
             /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
      [[ -f "$f" ]] && lib=$f && break
    done
  fi
  [[ -n "$inc" ]] && NCCL_ARGS+=("-DNCCL_INCLUDE_DIR=$inc")
  [[ -n "$lib" ]] && NCCL_ARGS+=("-DNCCL_LIBRARY=$lib") && NCCL_LIBDIR=$(dirname "$lib")
fi
log "NCCL: ${NCCL_ARGS[*]:-not found (CMake will search)}"
NVCC=${CUDACXX:-$(command -v nvcc || true)}
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
# The toolkit should match the CUDA PyTorch was built for: our code links
# the toolkit's cudart next to the one libtorch_cuda loads.
TORCH_CUDA=$("$PY" -c 'import torch;print(torch.version.cuda or "")' 2>/dev/null || true)
nvcc_release() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p' | head -1; }
TOOLKIT_ARGS=()
if [[ -n "$NVCC" && -n "$TORCH_CUDA" ]]; then
  rel=$(nvcc_release "$NVCC")
  if [[ -n "$rel" && "${rel%%.*}" != "${TORCH_CUDA%%.*}" ]]; then
    alt=""
    for d in "/usr/local/cuda-$TORCH_CUDA" /usr/local/cuda-"${TORCH_CUDA%%.*}".*; do
      [[ -x "$d/bin/nvcc" ]] && alt=$d && break
    done
    if [[ -n "$alt" ]]; then
      log "nvcc $rel does not match torch's CUDA $TORCH_CUDA: using $alt"
      NVCC=$alt/bin/nvcc
      TOOLKIT_ARGS=("-DCUDAToolkit_ROOT=$alt")
    else
      log "WARNING: nvcc $rel does not match torch's CUDA $TORCH_CUDA and no /usr/local/cuda-$TORCH_CUDA exists;" \
          "two CUDA runtimes will be loaded"
    fi
  fi
fi
log "nvcc: ${NVCC:-not found} (torch built for CUDA ${TORCH_CUDA:-?})"
[[ -n "$NVCC" ]] && export CUDACXX=$NVCC
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
[[ -d /usr/local/nvidia/lib64 ]] && export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
[[ -n "$NCCL_LIBDIR" && -d "$NCCL_LIBDIR" ]] && export LD_LIBRARY_PATH=$NCCL_LIBDIR:${LD_LIBRARY_PATH:-}
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
JOBS=$(nproc)

# --- configure and build ----------------------------------------------------
run_step configure 150 cmake -S "$ROOT/bench/gpu" -B "$BUILD" "${GEN[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DGREENSHARD_CUDA=ON \
  "-DCMAKE_PREFIX_PATH=$LIBTORCH" "${NCCL_ARGS[@]}" "${TOOLKIT_ARGS[@]}" \
  "-DCMAKE_CUDA_ARCHITECTURES=80;90" ${NVCC:+"-DCMAKE_CUDA_COMPILER=$NVCC"}
if [[ "${STATUS[configure]}" == ok ]]; then
  run_step build 300 cmake --build "$BUILD" -j "$JOBS" --target gpu_tests gpu_mfu
fi

# --- tests and benchmarks ---------------------------------------------------
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
if ((WORKER_MODE)); then
  # The worker, from the carried folder (scripts/gpu_deps.sh), then the
  # checkpoint test, the worker's run, and gpu_mfu as below.
  WBUILD=${GREENSHARD_GPU_WORKER_BUILD_DIR:-$ROOT/build-gpu-worker}
  THIRD_PARTY=${GREENSHARD_THIRD_PARTY:-$ROOT/third_party}
  run_step third_party 10 bash "$ROOT/scripts/gpu_deps.sh" check "$THIRD_PARTY"
  if [[ "${STATUS[third_party]}" == ok ]]; then
    run_step worker_build 300 env GREENSHARD_THIRD_PARTY="$THIRD_PARTY" bash "$ROOT/scripts/gpu_deps.sh" build "$WBUILD" \
      -DGREENSHARD_CUDA=ON "-DCMAKE_PREFIX_PATH=$LIBTORCH" "${NCCL_ARGS[@]}" "${TOOLKIT_ARGS[@]}" \
      "-DCMAKE_CUDA_ARCHITECTURES=80;90" ${NVCC:+"-DCMAKE_CUDA_COMPILER=$NVCC"}
  fi
  if [[ "${STATUS[build]:-}" == ok ]]; then
    run_step gpu_tests_ckpt_device 60 "$BUILD/gpu_tests" --only checkpoint_device
  fi
  if [[ "${STATUS[worker_build]:-}" == ok ]]; then
    mfu_bin=()
    [[ "${STATUS[build]:-}" == ok ]] && mfu_bin=(--gpu-mfu "$BUILD/gpu_mfu")
    run_step worker_run 240 bash "$ROOT/bench/gpu/worker_run.sh" --worker "$WBUILD/worker/greenshard-worker" \
      --work "$LOGDIR/worker" --text "$THIRD_PARTY/data/kjv.txt" "${mfu_bin[@]}"
  fi
  if [[ "${STATUS[build]:-}" == ok ]]; then
    run_step mfu 240 "$BUILD/gpu_mfu"
  fi
elif [[ "${STATUS[build]:-}" == ok ]]; then
  run_step gpu_tests 150 "$BUILD/gpu_tests"
  run_step gpu_tests_ckpt_device 60 "$BUILD/gpu_tests" --only checkpoint_device
  # Benchmarks before the abort test: it kills a communicator on purpose.
  run_step mfu 240 "$BUILD/gpu_mfu"
  run_step gpu_tests_abort 45 "$BUILD/gpu_tests" --only timeout_abort
else
  log "build failed or skipped: no tests, no benchmarks (see $LOGDIR/configure.log, build.log)"
fi
