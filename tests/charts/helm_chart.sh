#!/usr/bin/env bash
# Drives the real helm (v4, installed by scripts/install_helm.sh into
# .tools/bin) against charts/greenshard.
#
#   helm_chart.sh lint VALUES
#       helm lint --strict (VALUES = "default" or a values file)
#   helm_chart.sh render NAME VALUES OUTDIR [--set KEY=VALUE]... [--contains REGEX]... [--lacks REGEX]...
#                        [--notes-contains REGEX]... [--notes-lacks REGEX]... [VALIDATOR ARGS]...
#       helm template into OUTDIR/NAME.yaml (VALUES plus each --set), then
#       every object validated offline (validate_manifests.mjs; VALIDATOR ARGS
#       such as --expect-kind PodMonitor=1 go to it); each --contains REGEX
#       must match the rendered manifests (grep -E), no --lacks REGEX may;
#       NOTES.txt must render too
#       (OUTDIR/NAME.notes.txt, from helm install --dry-run=client), matching
#       each --notes-contains REGEX and no --notes-lacks REGEX.
#   helm_chart.sh reject VALUES [--template-only|--skip-schema] [--set KEY=VALUE]... REGEX...
#       helm lint and helm template must both refuse VALUES, and the error
#       output must match every REGEX (grep -E). --template-only: helm
#       template alone (a template's `fail` is only logged by helm lint).
#       --skip-schema: helm template --skip-schema-validation alone (the
#       templates' own checks of what values.schema.json also refuses).
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
    contains=() lacks=() vargs=() notes_in=() notes_out=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --contains) contains+=("$2"); shift 2 ;;
        --lacks) lacks+=("$2"); shift 2 ;;
        --set) va+=(--set "$2"); shift 2 ;;
        --notes-contains) notes_in+=("$2"); shift 2 ;;
        --notes-lacks) notes_out+=("$2"); shift 2 ;;
        *) vargs+=("$1"); shift ;;
      esac
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
    for re in "${lacks[@]}"; do
      if grep -Eq -- "$re" "$manifest"; then
        echo "helm_chart: $manifest: /$re/ matches, expected it absent:" >&2
        grep -En -- "$re" "$manifest" >&2
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
    for re in "${notes_in[@]}"; do
      if ! grep -Eq -- "$re" "$notes"; then
        echo "helm_chart: $notes: nothing matches /$re/" >&2
        fail=1
      fi
    done
    for re in "${notes_out[@]}"; do
      if grep -Eq -- "$re" "$notes"; then
        echo "helm_chart: $notes: /$re/ matches, expected it absent:" >&2
        grep -E -- "$re" "$notes" >&2
        fail=1
      fi
    done
    [ $fail -eq 0 ] && echo "helm_chart: $name rendered as expected"
    exit $fail
    ;;
  reject)
    values=$1
    shift
    mapfile -t va < <(values_args "$values")
    subs=(lint template)
    template_flags=()
    while :; do
      case "${1:-}" in
        --set) va+=(--set "$2"); shift 2 ;;
        --template-only) subs=(template); shift ;;
        --skip-schema) subs=(template); template_flags=(--skip-schema-validation); shift ;;
        *) break ;;
      esac
    done
    fail=0
    for sub in "${subs[@]}"; do
      if [ "$sub" = lint ]; then
        set +e; output=$("$helm" lint --strict "$chart" "${va[@]}" 2>&1); rc=$?; set -e
      else
        set +e; output=$("$helm" template "$release" "$chart" "${va[@]}" "${template_flags[@]}" 2>&1); rc=$?; set -e
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
