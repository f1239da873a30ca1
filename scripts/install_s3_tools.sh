#!/usr/bin/env bash
# Installs the S3 test tools into a project-local folder, from the npm
# registry only (nothing else is downloaded):
#
#   .tools/s3/node_modules/s3rver
#       a real S3 server (Node) that the S3 client tests start on loopback
#       (tests/shard/s3rver_run.mjs);
#   .tools/s3/node_modules/@aws-sdk/client-s3
#       the official AWS SDK v3 S3 client, used by tests/shard/s3_read.mjs to
#       prove that what our client wrote is readable by AWS's own client.
#
# Idempotent: re-running it with the pinned versions in place downloads nothing.
# Override the folder with GREENSHARD_TOOLS_DIR (default: <repo>/.tools); the
# tests honour the same variable.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_DIR=${GREENSHARD_TOOLS_DIR:-$PWD/.tools}
S3_DIR="$TOOLS_DIR/s3"

# Exact versions. s3rver 3.7.1 is the latest release (it runs on Node >= 8.3);
# @aws-sdk/client-s3 3.x needs Node >= 20.
S3_PKGS=(s3rver@3.7.1 @aws-sdk/client-s3@3.1178.0)

command -v node >/dev/null || { echo "install_s3_tools: node is required (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "install_s3_tools: npm is required (apt-get install npm)" >&2; exit 1; }

source scripts/npm_pinned.sh
npm_pinned_install install_s3_tools "$S3_DIR" "${S3_PKGS[@]}"
echo "install_s3_tools: ok ($S3_DIR/node_modules)"
