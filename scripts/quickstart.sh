#!/usr/bin/env bash
# Quickstart on one machine, no cluster: set-up, build, then
#   1. the King James Bible (public domain; Debian's bible-kjv), tokenized
#      with a SentencePiece BPE model trained on it (vocabulary $VOCAB)
#   2. Prometheus (Debian) scraping the controller and the running workers
#   3. greenshard-controller: local executor, SQLite under runs/quickstart,
#      two "regions" on this machine replaying the shipped 2023 grid data
#      (Germany, home; Ontario), carbon-aware placement
#   4. the example job submitted with the greenshard CLI: a small GPT,
#      2 ranks FULL_SHARD on CPU; its progress, then a summary
#   5. a sample from the trained model (greenshard-worker sample, from the
#      job's last checkpoint).
# Everything it started stops at the end or on Ctrl-C.
#   STEPS=N     shorter run (CI uses STEPS=20)
#   VOCAB=N     BPE vocabulary (default 4096)
#   KEEP=1      keep the controller and Prometheus running until Ctrl-C
#   GREENSHARD_PREBUILT=1 skip set-up and build (the test suite runs it so)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ -z "${GREENSHARD_PREBUILT:-}" ]; then
  bash scripts/setup.sh
  GREENSHARD_TARGETS="greenshard-worker greenshard-controller greenshard" bash scripts/build.sh
fi
BIN=${GREENSHARD_BUILD_DIR:-build}
[[ $BIN = /* ]] || BIN=$ROOT/$BIN
WORKER=$BIN/worker/greenshard-worker
CONTROLLER=$BIN/controller/greenshard-controller
CLI=$BIN/controller/greenshard
STEPS=${STEPS:-300}
VOCAB=${VOCAB:-4096}
RUN=${QUICKSTART_RUN_DIR:-$ROOT/runs/quickstart}
DATA=${QUICKSTART_DATA_DIR:-$ROOT/data/kjv}
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. data
mkdir -p "$DATA" "$RUN"
# Prepared again when the vocabulary differs from the one on disk.
if ! grep -q "\"vocab\": *$VOCAB\b" "$DATA/manifest.json" 2>/dev/null || [ ! -f "$DATA/tokenizer.model" ]; then
  bible -f "Gen1:1-Rev22:21" > "$DATA/kjv.txt"
  "$WORKER" prepare --input "$DATA/kjv.txt" --out "$DATA" --tokenizer bpe --vocab "$VOCAB"
fi

# 2. controller config: a token, two regions on this machine
rm -rf "$RUN/controller" "$RUN/prometheus"
mkdir -p "$RUN/controller" "$RUN/prometheus"
TOKEN="quickstart-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
echo "$TOKEN,quickstart,user" > "$RUN/tokens"
cat > "$RUN/regions.yaml" <<YAML
regions:
  - {name: local-de, zone: DE, nodes: 1, pue: 1.2}
  - {name: local-ca-on, zone: CA-ON, nodes: 1, pue: 1.2}
YAML
# Both "regions" are this machine: the hardware profile the job's worker
# measures with (carbon.hardware below), so the plan counts the embodied
# emissions the run then measures.
cat > "$RUN/hardware.yaml" <<YAML
regions:
  local-de: cpu-2s
  local-ca-on: cpu-2s
YAML
CPORT=$(free_port)
"$CONTROLLER" --tokens "$RUN/tokens" --regions "$RUN/regions.yaml" --hardware "$RUN/hardware.yaml" \
  --data-dir "$RUN/controller" \
  --host 127.0.0.1 --port "$CPORT" --worker "$WORKER" --cycle-ms 200 > "$RUN/controller.log" 2>&1 &
PIDS+=($!)
URL=http://127.0.0.1:$CPORT
for _ in $(seq 100); do curl -sf "$URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "$URL/healthz" >/dev/null || { cat "$RUN/controller.log"; echo "quickstart: the controller did not start" >&2; exit 1; }

# 3. Prometheus: the controller, and the workers (file_sd written by the controller)
PPORT=$(free_port)
cat > "$RUN/prometheus/prometheus.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
  - job_name: greenshard-controller
    static_configs: [{targets: ['127.0.0.1:$CPORT']}]
  - job_name: greenshard-worker
    honor_labels: true
    file_sd_configs: [{files: ['$RUN/controller/prometheus/local-jobs.json'], refresh_interval: 2s}]
YAML
prometheus --config.file="$RUN/prometheus/prometheus.yml" --storage.tsdb.path="$RUN/prometheus/data" \
  --web.listen-address=127.0.0.1:$PPORT > "$RUN/prometheus.log" 2>&1 &
PIDS+=($!)

# 4. the job
cat > "$RUN/job.yaml" <<YAML
name: kjv-small
nodes: 1
procs_per_node: 2
regions: [local-de, local-ca-on]
home_region: local-de
estimate: {duration_s: 600, power_watts: 65}
worker:
  model: {layers: 4, heads: 4, embd: 128, context: 64, vocab: $VOCAB}
  data: {train: "$DATA/train-*.bin", val: "$DATA/val-*.bin", seed: 1234}
  optimizer: {lr: 0.003, min_lr: 0.0003, warmup_steps: 20}
  schedule: {steps: $STEPS, batch_size: 8, eval_interval: 50, eval_batches: 4}
  sharding: {strategy: FULL_SHARD}
  checkpoint: {interval: 100, keep_last: 2}
  carbon: {hardware: cpu-2s}
  log: {every: 10}
  peak_flops: 5.0e10
YAML
export GREENSHARD_SERVER=$URL GREENSHARD_TOKEN=$TOKEN
ID=$("$CLI" -o json submit "$RUN/job.yaml" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "quickstart: submitted job $ID"
PROM_URL=http://127.0.0.1:$PPORT
echo "status page:   $URL/"
echo "Prometheus:    $PROM_URL/graph?g0.expr=greenshard_training_loss"
"$CLI" watch "$ID" || true
"$CLI" -o json get "$ID" > "$RUN/job-final.json"

python3 - "$RUN/job-final.json" "$RUN/controller/jobs/$ID/summary.json" "$PROM_URL" "$STEPS" "$VOCAB" <<'PY'
import json, math, sys, time, urllib.parse, urllib.request
job = json.load(open(sys.argv[1]))
prom, steps, vocab = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
try:
    s = json.load(open(sys.argv[2]))
except OSError:
    s = {}
p = job.get("placement") or {}
e = job.get("energy") or {}
print("\n=== quickstart summary ===")
print(f"job            {job['id']}  state {job['state']}")
print(f"steps          {s.get('steps')} / {s.get('total_steps')}, tokens {s.get('tokens')}")
print(f"final loss     {s.get('final_loss')}  (val {s.get('final_val_loss')}, best {s.get('best_val_loss')})")
print(f"throughput     {s.get('tokens_per_s', 0):.0f} tokens/s, MFU {100*(s.get('mfu') or 0):.2f}%")
print(f"energy         {e.get('joules', 0):.1f} J  ({e.get('joules', 0)/3600:.3f} Wh)")
print(f"emissions      {e.get('operational_grams', 0):.4f} g operational + {e.get('embodied_grams', 0):.4f} g embodied CO2e")
print(f"placed         region {p.get('region')} at {p.get('start')} ({p.get('policy')})")
print(f"expected       {p.get('expected_grams', 0):.3f} g vs {p.get('run_now_home_grams', 0):.3f} g now at home: {p.get('grams_avoided', 0):.3f} g avoided")
print(f"why            {p.get('explanation')}")
pr = job.get("progress") or {}

def planned_embodied(explanation):
    # "Expected 1.5 g CO2e (operational 1.4 g, embodied 0.1 g) ..."
    import re
    m = re.search(r"embodied ([0-9.]+) g", explanation)
    return float(m.group(1)) if m else 0.0

def scraped(expr):
    # Prometheus has data for expr (a few tries: the first scrape may still
    # be in flight).
    q = urllib.parse.urlencode({"query": expr})
    for _ in range(10):
        try:
            with urllib.request.urlopen(f"{prom}/api/v1/query?{q}", timeout=5) as r:
                res = json.load(r)["data"]["result"]
            if res and float(res[0]["value"][1]) > 0:
                return True
        except Exception:
            pass
        time.sleep(1)
    return False

loss = s.get("final_loss")
checks = {
    "job SUCCEEDED and the worker's summary says succeeded": job["state"] == "SUCCEEDED" and s.get("state") == "succeeded",
    f"all {steps} steps ran": s.get("steps") == steps == s.get("total_steps"),
    "the worker's status pushes arrived": pr.get("total_steps") == s.get("total_steps"),
    f"the loss is finite and below ln({vocab}) (uniform over the vocabulary)": isinstance(loss, (int, float)) and math.isfinite(loss) and loss < math.log(vocab),
    "tokens/s measured": (s.get("tokens_per_s") or 0) > 0,
    "energy and operational emissions reported": e.get("joules", 0) > 0 and e.get("operational_grams", 0) > 0,
    "placed in a region with an explanation": bool(p.get("region")) and bool(p.get("explanation")) and "grams_avoided" in p,
    # The plan and the run agree in kind: both count embodied emissions.
    "the plan counts embodied emissions, as the run measures them":
        e.get("embodied_grams", 0) > 0 and planned_embodied(p.get("explanation") or "") > 0,
    # The controller's series (a short CI run's workers may finish between
    # two scrapes; tests/e2e/dashboards_e2e.py checks the workers' series).
    "Prometheus scraped the controller": scraped('max(max_over_time(greenshard_scheduler_cycles_total[1h]))'),
}
bad = [k for k, v in checks.items() if not v]
for k in bad:
    print(f"quickstart: FAILED: {k}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# 5. what the model learned: text from its last checkpoint
PROMPT="And God said"
SAMPLE=$("$WORKER" sample --checkpoint "$RUN/controller/jobs/$ID/ckpt" --prompt "$PROMPT" --tokens 48 \
  --temperature 0.8 --top-k 40 --seed 1)
echo "sample         $SAMPLE"
case "$SAMPLE" in
  "$PROMPT"?*) ;;
  *) echo "quickstart: FAILED: the sample does not continue the prompt" >&2; exit 1 ;;
esac
echo "status page:   $URL/"
echo "Prometheus:    $PROM_URL/graph?g0.expr=greenshard_training_loss"
echo "logs:          $CLI logs $ID --rank 0    (with GREENSHARD_SERVER=$URL GREENSHARD_TOKEN=$TOKEN)"
if [ "${KEEP:-0}" = 1 ]; then echo "KEEP=1: Ctrl-C stops everything"; wait; fi
