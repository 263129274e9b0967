#!/usr/bin/env bash
# The link launcher that hottext_optimize (hottext.cmake) gives a target: CMake runs the target's
# own link command through it, so the probe is a copy of the real link line (the same objects,
# static libraries, link options and linker), not a guess at it.
#
#   hottext_link.sh PROBE [--add ARG]... FETCH-COMMAND... -- LINK-COMMAND...
#
# 1. LINK-COMMAND with its `-o OUTPUT` turned into `-o PROBE`, unresolved symbols allowed;
# 2. FETCH-COMMAND (`hottext fetch ... --binary PROBE`), which writes the ordering input;
# 3. LINK-COMMAND with the ordering arguments (each --add ARG) after it: the real link.
set -euo pipefail

fail() {
    echo "hottext_link.sh: $*" >&2
    exit 2
}

[ $# -ge 1 ] || fail "usage: hottext_link.sh PROBE [--add ARG]... FETCH-COMMAND... -- LINK-COMMAND..."
probe=$1
shift
ordering=()
while [ $# -ge 2 ] && [ "$1" = --add ]; do
    ordering+=("$2")
    shift 2
done
fetch=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    fetch+=("$1")
    shift
done
[ $# -gt 0 ] || fail "no \`--\` before the link command (called by hottext.cmake's LINKER_LAUNCHER)"
shift
[ ${#fetch[@]} -gt 0 ] && [ $# -gt 0 ] || fail "no fetch command or no link command"

probe_link=()
output_follows=false
renamed=false
for arg in "$@"; do
    if $output_follows; then
        probe_link+=("$probe")
        output_follows=false
        renamed=true
    else
        probe_link+=("$arg")
        [ "$arg" = -o ] && output_follows=true
    fi
done
$renamed || fail "the link command has no \`-o OUTPUT\` to rename for the probe: $*"

"${probe_link[@]}" -Wl,--unresolved-symbols=ignore-all
"${fetch[@]}"
exec "$@" "${ordering[@]}"
