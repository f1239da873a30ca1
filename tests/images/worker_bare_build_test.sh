#!/usr/bin/env bash
# The portable worker build (issue 37), on a machine as bare as a GPU machine:
#   1. scripts/gpu_deps.sh prepare fills a carried folder from this machine's
#      Debian packages (source packages of yaml-cpp, prometheus-cpp and
#      cpp-httplib; headers of nlohmann-json, CLI11 and Gloo); check: <= 48 MiB;
#   2. scripts/images.sh --only worker-build makes the bare build machine:
#      Debian with libtorch-dev, cmake, g++ and ninja-build only; the test
#      checks that none of the other -dev packages' headers are in it;
#   3. in a container of it (no network, the repository and the carried folder
#      read-only) scripts/gpu_deps.sh build configures and builds the real
#      greenshard-worker; CMake reports every missing dependency as carried
#      and OpenSSL, libcurl and SentencePiece as absent;
#   4. that worker prepares byte tokens and trains 20 steps in the container,
#      and refuses what its build left out (a BPE tokenizer) naming why.
# The build is -O0 without debug information (the quickest compile; what is
# tested is that it builds and runs from the carried folder, not its speed).
# Usage: worker_bare_build_test.sh BUILD_DIR. Needs root, podman, runc,
# mmdebstrap and the Debian mirror of scripts/setup.sh (apt-get source).
# Leaves no container, image, mount or file behind (the root filesystem is
# cached in BUILD_DIR/images, as scripts/images.sh does).
. "$(dirname "$0")/podman_scratch.sh" worker_bare_build_test "$@"  # build_dir repo tmp podman fail, cleanup on exit

# --- 1. the carried folder ---
bash "$repo/scripts/gpu_deps.sh" prepare "$tmp/third_party" | tee "$tmp/prepare.out"
bash "$repo/scripts/gpu_deps.sh" check "$tmp/third_party" >/dev/null || fail "gpu_deps.sh check refused the prepared folder"
grep -q -E '^yaml-cpp +source ' "$tmp/prepare.out" || fail "SOURCES names no yaml-cpp source package"

# --- 2. the bare build machine ---
bash "$repo/scripts/images.sh" --build-dir "$build_dir" --storage "$tmp/storage" --tag test --only worker-build \
  | tee "$tmp/images.out"
grep -q '^image greenshard-worker-build:test [0-9]' "$tmp/images.out" || fail "images.sh printed no worker-build image"
image=localhost/greenshard-worker-build:test
present=$("${podman[@]}" run --rm --network none "$image" sh -c '
  for h in yaml-cpp/yaml.h nlohmann/json.hpp CLI/CLI.hpp httplib.h prometheus/counter.h gloo/context.h \
           openssl/ssl.h curl/curl.h sentencepiece_processor.h; do
    for d in /usr/include /usr/local/include; do [ -e "$d/$h" ] && echo "$d/$h"; done
  done; true')
[ -z "$present" ] || fail "the bare build machine is not bare: $present"
"${podman[@]}" run --rm --network none "$image" sh -c 'command -v cmake && command -v ninja && command -v g++ &&
  ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so' >/dev/null || fail "the bare build machine lacks cmake, ninja, g++ or LibTorch"

# --- 3. the worker, built there from the carried folder ---
mkdir -p "$tmp/build" "$tmp/work"
run=("${podman[@]}" run --rm --network none -e OMP_NUM_THREADS=1
     -v "$repo:/src:ro" -v "$tmp/third_party:/third_party:ro" -v "$tmp/build:/build" -v "$tmp/work:/work"
     -e GREENSHARD_THIRD_PARTY=/third_party "$image")
"${run[@]}" bash /src/scripts/gpu_deps.sh build /build -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g0 \
  > "$tmp/build.out" 2>&1 || { tail -40 "$tmp/build.out" >&2; fail "the worker did not build in the bare machine"; }
grep 'GreenShard dependencies' "$tmp/build.out" || true
grep -q 'GreenShard dependencies: carried from /third_party: nlohmann_json CLI11 yaml-cpp prometheus-cpp cpp-httplib; OpenSSL OFF, libcurl OFF, sentencepiece OFF, Gloo ON' \
  "$tmp/build.out" || fail "CMake did not take every missing dependency from the carried folder: $(grep 'GreenShard dependencies' "$tmp/build.out")"
[ -x "$tmp/build/worker/greenshard-worker" ] || fail "no greenshard-worker in the build tree"

# --- 4. it trains 20 steps ---
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$tmp/work/text.txt"
cat > "$tmp/work/job.yaml" <<'EOF'
model:      {layers: 2, heads: 2, embd: 32, context: 32, vocab: 256}
data:       {train: "/work/data/train-*.bin", val: "/work/data/val-*.bin"}
schedule:   {steps: 20, batch_size: 4, eval_interval: 10, eval_batches: 1}
checkpoint: {dir: /work/ckpt, interval: 10}
summary_path: /work/summary.json
EOF
"${run[@]}" /build/worker/greenshard-worker prepare --input /work/text.txt --out /work/data --tokenizer byte --threads 1 \
  || fail "prepare --tokenizer byte failed"
set +e
bpe=$("${run[@]}" /build/worker/greenshard-worker prepare --input /work/text.txt --out /work/bpe --tokenizer bpe 2>&1)
bpe_rc=$?
set -e
[ $bpe_rc -ne 0 ] || fail "a build without SentencePiece accepted --tokenizer bpe"
grep -qi 'sentencepiece' <<<"$bpe" || fail "the bpe refusal does not say why: $bpe"
"${run[@]}" /build/worker/greenshard-worker --config /work/job.yaml --job_id bare-build > "$tmp/train.out" 2>&1 \
  || { tail -30 "$tmp/train.out" >&2; fail "the worker did not train"; }
python3 - "$tmp/work/summary.json" <<'EOF' || fail "the summary is not a finished 20-step run: $(cat "$tmp/work/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["state"] == "succeeded" and s["steps"] == 20 and s["world_size"] == 1, s
assert s["tokens"] == 20 * 4 * 32, s
assert 0 < s["final_loss"] < 6, s
EOF
[ -d "$tmp/work/ckpt/step_00000020" ] || fail "no final checkpoint step_00000020"
echo "worker_bare_build_test: the worker built from the carried folder on libtorch-dev + cmake + g++ + ninja only, trained 20 steps"
echo "worker_bare_build_test: ok"
