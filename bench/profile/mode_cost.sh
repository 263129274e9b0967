#!/usr/bin/env bash
# bench/profile/mode_cost.sh: what each way of recording costs: frame-pointer stacks, DWARF
# stacks (`--call-graph dwarf`), and plain samples without stacks. (Branch records need a PMU
# with LBR, which this project's machines lack: not measured here.)
#
# A fixed amount of compute (bench/profile/switchy.c, 2000 rounds, SPIN 50000, pinned to CPU 1),
# built with frame pointers so that every mode can record it, run with no recording and under
# `hottext record --per-process --sampling MODE` (cpu-clock:u, 4999 Hz), interleaved.
# Prints per mode the median of: the work's own wall time and its slowdown, samples per second,
# perf.data bytes per second and per sample, and perf's own CPU share (from `hottext record
# --json`), as a markdown table.
#
# Environment: ROUNDS (runs per mode, default 7), MODES (default "stack dwarf plain"),
# HOTTEXT (default target/release/hottext).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${ROUNDS:-7}
hottext=${HOTTEXT:-$root/target/release/hottext}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$hottext" ] || { echo "mode_cost: $hottext is missing: run 'make build' first" >&2; exit 2; }
gcc -O2 -fno-omit-frame-pointer -pthread -o "$work/switchy" "$here/switchy.c"
prog=(taskset -c 1 "$work/switchy" 2000 50000)

# run MODE: prints "wall samples/s bytes/s bytes/sample perf-cpu" (only wall for the baseline).
run() {
    if [ "$1" = baseline ]; then
        "${prog[@]}" 2>/dev/null
        return
    fi
    "$hottext" record --json --per-process --sampling "$1" -o "$work/p.data" -- "${prog[@]}" \
        2>/dev/null | python3 -c '
import json, sys
out = sys.stdin.read()
wall, doc = out.split("\n", 1)
v = json.loads(doc)
s = v["wall_seconds"]
print(wall, v["samples"] / s, v["bytes"] / s, v["bytes"] / max(v["samples"], 1), v["perf_cpu_fraction"])'
}

recorded=${MODES:-stack dwarf plain}
modes="baseline $recorded"
declare -A rows=()
for ((r = 0; r < rounds; r++)); do
    for m in $modes; do
        rows[$m]+="$(run "$m")"$'\n'
    done
done
median() { grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
column() { cut -d' ' -f"$2" <<<"${rows[$1]}" | median; }
base=$(column baseline 1)
echo "| mode | work wall s | slowdown | samples/s | perf.data MB/s | bytes/sample | perf CPU |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '| none | %.3f | | | | | |\n' "$base"
for m in $recorded; do
    awk -v m="$m" -v t="$(column "$m" 1)" -v b="$base" -v sps="$(column "$m" 2)" \
        -v bps="$(column "$m" 3)" -v bpsam="$(column "$m" 4)" -v cpu="$(column "$m" 5)" \
        'BEGIN { printf "| %s | %.3f | %+.1f%% | %.0f | %.2f | %.0f | %.1f%% |\n",
                 m, t, 100 * (t / b - 1), sps, bps / 1e6, bpsam, 100 * cpu }'
done
