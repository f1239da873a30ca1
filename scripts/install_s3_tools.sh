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

mkdir -p "$S3_DIR"

have_pkgs() {
  local p
  for p in "${S3_PKGS[@]}"; do
    local name=${p%@*} ver=${p##*@}
    local pj="$S3_DIR/node_modules/$name/package.json"
    [ -f "$pj" ] || return 1
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$pj" "$ver" || return 1
  done
}

if have_pkgs; then
  echo "install_s3_tools: ${S3_PKGS[*]} already in $S3_DIR"
else
  echo "install_s3_tools: installing ${S3_PKGS[*]} into $S3_DIR"
  # A package.json of our own so npm keeps the packages in this folder.
  [ -f "$S3_DIR/package.json" ] ||
    echo '{"name":"greenshard-s3-tools","private":true,"version":"0.0.0"}' >"$S3_DIR/package.json"
  npm install --prefix "$S3_DIR" --no-audit --no-fund --loglevel=error --save-exact "${S3_PKGS[@]}"
  have_pkgs || { echo "install_s3_tools: ${S3_PKGS[*]} not found in $S3_DIR after npm install" >&2; exit 1; }
fi
echo "install_s3_tools: ok ($S3_DIR/node_modules)"
