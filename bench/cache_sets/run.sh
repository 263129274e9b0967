#!/usr/bin/env bash
# Does `auto`'s cache-set model (crates/hottext/src/layout/cache_sets.rs) rank placements as the
# simulation does, and does `auto` ever pick an alignment the simulation shows worse by more than
# the offset spread (issue 36's target)?
#
#   1. the demo service (examples/demo-service; smaller than bench/demo's by default, see DEMO)
#      compiled once, a baseline linked by GNU ld, one recording and profile
#   2. `hottext order --algorithm auto`: its algorithm and its chosen placement (alignment and
#      start padding), with every placement's modelled L1i figure
#   3. the same algorithm's order under fixed placements (CONFIGS: as-compiled or cache-line
#      alignment at start paddings 0-48 B), each linked at every hot-range offset (OFFSETS,
#      whole lines, which the model cannot see: they only rename the sets)
#   4. per placement, `hottext ab --simulate --offsets` against the baseline: L1i misses per
#      million instructions at each offset (cachegrind, exact counts: a busy machine is fine)
#   5. bench/cache_sets/agreement.py: the model's figure beside the simulated median and spread,
#      Kendall's tau as for PostgreSQL's run F (bench/postgres/model_check.py), and the check
#
# Environment: BUILD (default build/cache-sets), DEMO (gen.py's size, default
# "FUNCTIONS=10000 TEXT_MB=16 UNITS=16"; "" for bench/demo's 40 000 functions), SIM_REQUESTS
# (default 20000; the baseline runs a tenth), RECORD_REQUESTS (the recorded run, default 4000000:
# 200 000 gave only 443 samples, too few for the model), OFFSETS (default "0 64 128 192"), CONFIGS
# (default "compiled+0 compiled+32 lines+0 lines+32"; each takes about 10 minutes of simulation
# on a busy 2-vCPU machine). A rerun keeps the links and simulations whose scripts did not change.
#   bash bench/cache_sets/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build/cache-sets}
demo=${DEMO-FUNCTIONS=10000 TEXT_MB=16 UNITS=16}
sim_requests=${SIM_REQUESTS:-20000}
record_requests=${RECORD_REQUESTS:-4000000}
offsets=${OFFSETS:-0 64 128 192}
configs=${CONFIGS:-compiled+0 compiled+32 lines+0 lines+32}
hottext=$root/target/release/hottext
mkdir -p "$build"
step() { printf '\n== %s  (%s)\n' "$*" "$(date +%T)"; }
# shellcheck disable=SC2086 # $demo is a list of make variables
demo_make() { make --no-print-directory -C "$root/examples/demo-service" BUILD="$build" $demo "$@"; }

[ -x "$hottext" ] || { echo "cache_sets: $hottext is missing: run 'make build' first" >&2; exit 2; }
for tool in valgrind perf; do
    command -v "$tool" >/dev/null || {
        echo "cache_sets: $tool is missing: apt-get install valgrind linux-perf" >&2
        exit 2
    }
done

step "objects, baseline, recording"
demo_make -j2 objs >"$build/objs.log" 2>&1 || { tail -20 "$build/objs.log"; exit 1; }
demo_make link LINKER=bfd OUT="$build/base" >/dev/null
if [ ! -s "$build/demo.profile" ]; then
    "$hottext" record -o "$build/perf.data" -- "$build/base" --requests "$record_requests" >/dev/null
    "$hottext" profile "$build/perf.data" --binary "$build/base" -o "$build/demo.profile"
fi

step "auto's choice"
order() { "$hottext" order "$build/demo.profile" --binary "$build/base" --format ld-script "$@"; }
order -o "$build/auto.ld" --json >"$build/auto.json"
algorithm=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["algorithm"])' "$build/auto.json")
echo "  auto chose $algorithm; placements in $build/auto.json"

step "placements of the $algorithm order at offsets $offsets"
for c in $configs; do
    rule=${c%+*} padding=${c#*+}
    align=()
    [ "$rule" = lines ] && align=(--align-cache-lines)
    for offset in $offsets; do
        at=$build/$c-at-$offset
        order --algorithm "$algorithm" "${align[@]}" --hot-offset $((padding + offset)) \
            -o "$at.ld.new" --json >"$build/order-$c-at-$offset.json" 2>/dev/null
        # A script as before keeps its binary, and so its simulation (a rerun resumes).
        if [ -x "$at" ] && cmp -s "$at.ld.new" "$at.ld"; then
            rm "$at.ld.new"
            continue
        fi
        mv "$at.ld.new" "$at.ld"
        rm -f "$build/sim-$c.json"
        demo_make link LINKER=bfd OUT="$at" LDEXTRA="-Wl,-T,$at.ld" >/dev/null
    done
    want=$("$build/base" --requests 1000 2>/dev/null | grep '^checksum:')
    got=$("$build/$c-at-0" --requests 1000 2>/dev/null | grep '^checksum:')
    [ "$got" = "$want" ] || { echo "cache_sets: $c computes $got, the baseline $want" >&2; exit 1; }
    echo "  $c linked"
done

step "simulate each placement against the baseline ($sim_requests requests, net of $((sim_requests / 10)))"
for c in $configs; do
    if [ -s "$build/sim-$c.json" ]; then
        echo "  $c simulated before, its binaries unchanged"
        continue
    fi
    "$hottext" ab --simulate --json --offsets "$(echo "$offsets" | tr ' ' ,)" \
        -a "$build/base --requests $sim_requests" --baseline-a "$build/base --requests $((sim_requests / 10))" \
        -b "$build/$c-at-{offset} --requests $sim_requests" \
        --baseline-b "$build/$c-at-{offset} --requests $((sim_requests / 10))" \
        >"$build/sim-$c.json.new"
    mv "$build/sim-$c.json.new" "$build/sim-$c.json"
    echo "  $c simulated"
done
# shellcheck disable=SC2086 # one argument per configuration
python3 "$here/agreement.py" "$build" "$hottext" $configs
