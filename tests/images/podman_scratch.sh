# Sourced by the image tests (image_test.sh, worker_bare_build_test.sh):
#   . podman_scratch.sh NAME BUILD_DIR
# sets build_dir (absolute), repo, tmp (a scratch folder), podman (podman on
# a private storage under $tmp, with images.sh's containers.conf) and fail();
# on exit, whatever the status, removes every container, image, mount and
# file the test made, after printing the containers' logs when it failed.
set -euo pipefail
_gs_name=$1
[ $# -eq 2 ] || { echo "usage: $_gs_name.sh BUILD_DIR" >&2; exit 2; }
build_dir=$(realpath "$2")
repo=$(realpath "$(dirname "${BASH_SOURCE[0]}")/../..")

fail() { echo "$_gs_name: FAIL: $*" >&2; exit 1; }

# (Short: podman refuses a runroot path over 50 characters.)
tmp=$(mktemp -d /tmp/gs-img.XXXXXX)
podman=(podman --root "$tmp/storage/root" --runroot "$tmp/storage/run")
export CONTAINERS_CONF="$build_dir/images/containers.conf"  # written by images.sh
_gs_cleanup() {
  local rc=$?
  if [ $rc -ne 0 ]; then
    for c in $("${podman[@]}" ps -a --format '{{.Names}}' 2>/dev/null); do
      echo "--- logs of $c" >&2; "${podman[@]}" logs "$c" 2>&1 | tail -20 >&2 || true
    done
  fi
  "${podman[@]}" rm -a -f -t 0 >/dev/null 2>&1 || true
  "${podman[@]}" rmi -a -f >/dev/null 2>&1 || true
  grep -o " $tmp[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$tmp"
  exit $rc
}
trap _gs_cleanup EXIT
