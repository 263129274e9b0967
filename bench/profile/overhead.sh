#!/usr/bin/env bash
# bench/profile/overhead.sh: what recording costs the recorded program, per `hottext record` mode.
#
# Runs a fixed amount of work (bench/profile/switchy.c: request/response between two threads
# over pipes) with and without recording, interleaved, and prints the median wall time of each
# mode and its slowdown against the matching baseline, as a markdown table.
#
#   workloads  switch-heavy: 200000 rounds, SPIN 100 (about 2 context switches per 6 us)
#              compute:      2000 rounds, SPIN 50000 (few switches)
#   modes      baseline | per-process events (--per-process) | CPU-wide events (the default),
#              each unpinned and pinned to one CPU (taskset -c 1)
#
# Environment: ROUNDS (runs per mode, default 7), HOTTEXT (default target/release/hottext).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-7}
hottext=${HOTTEXT:-$root/target/release/hottext}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$hottext" ] || { echo "overhead: $hottext is missing: run 'make build' first" >&2; exit 2; }
gcc -O2 -fno-omit-frame-pointer -pthread -o "$work/switchy" "$here/switchy.c"

# run MODE ROUNDS SPIN: prints the workload's own wall time.
run() {
    local mode=$1 n=$2 spin=$3 prog=("$work/switchy" "$2" "$3")
    case $mode in
        baseline)         "${prog[@]}" ;;
        per-process)      "$hottext" record --per-process -o "$work/p.data" -- "${prog[@]}" ;;
        cpu-wide)         "$hottext" record -o "$work/p.data" -- "${prog[@]}" ;;
        pinned-baseline)  taskset -c 1 "${prog[@]}" ;;
        pinned-per-process) "$hottext" record --per-process -o "$work/p.data" -- taskset -c 1 "${prog[@]}" ;;
        pinned-cpu-wide)  "$hottext" record -o "$work/p.data" -- taskset -c 1 "${prog[@]}" ;;
    esac 2>/dev/null
}

modes="baseline per-process cpu-wide pinned-baseline pinned-per-process pinned-cpu-wide"
echo "| workload | mode | median wall s | slowdown |"
echo "| --- | --- | --- | --- |"
for workload in "switch-heavy 200000 100" "compute 2000 50000"; do
    set -- $workload
    name=$1 n=$2 spin=$3
    declare -A times=()
    for ((r = 0; r < rounds; r++)); do
        for m in $modes; do
            times[$m]+="$(run "$m" "$n" "$spin") "
        done
    done
    median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
    for m in $modes; do
        base=baseline
        [[ $m == pinned-* ]] && base=pinned-baseline
        med=$(median "${times[$m]}")
        ref=$(median "${times[$base]}")
        awk -v w="$name" -v m="$m" -v t="$med" -v b="$ref" \
            'BEGIN { printf "| %s | %s | %.3f | %+.1f%% |\n", w, m, t, 100 * (t / b - 1) }'
    done
    unset times
done
