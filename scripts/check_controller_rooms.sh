#!/usr/bin/env bash
# check_controller_rooms.sh CONTROLLER_DIR RULES
#
# The direction between controller/'s rooms (its sub-folders, one static
# library each): every #include "controller/<room>/..." in a room's files must
# name the room itself or one of the rooms it is allowed. RULES is
# controller/CMakeLists.txt's CONTROLLER_ROOM_ALLOWED joined with '|':
# "core:|store:core|config:core,executors|...". Also refused: an include of
# "controller/<file>" outside every room, a room folder without a rule, and
# an include from worker/ or shard/ other than the contract, worker/spec/.
# Each problem is printed as "<file>:<line>: ..."; exit 1 when there is any.
# Run by the CTest controller.rooms.includes (label build).
set -u
if [[ $# -ne 2 ]]; then
  echo "usage: $0 CONTROLLER_DIR RULES" >&2
  exit 2
fi
dir=${1%/}
rules=$2
[[ -d $dir ]] || { echo "check_controller_rooms: no folder '$dir'" >&2; exit 2; }
declare -A allowed
IFS='|' read -ra entries <<<"$rules"
for e in "${entries[@]}"; do
  [[ $e == *:* ]] || { echo "check_controller_rooms: bad rule '$e' (want room:allowed,...)" >&2; exit 2; }
  allowed[${e%%:*}]=" ${e#*:} "
  allowed[${e%%:*}]=${allowed[${e%%:*}]//,/ }
done
(( ${#allowed[@]} > 0 )) || { echo "check_controller_rooms: no rules" >&2; exit 2; }

base=$(basename "$dir")
cd "$dir/.." || exit 2
problems=0 files=0 includes=0
complain() { echo "$1"; problems=$((problems + 1)); }
for room_dir in "$base"/*/; do
  room=$(basename "$room_dir")
  if [[ -z ${allowed[$room]+x} ]]; then
    complain "$base/$room/: a room without a rule in CONTROLLER_ROOM_ALLOWED (controller/CMakeLists.txt)"
    continue
  fi
  may=${allowed[$room]}
  may=$(echo $may)
  while IFS= read -r -d '' f; do
    files=$((files + 1))
    while IFS= read -r hit; do
      [[ -n $hit ]] || continue
      line=${hit%%:*}
      target=$(sed -E 's/^[^"]*"controller\/([^"]*)".*$/\1/' <<<"${hit#*:}")
      includes=$((includes + 1))
      if [[ $target != */* ]]; then
        complain "$f:$line: includes \"controller/$target\", which is in no room"
        continue
      fi
      to=${target%%/*}
      [[ $to == "$room" ]] && continue
      if [[ ${allowed[$room]} != *" $to "* ]]; then
        complain "$f:$line: includes \"controller/$target\": room '$room' may not include room '$to' (it may include: ${may:-no other room})"
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"controller/' "$f")
    # From worker/ and shard/ the controller takes the contract only.
    while IFS= read -r hit; do
      [[ -n $hit ]] || continue
      complain "$f:${hit%%:*}: includes $(sed -E 's/^[^"]*("[^"]*").*$/\1/' <<<"${hit#*:}"): the controller takes only the contract (\"worker/spec/...\") from worker/ and shard/"
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(shard/|worker/)' "$f" | grep -vE '"worker/spec/')
  done < <(find "$room_dir" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' -o -name '*.inc' \) -print0 | sort -z)
done
if (( problems > 0 )); then
  echo "check_controller_rooms: $problems forbidden include(s) in $files files of $base/"
  exit 1
fi
echo "check_controller_rooms: $includes includes in $files files of $base/ follow the rooms' direction"
