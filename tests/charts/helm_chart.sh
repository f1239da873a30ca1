#!/usr/bin/env bash
# Drives the real helm (v4, installed by scripts/install_helm.sh into
# .tools/bin) against charts/greenshard.
#
#   helm_chart.sh lint VALUES
#       helm lint --strict (VALUES = "default" or a values file)
#   helm_chart.sh render NAME VALUES OUTDIR [--contains REGEX]... [VALIDATOR ARGS]...
#       helm template into OUTDIR/NAME.yaml, then every object validated
#       offline (validate_manifests.mjs; VALIDATOR ARGS such as
#       --expect-kind PodMonitor=1 go to it); each --contains REGEX must match
#       the rendered manifests (grep -E); NOTES.txt must render too.
#   helm_chart.sh reject VALUES REGEX...
#       helm lint and helm template must both refuse VALUES, and the error
#       output must match every REGEX (grep -E).
#
# Environment: GREENSHARD_HELM (default <repo>/.tools/bin/helm), NODE (node).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart="$repo/charts/greenshard"
helm=${GREENSHARD_HELM:-$repo/.tools/bin/helm}
node=${NODE:-node}
release=gs
namespace=greenshard

if [ ! -x "$helm" ]; then
  echo "helm_chart: no helm at $helm; run scripts/install_helm.sh (or set GREENSHARD_HELM)" >&2
  exit 1
fi
case "$("$helm" version --short 2>/dev/null)" in
  v4.*) ;;
  *) echo "helm_chart: $helm is not Helm v4 ($("$helm" version --short 2>&1))" >&2; exit 1 ;;
esac

values_args() {
  if [ "$1" = default ]; then return; fi
  [ -f "$1" ] || { echo "helm_chart: no values file $1" >&2; exit 1; }
  printf '%s\n' -f "$1"
}

cmd=${1:?usage: helm_chart.sh lint|render|reject ...}
shift
case "$cmd" in
  lint)
    mapfile -t va < <(values_args "$1")
    "$helm" lint --strict "$chart" "${va[@]}" --namespace "$namespace"
    ;;
  render)
    name=$1 values=$2 out=$3
    shift 3
    mapfile -t va < <(values_args "$values")
    contains=() vargs=()
    while [ $# -gt 0 ]; do
      if [ "$1" = --contains ]; then contains+=("$2"); shift 2; else vargs+=("$1"); shift; fi
    done
    mkdir -p "$out"
    manifest="$out/$name.yaml"
    "$helm" template "$release" "$chart" "${va[@]}" --namespace "$namespace" >"$manifest"
    echo "helm_chart: rendered $(grep -c '^kind:' "$manifest") objects into $manifest"
    "$node" "$here/validate_manifests.mjs" "${vargs[@]}" "$manifest"
    fail=0
    for re in "${contains[@]}"; do
      if ! grep -Eq -- "$re" "$manifest"; then
        echo "helm_chart: $manifest: nothing matches /$re/" >&2
        fail=1
      fi
    done
    # NOTES.txt renders (client-side dry run: no cluster needed).
    notes="$out/$name.notes.txt"
    "$helm" install "$release" "$chart" "${va[@]}" --namespace "$namespace" --dry-run=client \
      | sed -n '/^NOTES:/,$p' >"$notes"
    if ! grep -q "helm test $release" "$notes"; then
      echo "helm_chart: NOTES.txt did not render (see $notes)" >&2
      fail=1
    fi
    exit $fail
    ;;
  reject)
    values=$1
    shift
    mapfile -t va < <(values_args "$values")
    fail=0
    for sub in lint template; do
      if [ "$sub" = lint ]; then
        set +e; output=$("$helm" lint --strict "$chart" "${va[@]}" 2>&1); rc=$?; set -e
      else
        set +e; output=$("$helm" template "$release" "$chart" "${va[@]}" 2>&1); rc=$?; set -e
      fi
      if [ $rc -eq 0 ]; then
        echo "helm_chart: helm $sub accepted $values, expected a schema error" >&2
        fail=1
        continue
      fi
      for re in "$@"; do
        if ! grep -Eq -- "$re" <<<"$output"; then
          echo "helm_chart: helm $sub output has no /$re/" >&2
          fail=1
        fi
      done
    done
    echo "$output"
    [ $fail -eq 0 ] && echo "helm_chart: $values rejected as expected"
    exit $fail
    ;;
  *)
    echo "helm_chart: unknown command $cmd" >&2
    exit 2
    ;;
esac
