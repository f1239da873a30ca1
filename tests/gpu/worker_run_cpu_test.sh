#!/usr/bin/env bash
# bench/gpu/worker_run.sh, the worker part of `bench/gpu/run.sh --worker`,
# run on the CPU with a small GPT: every step the device run takes but the
# GPU (prepare, train, /metrics, SIGTERM, resume, export, sample) must pass
# and print its RESULT line with resume_ok=1 and a positive worker_mfu; a
# bad setting is refused naming it. NVML and gpu_mfu need a GPU (docs/gpu.md).
# Usage: worker_run_cpu_test.sh WORKER_BIN
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: worker_run_cpu_test.sh WORKER_BIN" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$TMP/text.txt"
export OMP_NUM_THREADS=1 WR_DEVICE=cpu WR_LAYERS=2 WR_HEADS=2 WR_EMBD=64 WR_CONTEXT=64 WR_VOCAB=256 WR_BATCH=4 \
       WR_STEPS=1000 WR_CKPT=20
out=$(bash "$ROOT/bench/gpu/worker_run.sh" --worker "$1" --work "$TMP/work" --text "$TMP/text.txt" 2>&1)
rc=$?
echo "$out" | grep -v '^{'
[ $rc -eq 0 ] || fail "worker_run.sh exited $rc"
last=$(grep -v '^$' <<<"$out" | tail -1)
[[ "$last" =~ ^RESULT\ gpu_worker\ worker_mfu=0\.[0-9]+\ worker_vs_bench_mfu=nan\ resume_ok=1\ nvml_energy_j=nan$ ]] ||
  fail "last line is not the RESULT line of a passed CPU run: $last"
[[ "$last" =~ worker_mfu=0\.0000 ]] && fail "worker_mfu is 0: $last"
grep -q '^In the beginning' "$TMP/work/sample.txt" || fail "no sample"
# A bad setting is named, exit 2, before anything runs.
out=$(WR_STEPS=50 bash "$ROOT/bench/gpu/worker_run.sh" --worker "$1" --work "$TMP/bad" --text "$TMP/text.txt" 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q 'WR_STEPS (50) must be at least 3 x WR_CKPT (20)' <<<"$out" || fail "WR_STEPS=50: exit $rc, $out"
out=$(WR_DEVICE=tpu bash "$ROOT/bench/gpu/worker_run.sh" --worker "$1" --work "$TMP/bad" --text "$TMP/text.txt" 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "WR_DEVICE: 'tpu' is not cuda or cpu" <<<"$out" || fail "WR_DEVICE=tpu: exit $rc, $out"
# A --work folder it did not make is left alone.
mkdir -p "$TMP/mine" && echo keep > "$TMP/mine/file"
out=$(bash "$ROOT/bench/gpu/worker_run.sh" --worker "$1" --work "$TMP/mine" --text "$TMP/text.txt" 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "was not made by worker_run.sh" <<<"$out" && [ -f "$TMP/mine/file" ] ||
  fail "a foreign --work folder: exit $rc, $out"
echo ok
