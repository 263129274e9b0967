#!/usr/bin/env bash
# `make bench-demo`: the demo service's layouts beside the peers', in one run, on one profile.
#
#   1. the demo's objects (examples/demo-service, 64 MiB of text) and a baseline linked by GNU ld
#      with --emit-relocs (BOLT needs the relocations; every configuration carries the flag)
#   2. one recording with call chains for hottext, one without for BOLT (perf2bolt -nl)
#   3. configurations, each from the same objects:
#        c3          hottext --algorithm c3, GNU ld script
#        auto        hottext's default (--algorithm auto), GNU ld script
#        auto-lines  auto with --align-cache-lines
#        lld-cdsort  lld 19 orders hottext's call edges itself (--call-graph-profile-sort=cdsort)
#        bolt-fn     BOLT 19 -reorder-functions=cdsort on the baseline
#        bolt-keepnops  the same with -keep-nops: the demo pads its functions' cold tails with
#                    NOPs (gen.py), which BOLT deletes (3 KiB functions become 300 B); real code's
#                    cold paths are not NOPs, so this is the comparison that carries over
#   4. per configuration against the baseline: `hottext ab --simulate` (cachegrind's L1 iTLB,
#      L2 iTLB and L1i models, net of a short baseline run), and with MEASURE=1 (default) a timed
#      `hottext ab` of requests/s; `auto` is also simulated at four hot-range offsets
#      (`order --hot-offset`) to show how much of its i-cache figure is set-conflict luck
#   5. bench/demo/table.py: one table (misses per million instructions as B/A, requests/s B/A)
#
# Environment: BUILD (default build/demo-bench), REQUESTS (timed runs, default 200000),
# SIM_REQUESTS (simulated runs, default 20000; the baseline run does a tenth), RUNS (timed
# rounds, default 10), MEASURE (1), OFFSETS (default "0 64 128 192").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build/demo-bench}
requests=${REQUESTS:-200000}
sim_requests=${SIM_REQUESTS:-20000}
runs=${RUNS:-10}
offsets=${OFFSETS:-0 64 128 192}
hottext=$root/target/release/hottext
bolt_bin=/usr/lib/llvm-19/bin
mkdir -p "$build"
step() { printf '\n== %s  (%s)\n' "$*" "$(date +%T)"; }
demo_make() { make --no-print-directory -C "$root/examples/demo-service" BUILD="$build" "$@"; }
relocs=-Wl,--emit-relocs

[ -x "$hottext" ] || { echo "bench-demo: $hottext is missing: run 'make build' first" >&2; exit 2; }
for tool in "$bolt_bin/llvm-bolt" "$bolt_bin/perf2bolt" "$bolt_bin/ld.lld" valgrind perf; do
    command -v "$tool" >/dev/null || {
        echo "bench-demo: $tool is missing: apt-get install bolt-19 lld-19 valgrind linux-perf" >&2
        exit 2
    }
done

step "objects and the baseline"
demo_make -j2 objs >"$build/objs.log" 2>&1 || { tail -20 "$build/objs.log"; exit 1; }
demo_make link LINKER=bfd OUT="$build/base" LDEXTRA="$relocs" >/dev/null

step "record: call chains for hottext, plain samples for BOLT"
"$hottext" record -o "$build/perf.data" -- "$build/base" --requests $((requests * 5)) >/dev/null
"$hottext" profile "$build/perf.data" --binary "$build/base" -o "$build/demo.profile"
perf record -q -e cpu-clock -o "$build/bolt.data" -- "$build/base" --requests $((requests * 5)) \
    >/dev/null 2>"$build/perf-bolt.log"
"$bolt_bin/perf2bolt" -nl -p "$build/bolt.data" -o "$build/bolt.fdata" "$build/base" \
    >"$build/perf2bolt.log" 2>&1 || { tail -20 "$build/perf2bolt.log"; exit 1; }

step "orders and links"
order() { "$hottext" order "$build/demo.profile" --binary "$build/base" "$@"; }
order --algorithm c3 --format ld-script -o "$build/c3.ld" 2>/dev/null
order --format ld-script -o "$build/auto.ld" --json >"$build/order-auto.json"
order --format ld-script --align-cache-lines -o "$build/auto-lines.ld" 2>/dev/null
order --format lld-cgprofile -o "$build/cg.txt" 2>/dev/null
for offset in $offsets; do
    order --format ld-script --hot-offset "$offset" -o "$build/auto-at-$offset.ld" 2>/dev/null
    demo_make link LINKER=bfd OUT="$build/auto-at-$offset" \
        LDEXTRA="$relocs -Wl,-T,$build/auto-at-$offset.ld" >/dev/null
done
for c in c3 auto auto-lines; do
    demo_make link LINKER=bfd OUT="$build/$c" LDEXTRA="$relocs -Wl,-T,$build/$c.ld" >/dev/null
done
demo_make link LINKER=lld OUT="$build/lld-cdsort" LDEXTRA="$relocs \
    -Wl,--call-graph-ordering-file=$build/cg.txt -Wl,--call-graph-profile-sort=cdsort" >/dev/null
"$bolt_bin/llvm-bolt" "$build/base" -o "$build/bolt-fn" -data="$build/bolt.fdata" \
    -reorder-functions=cdsort >"$build/bolt.log" 2>&1 || { tail -20 "$build/bolt.log"; exit 1; }
"$bolt_bin/llvm-bolt" "$build/base" -o "$build/bolt-keepnops" -data="$build/bolt.fdata" \
    -reorder-functions=cdsort -keep-nops >"$build/bolt-keepnops.log" 2>&1 ||
    { tail -20 "$build/bolt-keepnops.log"; exit 1; }
configs="c3 auto auto-lines lld-cdsort bolt-fn bolt-keepnops"
for c in $configs; do
    want=$("$build/base" --requests 1000 | grep '^checksum:')
    got=$("$build/$c" --requests 1000 | grep '^checksum:')
    [ "$got" = "$want" ] || { echo "bench-demo: $c computes $got, the baseline $want" >&2; exit 1; }
done

step "simulate each configuration against the baseline ($sim_requests requests, net of $((sim_requests / 10)))"
simulate() { # NAME B-BINARY [ab options]
    local name=$1 b=$2
    shift 2
    "$hottext" ab --simulate --json "$@" \
        -a "$build/base --requests $sim_requests" --baseline-a "$build/base --requests $((sim_requests / 10))" \
        -b "$b --requests $sim_requests" --baseline-b "$b --requests $((sim_requests / 10))" \
        >"$build/sim-$name.json"
    echo "  $name simulated"
}
for c in $configs; do
    simulate "$c" "$build/$c"
done
simulate auto-offsets "$build/auto-at-{offset}" --offsets "$(echo "$offsets" | tr ' ' ,)"

if [ "${MEASURE:-1}" = 1 ]; then
    step "time each configuration against the baseline: $runs rounds, $requests requests a run"
    for c in $configs; do
        "$hottext" ab --runs "$runs" --warmup 1 \
            -a "$build/base --requests $requests" -b "$build/$c --requests $requests" \
            --metric '([0-9]+) requests/s' --metric-name requests/s --higher-is-better \
            --expect-same 'checksum: ([0-9a-f]+)' --json >"$build/ab-$c.json"
        echo "  $c timed"
    done
fi
python3 "$here/table.py" "$build" $configs auto-offsets
