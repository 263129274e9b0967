#!/usr/bin/env bash
# `make demo`: the whole hottext pipeline on the generated demo service.
#
#   1. build the demo's objects once (-ffunction-sections, frame pointers)
#   2. link a baseline with each linker: GNU ld (bfd), gold, lld
#   3. record the bfd baseline with perf, build the profile, order it (--algorithm auto: the
#      layout the profile's model scores best of cdsort, C3 and Pettis-Hansen)
#   4. relink with each linker's input: bfd a linker script, gold a section order file and lld a
#      symbol order file, both with the markers object (lld takes 5 s on a 12 000-line -T script,
#      0.2 s on the same order as a symbol ordering file)
#   5. verify each relinked binary's hot range, then measure baseline (A) and relinked (B)
#      binaries interleaved with `hottext ab`: counters, requests/s, a verdict with a 95 %
#      interval, and every run's checksum must match
#   6. simulate the bfd pair under cachegrind (`hottext ab --simulate`; B with the runtime, so
#      that the 2 MiB-page rows show its huge pages): iTLB and i-cache misses
#      without a PMU
#   7. run the bfd binary with the huge-page runtime as a service, check its pages and checksum,
#      and measure it against the baseline
#   8. one HTML report (hottext report: heat maps before and after, figures, forest plot of the
#      verdicts, huge pages) in BUILD/report.html, and one summary table (summary.py) from the
#      JSON each step left in BUILD
#
# Environment: BUILD (default build/demo), RUNS (measured rounds, at least 6, default 10),
# REQUESTS (per run, default 200000), LINKERS (default "bfd gold lld").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build/demo}
runs=${RUNS:-10}
requests=${REQUESTS:-200000}
linkers=${LINKERS:-bfd gold lld}
hottext=$root/target/release/hottext
mkdir -p "$build"
# The summary reads these; a stale one from an earlier run must not pass for this run's.
rm -f "$build"/ab-*.json "$build"/sim-*.json "$build/order.json" "$build/verify-huge.json" \
    "$build/report.html"

step() { printf '\n== %s\n' "$*"; }
demo_make() { make --no-print-directory -C "$here" BUILD="$build" "$@"; }

[ -x "$hottext" ] || { echo "demo: $hottext is missing: run 'make build' first" >&2; exit 2; }

step "build the demo service's objects"
start=$SECONDS
demo_make -j2 objs >"$build/objs.log" 2>&1 || { tail -20 "$build/objs.log"; exit 1; }
echo "objects ready in $((SECONDS - start)) s"

step "link baselines"
for l in $linkers; do
    demo_make link LINKER="$l" OUT="$build/base-$l" >/dev/null
    size -A "$build/base-$l" | awk -v l="$l" '$1 == ".text" { printf "base-%s: .text %.1f MiB\n", l, $2 / 1048576 }'
done

step "record the bfd baseline with perf"
"$hottext" record -o "$build/perf.data" -- "$build/base-bfd" --requests $((requests * 5)) >/dev/null

step "profile"
"$hottext" profile "$build/perf.data" --binary "$build/base-bfd" -o "$build/demo.profile"

step "order (--algorithm auto)"
"$hottext" order "$build/demo.profile" --binary "$build/base-bfd" --format ld-script -o "$build/hot.ld" \
    --json >"$build/order.json"
"$hottext" order "$build/demo.profile" --binary "$build/base-bfd" --format gold-order \
    -o "$build/hot.gold-order" --markers "$build/markers.o" 2>/dev/null
"$hottext" order "$build/demo.profile" --binary "$build/base-bfd" --format lld-order \
    -o "$build/hot.lld-order" --markers "$build/markers.o" 2>/dev/null

step "relink and verify"
for l in $linkers; do
    case $l in
        gold) extra="$build/markers.o -Wl,--section-ordering-file=$build/hot.gold-order" ;;
        lld) extra="$build/markers.o -Wl,--symbol-ordering-file=$build/hot.lld-order -Wl,--no-warn-symbol-ordering" ;;
        *) extra="-Wl,-T,$build/hot.ld" ;;
    esac
    demo_make link LINKER="$l" OUT="$build/hot-$l" LDEXTRA="$extra" >/dev/null
    echo "-- hot-$l"
    "$hottext" verify --binary "$build/hot-$l"
done

step "measure: baseline (A) and hottext (B) interleaved, $runs rounds, $requests requests a run"
for l in $linkers; do
    echo "-- $l"
    "$hottext" ab --runs "$runs" --warmup 1 \
        -a "$build/base-$l --requests $requests" -b "$build/hot-$l --requests $requests" \
        --metric '([0-9]+) requests/s' --metric-name requests/s --higher-is-better \
        --expect-same 'checksum: ([0-9a-f]+)' --json >"$build/ab-$l.json"
done

# B links the runtime too, so that the 2 MiB-page rows show what its huge pages add; the 4 KiB
# rows are the layout's alone (the runtime changes no instruction of the hot code).
make --no-print-directory -C "$root/runtime" >/dev/null
demo_make link LINKER=bfd OUT="$build/huge-bfd" \
    LDEXTRA="-Wl,-T,$build/hot.ld -L$root/runtime/build/lib -lhottext_auto" >/dev/null
step "simulate: baseline (A) and hottext with the runtime (B) under cachegrind's iTLB and i-cache models (no PMU needed)"
sim_requests=$((requests / 10))
"$hottext" ab --simulate \
    -a "$build/base-bfd --requests $sim_requests" --baseline-a "$build/base-bfd --requests $((sim_requests / 10))" \
    -b "$build/huge-bfd --requests $sim_requests" --baseline-b "$build/huge-bfd --requests $((sim_requests / 10))" \
    --json >"$build/sim-bfd.json"

step "huge pages: the runtime's constructor variant (-lhottext_auto), run as a service"
HOTTEXT_VERBOSE=1 "$build/huge-bfd" --serve >"$build/serve.out" 2>"$build/serve.err" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
sleep 1
grep '^hottext:' "$build/serve.err" || true
# Exit status 1 is "not every page is huge": the demo goes on and the summary counts them.
"$hottext" verify --pid "$server" || echo "demo: part of the hot range is not on huge pages"
"$hottext" verify --pid "$server" --json >"$build/verify-huge.json" || true
kill -TERM "$server"
wait "$server"
trap - EXIT
served=$(sed -n 's/^requests: //p' "$build/serve.out")
want=$("$build/base-bfd" --requests "$served" | grep '^checksum:')
got=$(grep '^checksum:' "$build/serve.out")
[ "$got" = "$want" ] || { echo "demo: checksum of the huge-page service differs: $got, $want" >&2; exit 1; }
echo "service answered $served requests, $got, as the baseline"

echo "-- bfd with huge pages against the bfd baseline"
"$hottext" ab --runs "$runs" --warmup 1 \
    -a "$build/base-bfd --requests $requests" -b "$build/huge-bfd --requests $requests" \
    --metric '([0-9]+) requests/s' --metric-name requests/s --higher-is-better \
    --expect-same 'checksum: ([0-9a-f]+)' --json >"$build/ab-huge.json"

step "report: one HTML page with the heat maps, the figures and the verdicts"
"$hottext" report --title "hottext demo" --profile "$build/demo.profile" \
    --before "$build/base-bfd" --after "$build/huge-bfd" \
    "$build/order.json" "$build/ab-bfd.json" "$build/sim-bfd.json" "$build/ab-huge.json" \
    "$build/verify-huge.json" -o "$build/report.html"

python3 "$here/summary.py" "$build" $linkers
echo
echo "every figure above, run by run: $build/ab-*.json, $build/order.json, $build/verify-huge.json"
echo "the report, to open in a browser: $build/report.html"
