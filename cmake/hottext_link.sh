#!/usr/bin/env bash
# The link launcher that hottext_optimize (hottext.cmake) gives a target: CMake runs the target's
# own link command through it, so the probe is a copy of the real link line (the same objects,
# static libraries, link options and linker), not a guess at it.
#
#   hottext_link.sh PROBE [--add ARG]... [--verify INPUT fail|warn] FETCH-COMMAND... -- LINK-COMMAND...
#
# 1. LINK-COMMAND with its `-o OUTPUT` turned into `-o PROBE`, unresolved symbols allowed;
# 2. FETCH-COMMAND (`hottext fetch ... --binary PROBE`), which writes the ordering input;
# 3. LINK-COMMAND with the ordering arguments (each --add ARG) after it: the real link;
# 4. with --verify, `hottext verify --binary OUTPUT --planned INPUT` (the hottext command is the
#    fetch command's first word): every planned function in the hot range, which the runtime can
#    map. On a failure, `fail` removes OUTPUT and fails the link (the next build links again),
#    `warn` says so in the build log and keeps the binary, as ON_MISSING does for the profile.
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
verify_input="" verify_mode=""
if [ $# -ge 3 ] && [ "$1" = --verify ]; then
    verify_input=$2 verify_mode=$3
    case $verify_mode in fail | warn) ;; *) fail "--verify takes fail or warn, not '$verify_mode'" ;; esac
    shift 3
fi
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
output=""
for arg in "$@"; do
    if $output_follows; then
        output=$arg
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
if [ -z "$verify_mode" ]; then
    exec "$@" "${ordering[@]}"
fi
"$@" "${ordering[@]}"
if ! "${fetch[0]}" verify --binary "$output" --planned "$verify_input"; then
    if [ "$verify_mode" = fail ]; then
        rm -f "$output"
        fail "the linked $output does not hold the hot range $verify_input planned (see above); it was removed"
    fi
    echo "hottext_link.sh: warning: $output does not hold the hot range $verify_input planned (see above)" >&2
fi
