#!/usr/bin/env bash
# Builds the two images GreenShard runs from on CPU clusters, on this
# machine, with Debian's tools and no container registry:
#
#   greenshard-controller:TAG   the controller and the greenshard CLI (slim:
#                               no LibTorch)
#   greenshard-worker-cpu:TAG   the worker on Debian's LibTorch (CPU clusters,
#                               and the image test)
#
# Each image starts from a Debian root filesystem that mmdebstrap makes from
# this machine's apt sources, with exactly the packages that provide the
# shared libraries the binaries need (found with readelf/ldd/dpkg, so the list
# follows the build). podman imports it as localhost/greenshard-<image>-base:12
# and builds dockerfiles/<image>.Dockerfile on it, which adds the binaries
# from the build tree (the same Debian release compiled them), the carbon data
# and a non-root user. The CUDA worker (dockerfiles/worker.Dockerfile, NGC
# base) is built elsewhere, for GPU clusters.
#
# `--only worker-build` makes a third image, never by default: the bare build
# machine of the portable worker build (scripts/gpu_deps.sh), Debian with
# libtorch-dev, cmake, g++ and ninja-build only -- what a GPU machine has.
# tests/images/worker_bare_build_test.sh builds the worker in it.
#
# What these machines need (and this script sets up):
#   - runc, not crun: crun fails here ("cgroups in hybrid mode not supported");
#   - podman's default ulimits exceed the hard limits, so CONTAINERS_CONF
#     sets default_ulimits from `ulimit -Hn` and the process limit (capped at
#     kernel.pid_max: runc is refused a higher RLIMIT_NPROC here).
#
# Usage: scripts/images.sh [--build-dir DIR] [--tag TAG] [--only controller|worker-cpu|worker-build]
#                          [--storage DIR] [--work DIR]
#   --build-dir  build tree with the binaries (default $GREENSHARD_BUILD_DIR or build;
#                missing binaries are built there)
#   --tag        image tag (default: the project version from CMakeLists.txt)
#   --storage    podman storage under DIR (root/ and run/) instead of the
#                system's; the image test uses a temporary one
#   --work       scratch and cached root filesystems (default BUILD_DIR/images)
# Prints `image NAME:TAG SIZE` per image. Needs root (mmdebstrap and rootful podman).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

die() { echo "images.sh: $*" >&2; exit 2; }

build_dir=${GREENSHARD_BUILD_DIR:-build}
tag=""
only=""
storage=""
work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a value"; build_dir=$2; shift 2 ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; tag=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || die "--only needs a value"; only=$2; shift 2 ;;
    --storage) [ $# -ge 2 ] || die "--storage needs a value"; storage=$2; shift 2 ;;
    --work) [ $# -ge 2 ] || die "--work needs a value"; work=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$only" in ""|controller|worker-cpu|worker-build) ;; *) die "--only: '$only' is not controller, worker-cpu or worker-build" ;; esac
if [ -z "$tag" ]; then
  tag=$(sed -n 's/^project(GreenShard .*VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
  [ -n "$tag" ] || die "no project version in CMakeLists.txt; pass --tag"
fi
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "--tag: '$tag' is not a valid image tag"
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap in root mode, rootful podman)"
for tool in mmdebstrap podman runc readelf dpkg; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh"
done
build_dir=$(realpath -m "$build_dir")
work=$(realpath -m "${work:-$build_dir/images}")
mkdir -p "$work"

# --- podman: runc, and ulimits within this machine's hard limits ---
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
pid_max=$(cat /proc/sys/kernel/pid_max)
[ "$nofile" = unlimited ] && nofile=1048576
if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc=$pid_max; fi
cat > "$work/containers.conf" <<EOF
# Written by scripts/images.sh.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$work/containers.conf"
podman=(podman)
if [ -n "$storage" ]; then
  storage=$(realpath -m "$storage")
  mkdir -p "$storage/root" "$storage/run"
  podman+=(--root "$storage/root" --runroot "$storage/run")
fi

# --- the binaries ---
controller_bins=("$build_dir/controller/greenshard-controller" "$build_dir/controller/greenshard")
worker_bins=("$build_dir/worker/greenshard-worker" "$build_dir/worker/libgreenshard_spm.so")
want=()
for f in "${controller_bins[@]}" "${worker_bins[@]}"; do [ -e "$f" ] || want+=("$(basename "${f%.so}")"); done
# (The bare build machine has none of ours.)
if [ ${#want[@]} -gt 0 ] && [ "$only" != worker-build ]; then
  [ -f "$build_dir/CMakeCache.txt" ] || die "no build tree at $build_dir: run scripts/build.sh"
  targets=(); for t in "${want[@]}"; do targets+=("${t#lib}"); done
  echo "images.sh: building ${targets[*]} in $build_dir"
  cmake --build "$build_dir" --target "${targets[@]}"
fi

# The Debian packages that provide the libraries these files load directly
# (DT_NEEDED, resolved by ldd); apt brings what those need. libc6 is in every
# base.
runtime_packages() {
  local f lib path owner resolved
  for f in "$@"; do
    resolved=$(ldd "$f")
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$lib" in ld-linux*) continue ;; esac  # the loader: libc6
      path=$(awk -v l="$lib" '$1 == l && $3 ~ /^\// {print $3; exit}' <<<"$resolved")
      [ -n "$path" ] || { echo "images.sh: $f needs $lib, which is not found here" >&2; return 1; }
      # dpkg knows a library by the path its package ships (/lib or /usr/lib).
      owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null) \
        || { echo "images.sh: no Debian package owns $path (needed by $f)" >&2; return 1; }
      echo "${owner%%:*}"
    done
  done | sort -u | grep -v -x -E 'libc6|libgcc-s1'
}

# The machine's apt sources, for mmdebstrap.
sources=()
for s in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$s" ] && grep -q -E '^[[:space:]]*(deb |Types:)' "$s" && sources+=("$s")
done
[ ${#sources[@]} -gt 0 ] || die "no apt sources on this machine"
. /etc/os-release
suite=${VERSION_CODENAME:?/etc/os-release has no VERSION_CODENAME}

# Root filesystem NAME PACKAGES... -> $work/NAME-<hash>.tar (kept: a second
# build with the same packages and sources reuses it).
rootfs() {
  local name=$1; shift
  local key tar
  key=$(printf '%s\n' "$suite" "$@" | cat - "${sources[@]}" | sha256sum | cut -c1-16)
  tar="$work/$name-$key.tar"
  if [ ! -s "$tar" ]; then
    rm -f "$work/$name"-*.tar
    echo "images.sh: mmdebstrap $suite for $name: $*" >&2
    # Packages come from this machine's apt cache where it has them (bind
    # mount), else from its sources. No documentation, manuals or locales.
    mmdebstrap --quiet --format=tar --variant=minbase --include="$(IFS=,; echo "$*")" \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --skip=essential/unlink \
      --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
      --setup-hook='mount -o bind /var/cache/apt/archives "$1/var/cache/apt/archives"' \
      --customize-hook='umount "$1/var/cache/apt/archives"' \
      --customize-hook='chroot "$1" groupadd --gid 65532 greenshard' \
      --customize-hook='chroot "$1" useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin greenshard' \
      "$suite" "$tar.part" "${sources[@]}" >&2
    mv "$tar.part" "$tar"
  fi
  echo "$tar"
}

# image NAME FILES... : stage the context, make the base, build.
image() {
  local name=$1; shift
  local ctx="$work/context-$name" pkgs tar base
  pkgs=$(runtime_packages "$@")
  rm -rf "$ctx"; mkdir -p "$ctx/bin"
  local f
  for f in "$@"; do install -m 0755 -s "$f" "$ctx/bin/"; done
  cp -r carbon/data "$ctx/carbon"
  # shellcheck disable=SC2086
  tar=$(rootfs "$name" ca-certificates $pkgs)
  base="localhost/greenshard-$name-base:12"
  "${podman[@]}" import --quiet "$tar" "$base" >/dev/null
  "${podman[@]}" build --quiet --pull=never -f "$repo/dockerfiles/$name.Dockerfile" \
    -t "localhost/greenshard-$name:$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  echo "image greenshard-$name:$tag $("${podman[@]}" image inspect --format '{{.Size}}' "localhost/greenshard-$name:$tag")"
}

# The bare build machine: root filesystem only, imported as the image.
build_machine() {
  local tar
  tar=$(rootfs worker-build libtorch-dev cmake g++ ninja-build)
  "${podman[@]}" import --quiet "$tar" "localhost/greenshard-worker-build:$tag" >/dev/null
  echo "image greenshard-worker-build:$tag $("${podman[@]}" image inspect --format '{{.Size}}' "localhost/greenshard-worker-build:$tag")"
}

if [ "$only" = worker-build ]; then build_machine; exit 0; fi
if [ -z "$only" ] || [ "$only" = controller ]; then image controller "${controller_bins[@]}"; fi
if [ -z "$only" ] || [ "$only" = worker-cpu ]; then image worker-cpu "${worker_bins[@]}"; fi
