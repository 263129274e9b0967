#!/usr/bin/env bash
# bench/profile/run.sh: `hottext profile` against `perf script` on one perf.data with at least
# 1,000,000 stack samples of a real program.
#
#   1. builds the demo service (examples/demo-service) into build/bench-profile/, or, if it is
#      not there, a generated C program with many functions and deep call chains;
#   2. runs one instance per CPU and records them at the highest frequency the kernel allows
#      (at most 20 kHz), long enough for a million samples:
#        perf record -g -e cpu-clock:u -F FREQ -p PID,PID -o perf.data -- sleep SECONDS
#      (-p rather than -a: on a shared machine, other programs' samples would dilute the file)
#   3. reads the file once to warm the page cache, then times `perf script > /dev/null` and
#      `hottext profile` (release build) on it and prints the ratio.
#
# Environment: RECORD_SECONDS (default 80), BIN (a program to use instead; it is run with
# BIN_ARGS, default "--serve", and must run until killed), KEEP=1 keeps build/bench-profile/perf.data.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$root/build/bench-profile
hottext=$root/target/release/hottext
record_seconds=${RECORD_SECONDS:-80}
min_samples=1000000
mkdir -p "$work"

[ -x "$hottext" ] || { echo "bench: $hottext is missing: run 'make build' first" >&2; exit 2; }
command -v perf >/dev/null || { echo "bench: perf is not installed" >&2; exit 2; }

now_ns() { date +%s%N; }
seconds_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }

# A generated program: 3000 functions in levels of 500, each calling two of the next level.
generated_program() {
    python3 - "$work/gen.c" <<'EOF'
import random, sys
random.seed(1)
levels, width = 6, 500
out = ["#include <stdint.h>", "static volatile uint64_t sink;"]
for l in range(levels - 1, -1, -1):
    for i in range(width):
        body = "x = x * 6364136223846793005ULL + %d; sink = x;" % (l * width + i)
        if l < levels - 1:
            a, b = random.randrange(width), random.randrange(width)
            body += " x = (x & 1) ? f%d_%d(x) : f%d_%d(x >> 1);" % (l + 1, a, l + 1, b)
        out.append("__attribute__((noinline)) uint64_t f%d_%d(uint64_t x) { %s return x; }" % (l, i, body))
out.append("uint64_t (*roots[])(uint64_t) = {%s};" % ", ".join("f0_%d" % i for i in range(width)))
out.append("int main(void) { uint64_t x = 1; for (;;) { x = roots[x %% %d](x ^ (x >> 17)) + 1; } }" % width)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
    gcc -O1 -fno-omit-frame-pointer -o "$work/gen" "$work/gen.c"
    echo "$work/gen"
}

if [ -n "${BIN:-}" ]; then
    bin=$BIN
    read -ra bin_args <<<"${BIN_ARGS:---serve}"
elif [ -f "$root/examples/demo-service/Makefile" ]; then
    echo "bench: building the demo service (log in $work/demo.log)"
    { make -C "$root/examples/demo-service" BUILD="$work/demo" -j2 objs &&
        make -C "$root/examples/demo-service" BUILD="$work/demo" link OUT="$work/demo-service"; } >"$work/demo.log" 2>&1
    bin=$work/demo-service
    bin_args=(--serve)
else
    bin=$(generated_program)
    bin_args=()
fi

max_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate)
freq=$((max_rate < 20000 ? max_rate : 20000))
cpus=$(nproc)
pids=()
for ((c = 0; c < cpus; c++)); do
    taskset -c "$c" "$bin" "${bin_args[@]}" >/dev/null 2>&1 &
    pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
sleep 1
record=(perf record -g -e cpu-clock:u -F "$freq" -p "$(IFS=,; echo "${pids[*]}")" -o "$work/perf.data" -- sleep "$record_seconds")
echo "bench: ${record[*]}   ($cpus instances of $(basename "$bin"))"
"${record[@]}" 2>&1 | grep -v '^\[ perf record: Woken' || true
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
trap - EXIT

cat "$work/perf.data" >/dev/null # warm the page cache for both readers
stats=$("$hottext" profile "$work/perf.data" --binary "$bin" -o "$work/bench.profile" --json 2>/dev/null)
samples=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["samples"])' <<<"$stats")
in_bin=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["samples_in_binary"])' <<<"$stats")
size=$(du -m "$work/perf.data" | cut -f1)
echo "bench: perf.data: $size MiB, $samples stack samples, $in_bin in $(basename "$bin")"
if [ "$samples" -lt "$min_samples" ]; then
    echo "bench: fewer than $min_samples samples: raise RECORD_SECONDS (the kernel throttles sampling)" >&2
    exit 1
fi

start=$(now_ns)
"$hottext" profile "$work/perf.data" --binary "$bin" -o "$work/bench.profile" 2>/dev/null
hottext_s=$(seconds_since "$start")
start=$(now_ns)
perf script -i "$work/perf.data" >/dev/null 2>&1
perf_s=$(seconds_since "$start")
ratio=$(awk -v p="$perf_s" -v h="$hottext_s" 'BEGIN { printf "%.1f", p / h }')

echo
echo "| reader | command | wall s |"
echo "| --- | --- | --- |"
echo "| perf script $(perf --version | cut -d' ' -f3) | \`perf script -i perf.data > /dev/null\` | $perf_s |"
echo "| hottext profile | \`hottext profile perf.data --binary $(basename "$bin") -o out.profile\` | $hottext_s |"
echo
echo "hottext profile is ${ratio}x faster than perf script ($samples samples, $size MiB)"
[ -n "${KEEP:-}" ] || rm -f "$work/perf.data" "$work/perf.data.old"
