#!/usr/bin/env bash
# `make bench-nginx`: nginx 1.22 (Debian source, its own configure) relinked through the
# documented path (README.md: record, profile, order, link with the ld script and the runtime),
# beside lld's CDSort on the same profile and BOLT 19 on a plain recording, in one run:
#
#   1. build.sh: nginx with -ffunction-sections -fno-omit-frame-pointer, --emit-relocs
#   2. setup_site.sh: static files, gzip and a reverse proxy; one master and one worker
#   3. record under LOAD_SECONDS of load: `hottext record` (stacks) and `perf record` (BOLT -nl)
#   4. configurations, relinked from the same objects by nginx's own link rule:
#        hot          hottext's default order, GNU ld script, -lhottext_auto (huge pages)
#        hot-4k       the same order without the runtime (4 KiB pages)
#        lld-cdsort   lld 19 orders hottext's call edges itself (--call-graph-profile-sort=cdsort)
#        bolt         BOLT 19 -reorder-functions=cdsort on the baseline (plain samples, -nl)
#        bolt-keepnops  the same with -keep-nops: BOLT deletes the NOPs gcc pads loops and jumps
#                     with, which packs code as much as any order does (docs/build.md's -falign-*)
#   5. `hottext verify --binary` and `--pid` on hot (its hot 2 MiB page must be huge)
#   6. `hottext ab --simulate` in server mode, each configuration against the baseline, with a
#      request-count load; `hot` also at several hot-range offsets
#   7. with MEASURE=1 (default), timed `hottext ab` in server mode: requests/s
#
# Environment: BENCH_DIR (default /tmp/hottext-nginx), PORT (default 18080), LOAD_SECONDS (30),
# SIM_REQUESTS (requests of each kind in a simulated run, 300), REQUESTS (timed, 20000),
# RUNS (timed rounds, 10), OFFSETS ("0 64 128 192"), MEASURE (1), SIMULATE (1), REUSE (0: with 1,
# the binaries of an earlier run in BENCH_DIR are measured again, from step 5 on, e.g. to time
# them once the machine is quiet: SIMULATE=0 REUSE=1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${BENCH_DIR:-/tmp/hottext-nginx}
port=${PORT:-18080}
load_seconds=${LOAD_SECONDS:-30}
sim_requests=${SIM_REQUESTS:-300}
requests=${REQUESTS:-20000}
runs=${RUNS:-10}
offsets=${OFFSETS:-0 64 128 192}
hottext=$root/target/release/hottext
llvm=/usr/lib/llvm-19/bin
step() { printf '\n== %s  (%s)\n' "$*" "$(date +%T)"; }

[ -x "$hottext" ] || { echo "bench-nginx: $hottext is missing: run 'make build' first" >&2; exit 2; }
[ -f "$root/runtime/build/lib/libhottext_auto.a" ] ||
    { echo "bench-nginx: the runtime is missing: run 'make runtime' first" >&2; exit 2; }

step "build nginx"
bash "$here/build.sh"
src=$dir/src
out=$dir/bin
site=$dir/site
mkdir -p "$out"
bash "$here/setup_site.sh" "$site" "$port" "$src"
serve() { echo "$1 -p $site -c conf/nginx.conf"; }
ready="curl -sf -o /dev/null http://127.0.0.1:$port/"
relink() { # NAME EXTRA-LINK-FLAGS: nginx's own link rule with more flags
    local name=$1
    shift
    rm -f "$src/objs/nginx"
    make -s -C "$src" -f objs/Makefile objs/nginx LINK="cc $*" >"$out/$name.link.log" 2>&1 ||
        { tail -20 "$out/$name.link.log"; exit 1; }
    mv "$src/objs/nginx" "$out/$name"
}
if [ "${REUSE:-0}" = 1 ] && [ -x "$out/bolt-keepnops" ]; then
    echo "reusing the binaries in $out"
else
relink base -Wl,--emit-relocs

step "record ${load_seconds}s of load: stacks for hottext, plain samples for BOLT"
under_load() { # RECORDER...: runs the recorder around the base server while the load runs
    "$@" >"$out/record.log" 2>&1 &
    local rec=$!
    for _ in $(seq 100); do $ready && break; sleep 0.1; done
    local end=$((SECONDS + load_seconds))
    while [ $SECONDS -lt $end ]; do "$site/load.sh" 1000 >/dev/null; done
    wait "$rec"
}
under_load "$hottext" record -o "$out/perf.data" --duration $((load_seconds + 3)) -- $(serve "$out/base")
"$hottext" profile "$out/perf.data" --binary "$out/base" -o "$out/nginx.profile" 2>"$out/profile.log"
cat "$out/profile.log"
plain_record() { # perf stops at SIGINT after the load; timeout then exits 124
    timeout -s INT $((load_seconds + 3)) perf record -q -e cpu-clock -o "$out/bolt.data" -- \
        $(serve "$out/base") || [ $? = 124 ]
}
under_load plain_record
"$llvm/perf2bolt" -nl -p "$out/bolt.data" -o "$out/bolt.fdata" "$out/base" >"$out/perf2bolt.log" 2>&1 ||
    { tail -20 "$out/perf2bolt.log"; exit 1; }

step "order and relink"
rt="-L$root/runtime/build/lib -lhottext_auto"
"$hottext" order "$out/nginx.profile" --binary "$out/base" --format ld-script -o "$out/hot.ld" \
    2>"$out/order.log"
cat "$out/order.log"
"$hottext" order "$out/nginx.profile" --binary "$out/base" --format lld-cgprofile -o "$out/cg.txt" 2>/dev/null
relink hot -Wl,--emit-relocs "-Wl,-T,$out/hot.ld" $rt
relink hot-4k -Wl,--emit-relocs "-Wl,-T,$out/hot.ld"
for offset in $offsets; do
    "$hottext" order "$out/nginx.profile" --binary "$out/base" --format ld-script \
        --hot-offset "$offset" -o "$out/hot-at-$offset.ld" 2>/dev/null
    relink "hot-at-$offset" -Wl,--emit-relocs "-Wl,-T,$out/hot-at-$offset.ld" $rt
done
relink lld-cdsort -fuse-ld=lld -B"$llvm" -Wl,--emit-relocs \
    "-Wl,--call-graph-ordering-file=$out/cg.txt" -Wl,--call-graph-profile-sort=cdsort
"$llvm/llvm-bolt" "$out/base" -o "$out/bolt" -data="$out/bolt.fdata" -reorder-functions=cdsort \
    >"$out/bolt.log" 2>&1 || { tail -20 "$out/bolt.log"; exit 1; }
"$llvm/llvm-bolt" "$out/base" -o "$out/bolt-keepnops" -data="$out/bolt.fdata" \
    -reorder-functions=cdsort -keep-nops >"$out/bolt-keepnops.log" 2>&1 ||
    { tail -20 "$out/bolt-keepnops.log"; exit 1; }
relink base -Wl,--emit-relocs # objs/nginx is the plain build again
fi

step "verify: the hot range and its huge page"
"$hottext" verify --binary "$out/hot"
"$(serve "$out/hot" | cut -d' ' -f1)" -p "$site" -c conf/nginx.conf &
server=$!
for _ in $(seq 100); do $ready && break; sleep 0.1; done
"$site/load.sh" 200 >/dev/null
"$hottext" verify --pid "$(pgrep -P $server | head -1 || echo $server)" || true
"$hottext" verify --pid "$server"
kill $server
wait $server || true

configs="hot hot-4k lld-cdsort bolt bolt-keepnops"
[ "${SIMULATE:-1}" = 1 ] && step "simulate each configuration against the baseline (server mode, $sim_requests requests of each kind)"
simulate() { # NAME B-BINARY [ab options]
    local name=$1 b=$2
    shift 2
    "$hottext" ab --simulate --json "$@" \
        --server-a "$(serve "$out/base")" --server-b "$(serve "$b")" --ready "$ready" \
        --load "$site/load.sh $sim_requests" --metric 'requests: ([0-9]+)' --metric-name request \
        --ready-timeout 120 >"$out/sim-$name.json"
    echo "  $name simulated"
}
if [ "${SIMULATE:-1}" = 1 ]; then
    for c in $configs; do
        simulate "$c" "$out/$c"
    done
    simulate hot-offsets "$out/hot-at-{offset}" --offsets "$(echo "$offsets" | tr ' ' ,)"
fi

if [ "${MEASURE:-1}" = 1 ]; then
    step "time each configuration against the baseline: $runs rounds, $requests requests of each kind"
    for c in $configs; do
        "$hottext" ab --runs "$runs" --warmup 1 \
            --server-a "$(serve "$out/base")" --server-b "$(serve "$out/$c")" --ready "$ready" \
            --load "$site/load.sh $requests" \
            --metric 'requests/s: ([0-9.]+)' --metric-name requests/s --higher-is-better \
            --json >"$out/ab-$c.json"
        echo "  $c timed"
    done
fi
python3 "$root/bench/demo/table.py" "$out" $configs hot-offsets
