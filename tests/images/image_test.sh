#!/usr/bin/env bash
# The image test: scripts/images.sh builds both images into a temporary
# podman storage, then real containers (runc, host network) run them:
#   1. the controller image is slim (no LibTorch) and non-root; its container
#      serves /healthz, refuses a bad job naming the field, accepts a job,
#      and a second container on the same volume still has the job;
#   2. the CPU worker image prepares BPE tokens, and a 2-rank job runs in two
#      worker containers (Gloo over loopback), checkpoints and writes its
#      summary.
# Usage: image_test.sh BUILD_DIR. Needs root, podman, runc and mmdebstrap
# (scripts/setup.sh installs them). Leaves no container, mount or file behind.
. "$(dirname "$0")/podman_scratch.sh" image_test "$@"  # build_dir repo tmp podman fail, cleanup on exit

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- build both images (root filesystems are cached in BUILD_DIR/images) ---
bash "$repo/scripts/images.sh" --build-dir "$build_dir" --storage "$tmp/storage" --tag test | tee "$tmp/images.out"
grep -q '^image greenshard-controller:test [0-9]' "$tmp/images.out" || fail "images.sh printed no controller image"
grep -q '^image greenshard-worker-cpu:test [0-9]' "$tmp/images.out" || fail "images.sh printed no worker image"
ctl_image=localhost/greenshard-controller:test
wrk_image=localhost/greenshard-worker-cpu:test

for img in $ctl_image $wrk_image; do
  user=$("${podman[@]}" image inspect --format '{{.Config.User}}' $img)
  [ "$user" = "65532:65532" ] || fail "$img runs as '$user', not 65532:65532"
done
torch_libs=$("${podman[@]}" run --rm --network none --entrypoint sh $ctl_image -c \
  'find / -xdev -name "libtorch*" 2>/dev/null | wc -l')
[ "$torch_libs" = 0 ] || fail "the controller image has $torch_libs LibTorch files"
"${podman[@]}" run --rm --network none --entrypoint sh $wrk_image -c 'ls /usr/lib/*/libtorch_cpu.so*' >/dev/null \
  || fail "the worker image has no LibTorch"

# --- 1. the controller container ---
mkdir -p "$tmp/ctl/config" "$tmp/ctl/data"
echo "image-test-token-0123456789,acme,user" > "$tmp/ctl/config/tokens"
chown -R 65532:65532 "$tmp/ctl/data"
start_controller() {  # NAME -> the URL, once /healthz answers
  rm -f "$tmp/ctl/data/port"
  "${podman[@]}" run -d --name "$1" --network host \
    -v "$tmp/ctl/config:/config:ro" -v "$tmp/ctl/data:/var/lib/greenshard" $ctl_image \
    --host 127.0.0.1 --port 0 --port-file /var/lib/greenshard/port --tokens /config/tokens >/dev/null
  for _ in $(seq 1 300); do
    [ -s "$tmp/ctl/data/port" ] && break
    [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$1")" = true ] || fail "controller container $1 exited"
    sleep 0.1
  done
  [ -s "$tmp/ctl/data/port" ] || fail "controller container $1 wrote no port file in 30 s"
  echo "http://127.0.0.1:$(cat "$tmp/ctl/data/port")"
}
url=$(start_controller ctl1)
# No worker in the slim image: the controller says at start that its default
# local region cannot launch jobs (the chart configures Kubernetes regions).
# The logs are read whole before grep: `podman logs | grep -q` under pipefail
# failed whenever grep matched and exited before podman's next write, which
# then died of SIGPIPE (podman writes each line apart, stderr and stdout in
# either order). conmon copies the container's stderr to the log file on its
# own, so the line is waited for (10 s at most).
warned=false
for _ in $(seq 1 100); do
  ctl1_logs=$("${podman[@]}" logs ctl1 2>&1) || fail "podman logs ctl1 failed: $ctl1_logs"
  if grep -q 'warning: --worker /usr/local/bin/greenshard-worker: .*local region(s) local will fail to launch' <<<"$ctl1_logs"; then
    warned=true; break
  fi
  sleep 0.1
done
$warned || fail "the controller did not warn that its image has no worker"
[ "$(curl -sf "$url/healthz")" = '{"status":"ok"}' ] || fail "/healthz did not answer ok"
auth=(-H "Authorization: Bearer image-test-token-0123456789" -H "Content-Type: application/json")
job='{"name":"image-test","worker":{"data":{"train":"/workspace/data/train-*.bin"},"schedule":{"steps":5}},"regions":["local"],"nodes":1,"procs_per_node":1,
      "estimate":{"duration_s":600,"power_watts":100}}'
code=$(curl -s -o "$tmp/bad.json" -w '%{http_code}' "${auth[@]}" -d '{"name":"image-test","nodez":1}' "$url/v1/jobs")
[ "$code" = 400 ] || fail "a job with an unknown field got HTTP $code, not 400"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert e["field"]=="nodez", e' "$tmp/bad.json" \
  || fail "the 400 does not name the field: $(cat "$tmp/bad.json")"
code=$(curl -s -o "$tmp/job.json" -w '%{http_code}' "${auth[@]}" -d "$job" "$url/v1/jobs")
[ "$code" = 201 ] || fail "POST /v1/jobs answered $code: $(cat "$tmp/job.json")"
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$tmp/job.json")
"${podman[@]}" stop -t 10 ctl1 >/dev/null
[ "$("${podman[@]}" inspect --format '{{.State.ExitCode}}' ctl1)" = 0 ] || fail "the controller did not exit 0 on SIGTERM"
url=$(start_controller ctl2)
code=$(curl -s -o "$tmp/again.json" -w '%{http_code}' "${auth[@]}" "$url/v1/jobs/$id")
[ "$code" = 200 ] || fail "after a restart on the same volume, GET /v1/jobs/$id answered $code"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["spec"]["name"]=="image-test", j' "$tmp/again.json" \
  || fail "the stored job is not the one submitted: $(cat "$tmp/again.json")"
"${podman[@]}" stop -t 10 ctl2 >/dev/null
echo "image_test: controller container: /healthz, 400 naming the field, 201, job $id kept across containers"

# --- 2. a 2-rank job in two worker containers ---
w="$tmp/work"
mkdir -p "$w"
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/GPL-2 /usr/share/common-licenses/Apache-2.0 > "$w/text.txt"
cat > "$w/job.yaml" <<'EOF'
model:      {layers: 2, heads: 2, embd: 32, context: 32, vocab: 512}
data:       {train: "/workspace/data/train-*.bin", val: "/workspace/data/val-*.bin"}
schedule:   {steps: 6, batch_size: 4, eval_interval: 3, eval_batches: 1}
checkpoint: {dir: /workspace/ckpt, interval: 3}
summary_path: /workspace/summary.json
EOF
chown -R 65532:65532 "$w"
"${podman[@]}" run --rm --network none -e OMP_NUM_THREADS=1 -v "$w:/workspace" $wrk_image \
  prepare --input /workspace/text.txt --out /workspace/data --tokenizer bpe --vocab 512 --threads 1
port=$(free_port)
for r in 0 1; do
  "${podman[@]}" run -d --name "rank$r" --network host -e OMP_NUM_THREADS=1 \
    -e MASTER_ADDR=127.0.0.1 -e MASTER_PORT="$port" -e RANK=$r -e WORLD_SIZE=2 -e LOCAL_RANK=$r -e LOCAL_WORLD_SIZE=2 \
    -v "$w:/workspace" $wrk_image --config /workspace/job.yaml --job_id image-test >/dev/null
done
for r in 0 1; do
  rc=$(timeout 300 "${podman[@]}" wait "rank$r") || fail "rank $r did not finish in 300 s"
  [ "$rc" = 0 ] || fail "rank $r exited $rc"
done
python3 - "$w/summary.json" <<'EOF' || fail "the summary is not a finished 2-rank run: $(cat "$w/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["state"] == "succeeded" and s["steps"] == 6 and s["world_size"] == 2, s
assert s["tokens"] == 6 * 2 * 4 * 32, s
assert s["final_loss"] > 0 and s["energy_joules"] > 0, s
EOF
[ -d "$w/ckpt/step_00000006" ] || fail "no final checkpoint step_00000006"
echo "image_test: 2-rank job in worker containers: 6 steps, world size 2, checkpoint and summary written"
echo "image_test: ok"
