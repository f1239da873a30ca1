# Sourced by install_helm.sh and install_s3_tools.sh: exact-version npm
# packages in a project-local folder.
#
#   npm_pinned_install TAG DIR NAME@VERSION...
#
# Installs the packages into DIR/node_modules (DIR gets a package.json of its
# own so npm keeps them there) unless every one is there already at exactly
# its version; then checks they are. Messages start with TAG.

npm_pinned_present() {  # DIR NAME@VERSION...
  local dir=$1 p
  shift
  for p in "$@"; do
    local name=${p%@*} ver=${p##*@}
    local pj="$dir/node_modules/$name/package.json"
    [ -f "$pj" ] || return 1
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$pj" "$ver" || return 1
  done
}

npm_pinned_install() {  # TAG DIR NAME@VERSION...
  local tag=$1 dir=$2
  shift 2
  if npm_pinned_present "$dir" "$@"; then
    echo "$tag: $* already in $dir"
    return 0
  fi
  echo "$tag: installing $* into $dir"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] ||
    echo "{\"name\":\"greenshard-$(basename "$dir")-tools\",\"private\":true,\"version\":\"0.0.0\"}" >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact "$@"
  npm_pinned_present "$dir" "$@" || { echo "$tag: $* not found in $dir after npm install" >&2; return 1; }
}
