#!/usr/bin/env bash
# Compares two hottext binaries on the 1 M-function benchmark profile (see run.sh) by running them
# at the same time, one per CPU, and swapping the CPUs each round. Why: on a 2-vCPU cloud VM the
# memory-bound ordering loops swing by 15-30 % from one minute to the next, so runs one after the
# other compare the host's moods; two runs side by side share them. Two copies of one binary give
# ratios of 0.97-1.03 per round. Times are whole commands, reading and writing included; each
# binary runs alone on its CPU, so `auto` runs its two threads on one CPU here.
#   bash bench/order/paired.sh OLD NEW [ALGORITHM] [ROUNDS]
#   bash bench/order/paired.sh /tmp/hottext.before target/release/hottext cdsort 8
# Prints each round's seconds and peak RSS and NEW/OLD, then the geometric mean of the ratios.
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
old=$1 new=$2 algorithm=${3:-auto} rounds=${4:-6}
for bin in "$old" "$new"; do
    [ -x "$bin" ] || { echo "paired.sh: $bin is not an executable file" >&2; exit 2; }
done
command -v taskset >/dev/null || { echo "paired.sh: needs taskset (util-linux)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "paired.sh: needs two CPUs, this machine has $(nproc)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
profile=${WORK:-/tmp/hottext-bench-order}/1m-functions-5m-calls.profile
[ -s "$profile" ] || { echo "paired.sh: no $profile: run bench/order/run.sh once first" >&2; exit 2; }
out=$(mktemp -d)
trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$out"' EXIT
run() { # cpu binary name
    /usr/bin/time -f "%e %M" -o "$out/$3.time" taskset -c "$1" "$2" order "$profile" \
        --algorithm "$algorithm" --format ld-script -o "$out/$3.ld" >/dev/null 2>"$out/$3.err" ||
        { echo "paired.sh: $2 failed:" >&2; cat "$out/$3.err" >&2; exit 1; }
}
logs=0
for round in $(seq 1 "$rounds"); do
    cpu_old=$(( round % 2 )) cpu_new=$(( (round + 1) % 2 ))
    run "$cpu_old" "$old" old & a=$!
    run "$cpu_new" "$new" new & b=$!
    wait "$a"
    wait "$b"
    read -r t_old m_old <"$out/old.time"
    read -r t_new m_new <"$out/new.time"
    cmp -s "$out/old.ld" "$out/new.ld" || echo "round $round: the two scripts differ" >&2
    ratio=$(awk -v n="$t_new" -v o="$t_old" 'BEGIN { printf "%.3f", n / o }')
    logs=$(awk -v s="$logs" -v r="$ratio" 'BEGIN { print s + log(r) }')
    echo "round $round: old $t_old s ${m_old} KiB, new $t_new s ${m_new} KiB, new/old $ratio"
done
awk -v s="$logs" -v n="$rounds" 'BEGIN { printf "geometric mean of new/old over %d rounds: %.3f\n", n, exp(s / n) }'
exit 0
