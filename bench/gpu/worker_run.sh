#!/usr/bin/env bash
# The real greenshard-worker on one device (issue 37), run by
# `bench/gpu/run.sh --worker`; also runs on the CPU with a small model
# (ctest gpu.worker_run_on_cpu), which tests every step of it but the GPU.
#
#   worker_run.sh --worker BIN --work DIR --text FILE [--gpu-mfu BIN]
#
#   1. prepare: FILE (the KJV on the device) as byte tokens;
#   2. with --gpu-mfu: gpu_mfu on the same GPT (its sdpa row, 20 steps): its
#      MFU, and the measured bf16 peak the worker's MFU is taken against;
#   3. train: a GPT of WR_LAYERS x WR_EMBD (default 12 x 768, 12 heads,
#      context 1024, vocabulary 50304: ~124M parameters, GPT-2 small's shape)
#      for WR_STEPS steps, bf16 compute (the worker's default on CUDA), SDPA,
#      a checkpoint every WR_CKPT steps, /metrics on; /metrics is read once
#      after the first checkpoint, then SIGTERM: the worker saves and exits;
#   4. resume: the same command with checkpoint.resume; it must start from the
#      step saved at SIGTERM, with the loss where it was, and finish;
#   5. export (at the end of the run) and `sample` from it.
# Ends with
#   RESULT gpu_worker worker_mfu=<x> worker_vs_bench_mfu=<x> resume_ok=<0|1> nvml_energy_j=<x>
# (run.sh adds checkpoint_device_ok). worker_mfu is the median of the
# logged MFU over the resumed run's steps after its first log line;
# worker_vs_bench_mfu is it over gpu_mfu's (nan without --gpu-mfu).
# nvml_energy_j is greenshard_gpu_energy_joules_total at the scrape (the
# GPU's NVML counter; 0 on the CPU, where the check reads
# greenshard_energy_joules_total instead).
#
# Environment: WR_DEVICE (cuda | cpu, default cuda), WR_LAYERS, WR_HEADS,
# WR_EMBD, WR_CONTEXT, WR_VOCAB, WR_BATCH (default 16), WR_STEPS (default
# 300), WR_CKPT (default 100), WR_TIMEOUT_S (each worker run, default 240).
# Exit status 0 when every check passed; every failed check is printed as
# "worker_run: FAIL: ...".
set -uo pipefail
die() { echo "worker_run: $*" >&2; exit 2; }
worker="" work="" text="" gpu_mfu=""
while [ $# -gt 0 ]; do
  case "$1" in
    --worker|--work|--text|--gpu-mfu) [ $# -ge 2 ] || die "$1 needs a value" ;;&
    --worker) worker=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --gpu-mfu) gpu_mfu=$2; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[ -x "$worker" ] || die "--worker: '$worker' is not an executable"
[ -n "$work" ] || die "--work is required"
[ -s "$text" ] || die "--text: '$text' is not a non-empty file (the KJV: scripts/gpu_deps.sh prepare carries it)"
[ -z "$gpu_mfu" ] || [ -x "$gpu_mfu" ] || die "--gpu-mfu: '$gpu_mfu' is not an executable"
command -v python3 >/dev/null || die "python3 is missing"
device=${WR_DEVICE:-cuda}
case "$device" in cuda|cpu) ;; *) die "WR_DEVICE: '$device' is not cuda or cpu" ;; esac
layers=${WR_LAYERS:-12} heads=${WR_HEADS:-12} embd=${WR_EMBD:-768} context=${WR_CONTEXT:-1024}
vocab=${WR_VOCAB:-50304} batch=${WR_BATCH:-16} steps=${WR_STEPS:-300} ckpt=${WR_CKPT:-100}
timeout_s=${WR_TIMEOUT_S:-240}
for v in layers heads embd context vocab batch steps ckpt timeout_s; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "WR_${v^^}: '${!v}' is not a positive integer"
done
((steps >= 3 * ckpt)) || die "WR_STEPS ($steps) must be at least 3 x WR_CKPT ($ckpt): SIGTERM comes after the first checkpoint"
# --work is emptied first: only a new or empty folder, or one an earlier run
# of this script made (its marker file), so a mistyped path loses nothing.
if [ -d "$work" ] && [ -n "$(ls -A "$work")" ] && [ ! -f "$work/.worker_run" ]; then
  die "--work: '$work' is a folder that holds files and was not made by worker_run.sh; name a new one"
fi
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
: > "$work/.worker_run"
failed=0
fail() { echo "worker_run: FAIL: $*"; failed=1; }
log() { echo "[worker_run $(date +%H:%M:%S)] $*"; }

# --- 1. tokens ---
log "prepare $text (byte tokens)"
"$worker" prepare --input "$text" --out "$work/data" --tokenizer byte --val-fraction 0.02 || die "prepare failed"

# --- 2. gpu_mfu on the same model ---
bench_mfu=nan
peak_flops=0
if [ -n "$gpu_mfu" ]; then
  log "gpu_mfu on the same GPT: $layers layers, $embd wide, $heads heads, context $context, batch $batch"
  "$gpu_mfu" --models sdpa --skip-collectives --steps 20 --warmup 5 --layers "$layers" --heads "$heads" \
    --embd "$embd" --seq "$context" --vocab "$vocab" --batch-sdpa "$batch" | tee "$work/gpu_mfu.log"
  bench_mfu=$(sed -n 's/^RESULT gpu mfu=\([^ ]*\).*/\1/p' "$work/gpu_mfu.log" | tail -1)
  peak=$(sed -n 's/^# measured bf16 matmul peak.*: \([0-9.]*\) TFLOP\/s.*/\1/p' "$work/gpu_mfu.log" | tail -1)
  [ -n "$peak" ] && peak_flops=$(python3 -c "print(float('$peak') * 1e12)")
  [ -n "$bench_mfu" ] || bench_mfu=nan
fi

# --- 3. train, scrape, SIGTERM ---
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
config() {  # RESUME -> the job spec
  cat <<EOF
model:      {layers: $layers, heads: $heads, embd: $embd, context: $context, vocab: $vocab, dropout: 0.0, attention: sdpa}
data:       {train: "$work/data/train-*.bin", val: "$work/data/val-*.bin"}
optimizer:  {lr: 0.0006, min_lr: 0.00006, warmup_steps: 20}
schedule:   {steps: $steps, batch_size: $batch, eval_interval: $ckpt, eval_batches: 2}
checkpoint: {dir: "$work/ckpt", interval: $ckpt, keep_last: 2, resume: $1}
metrics:    {port: $port, bind: 127.0.0.1}
log:        {format: json, every: 5}
carbon:     {region: device-run, gco2_per_kwh: 400, pue: 1.2}
device: $device
peak_flops: $peak_flops
summary_path: "$work/summary.json"
export_path: "$work/export.pt"
EOF
}
config false > "$work/job1.yaml"
config true > "$work/job2.yaml"
# The worker's JSON step lines: bench/gpu/worker_steps.py.
steps_py() { python3 "$(dirname "${BASH_SOURCE[0]}")/worker_steps.py" "$@"; }
log "train: $steps steps, checkpoint every $ckpt, device $device"
"$worker" --config "$work/job1.yaml" --job_id gpu-worker > "$work/run1.log" 2>&1 &
pid=$!
deadline=$((SECONDS + timeout_s))
scraped=0
while kill -0 $pid 2>/dev/null; do
  read -r step _ < <(steps_py last "$work/run1.log")
  if ((step >= ckpt + 5)); then
    python3 - "http://127.0.0.1:$port/metrics" > "$work/metrics.txt" <<'EOF' && scraped=1
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
EOF
    kill -TERM $pid
    break
  fi
  if ((SECONDS > deadline)); then kill -KILL $pid; fail "run 1 did not reach step $((ckpt + 5)) in ${timeout_s}s"; break; fi
  sleep 0.5
done
wait $pid
rc1=$?
read -r step1 loss1 < <(steps_py last "$work/run1.log")
read -r _ first1 < <(steps_py first "$work/run1.log")
log "run 1: exit $rc1 at logged step $step1, loss $first1 -> $loss1"
tail -3 "$work/run1.log"
state1=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["state"], s["steps"])' "$work/summary.json" 2>/dev/null)
read -r end1 saved1 <<<"${state1:-none 0}"
[ "$end1" = preempted ] || fail "run 1 after SIGTERM: summary state '$end1', not preempted (exit $rc1)"
((scraped)) || fail "no /metrics scrape"

# --- /metrics ---
metric() { python3 - "$work/metrics.txt" "$1" <<'EOF'
import sys
total = None
for line in open(sys.argv[1]):
    if line.startswith(sys.argv[2] + "{") or line.startswith(sys.argv[2] + " "):
        total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
print("nan" if total is None else total)
EOF
}
nvml_energy=$(metric greenshard_gpu_energy_joules_total)
nvml_power=$(metric greenshard_gpu_power_watts)
energy=$(metric greenshard_energy_joules_total)
mfu_metric=$(metric greenshard_training_mfu_ratio)
emissions=$(metric greenshard_operational_emissions_grams_total)
log "/metrics: gpu energy $nvml_energy J, gpu power $nvml_power W, energy $energy J, MFU $mfu_metric, operational $emissions g"
positive() { python3 -c "import sys; sys.exit(0 if float('$1') > 0 else 1)" 2>/dev/null; }
if [ "$device" = cuda ]; then
  positive "$nvml_energy" || fail "greenshard_gpu_energy_joules_total is $nvml_energy (NVML energy)"
  positive "$nvml_power" || fail "greenshard_gpu_power_watts is $nvml_power (NVML power)"
fi
positive "$energy" || fail "greenshard_energy_joules_total is $energy"
positive "$mfu_metric" || fail "greenshard_training_mfu_ratio is $mfu_metric"
positive "$emissions" || fail "greenshard_operational_emissions_grams_total is $emissions"

# --- 4. resume ---
log "resume"
timeout -k 10 "$timeout_s" "$worker" --config "$work/job2.yaml" --job_id gpu-worker > "$work/run2.log" 2>&1
rc2=$?
tail -3 "$work/run2.log"
read -r resumed_ok worker_mfu < <(steps_py resumed "$work/run2.log" "$work/summary.json" "$saved1" "$steps" \
  "$first1" "$loss1")
[ "$resumed_ok" = 1 ] || fail "the resume (exit $rc2) did not continue run 1 (above)"

# --- 5. export and sample ---
if [ -s "$work/export.pt" ]; then
  log "sample from the export"
  if "$worker" sample --export "$work/export.pt" --prompt "In the beginning" --tokens 48 --temperature 0.8 \
       > "$work/sample.txt" 2>&1; then
    cat "$work/sample.txt"
    grep -q '^In the beginning' "$work/sample.txt" && [ "$(wc -c < "$work/sample.txt")" -gt 20 ] ||
      fail "sample printed no continuation of the prompt"
  else
    cat "$work/sample.txt"; fail "sample failed"
  fi
else
  fail "no export at $work/export.pt"
fi

ratio=$(python3 -c "import math; w, b = float('$worker_mfu'), float('$bench_mfu'); print('nan' if not (b > 0) or math.isnan(w) else f'{w / b:.3f}')")
fmt() { python3 -c "import math; v = float('$1'); print('nan' if math.isnan(v) else f'{v:.$2f}')"; }
echo "RESULT gpu_worker worker_mfu=$(fmt "$worker_mfu" 4) worker_vs_bench_mfu=$ratio resume_ok=${resumed_ok:-0} nvml_energy_j=$(fmt "$nvml_energy" 1)"
exit $failed
