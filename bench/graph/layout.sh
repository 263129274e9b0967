#!/usr/bin/env bash
# bench/graph/layout.sh: issue 32's target 2 in one command: on the tail-call program
# (gen_tailcall.py), hottext's default layout against BOLT 19's function order, simulated
# (`hottext ab --simulate`: cachegrind's L1 iTLB, L2 iTLB and L1i models, net of a short run).
#
#   1. tailcall.o (gcc 12 -O2 -ffunction-sections -fno-omit-frame-pointer), linked by GNU ld with
#      --emit-relocs (BOLT needs them) as `base`
#   2. hottext: `hottext record` of base, `hottext profile`, `hottext order` (default algorithm)
#      as a GNU ld script, relinked as `hot`
#   3. BOLT: a recording without call chains, perf2bolt -nl (no LBR here), llvm-bolt
#      -reorder-functions=cdsort -keep-nops on base, as `bolt` (bench/demo/run.sh's bolt-keepnops:
#      the program's rare blocks are NOPs, which BOLT would delete and real code's are not)
#   4. the three compute the same checksum; then `ab --simulate` of base against each, and of
#      bolt (A) against hot (B): the bolt/hot rows' L1 iTLB B/A is the target's figure (at most 1)
#   4b. `truth`: hottext's order of the same profile with its call lines replaced by callgrind's
#      exact graph (callgrind_edges.py on base, a tenth of the workload), scaled to the profile's
#      call weight: what hottext's layout reaches once its graph is right (item 2's fix)
#   4c. `boltorder`: BOLT's own function order (bolt's hot text by address) relinked by GNU ld
#      through hottext's script: what BOLT's order gives without BOLT's way of emitting code
#   5. steps 2 to 4c again, ROUNDS times in all (new recordings each time; the orders, so the
#      ratio, vary with the samples), base against each only in the first round
#
# Environment: BUILD (default build/graph-layout), REQUESTS (recorded runs, default 20000000),
# SIM_REQUESTS (simulated runs, default 2000000; the net-of baseline run does a tenth), FREQ
# (default 20000), ROUNDS (default 3), HOTTEXT (default the release binary of
# CARGO_TARGET_DIR or target/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build/graph-layout}
requests=${REQUESTS:-20000000}
sim=${SIM_REQUESTS:-2000000}
freq=${FREQ:-20000}
rounds=${ROUNDS:-3}
hottext=${HOTTEXT:-${CARGO_TARGET_DIR:-$root/target}/release/hottext}
bolt_bin=/usr/lib/llvm-19/bin
mkdir -p "$build"
cd "$build"
step() { printf '== %s  (%s)\n' "$*" "$(date +%T)" >&2; }
for tool in "$hottext" "$bolt_bin/llvm-bolt" "$bolt_bin/perf2bolt" valgrind perf gcc-12; do
    command -v "$tool" >/dev/null || {
        echo "graph-layout: $tool is missing (apt-get install bolt-19 valgrind linux-perf gcc-12)" >&2
        exit 2
    }
done

step "build"
python3 "$here/gen_tailcall.py" >tailcall.c
gcc-12 -O2 -ffunction-sections -fno-omit-frame-pointer -Wall -c tailcall.c -o tailcall.o
link() { gcc-12 -Wl,--emit-relocs -o "$1" tailcall.o "${@:2}"; }
link base
valgrind --tool=callgrind --separate-callers=1 --separate-recs=2 --callgrind-out-file=callgrind.out \
    ./base $((requests / 10)) >/dev/null 2>callgrind.log
python3 "$here/callgrind_edges.py" callgrind.out base >truth.edges 2>truth.log

simulate() { # NAME A B
    "$hottext" ab --simulate --json -a "./$2 $sim" --baseline-a "./$2 $((sim / 10))" \
        -b "./$3 $sim" --baseline-b "./$3 $((sim / 10))" >"sim-$1.json"
}
want=$(./base 1000)
# Each round records afresh: both orders depend on which instants were sampled, so one round's
# ratio is one draw; base against each layout is simulated in the first round only.
for round in $(seq 1 "$rounds"); do
    step "round $round: hottext: record, profile, order (default), relink"
    "$hottext" record --frequency "$freq" -o fp.data -- ./base "$requests" >record.log 2>&1
    "$hottext" profile fp.data --binary base -o tailcall.profile 2>profile.log
    "$hottext" order tailcall.profile --binary base --format ld-script -o hot.ld --json >order.json
    link hot -Wl,-T,hot.ld
    python3 - tailcall.profile truth.edges >truth.profile <<'PY'
import sys
profile, truth = sys.argv[1], sys.argv[2]
lines = open(profile).read().splitlines()
total = sum(int(l.split()[3]) for l in lines if l.startswith("call "))
edges = [l.split() for l in open(truth) if l.startswith("call ")]
scale = total / sum(int(e[3]) for e in edges)
kept = [l for l in lines if not l.startswith(("call ", "site "))]
calls = sorted((e[1], e[2], max(1, round(int(e[3]) * scale))) for e in edges)
print("\n".join(kept + [f"call {a} {b} {w}" for a, b, w in calls]))
PY
    "$hottext" order truth.profile --binary base --format ld-script -o truth.ld 2>order-truth.log
    link truth -Wl,-T,truth.ld

    step "round $round: BOLT 19: record without call chains, perf2bolt -nl, llvm-bolt -reorder-functions=cdsort -keep-nops"
    perf record -q -e cpu-clock:u -F "$freq" -o bolt.data -- ./base "$requests" >/dev/null 2>perf-bolt.log
    "$bolt_bin/perf2bolt" -nl -p bolt.data -o bolt.fdata base >perf2bolt.log 2>&1 || { tail -20 perf2bolt.log; exit 1; }
    "$bolt_bin/llvm-bolt" base -o bolt -data=bolt.fdata -reorder-functions=cdsort -keep-nops >bolt.log 2>&1 ||
        { tail -20 bolt.log; exit 1; }
    # boltorder: BOLT's function order (its hot text, by address), relinked by GNU ld through
    # hottext's script: tells BOLT's order from the way BOLT emits the code.
    nm -n --defined-only bolt | awk '$3 == "__hot_start" {on = 1; next} $3 == "__hot_end" {on = 0}
        on && $2 ~ /^[tT]$/ {print $3}' >bolt.order
    python3 - hot.ld bolt.order >boltorder.ld <<'PY'
import sys
script, order = open(sys.argv[1]).read(), open(sys.argv[2]).read().split()
head, rest = script.split("    __hot_start = .;\n", 1)
tail = rest[rest.index("    __hot_end"):]
rules = "".join(f"    *(.text.{n} .text.hot.{n} .text.startup.{n})\n" for n in order)
print(head + "    __hot_start = .;\n" + rules + tail, end="")
PY
    link boltorder -Wl,-T,boltorder.ld
    for b in hot bolt truth boltorder; do
        got=$(./$b 1000)
        [ "$got" = "$want" ] || { echo "graph-layout: $b computes $got, base $want" >&2; exit 1; }
    done

    step "round $round: simulate ($sim requests, net of $((sim / 10)))"
    if [ "$round" = 1 ]; then
        simulate base-hot base hot
        simulate base-bolt base bolt
    fi
    simulate "bolt-hot-$round" bolt hot
    simulate "bolt-truth-$round" bolt truth
    simulate "bolt-boltorder-$round" bolt boltorder
done
python3 - "$build" "$rounds" <<'PY'
import json, sys
FIGURES = [("itlb-l1-misses-per-m", "L1 iTLB"), ("itlb-l2-misses-per-m", "L2 iTLB"), ("icache-misses-per-m", "L1i")]
print("| A | B | " + " | ".join(f"{label} per M instr A / B (B/A)" for _, label in FIGURES) + " |")
print("| --- | --- |" + " --- |" * len(FIGURES))
rounds = int(sys.argv[2])
names = [f"bolt-{c}-{r}" for c in ("hot", "truth", "boltorder") for r in range(1, rounds + 1)]
for name in ["base-hot", "base-bolt"] + names:
    report = json.load(open(f"{sys.argv[1]}/sim-{name}.json"))
    rows = {r["key"]: r for r in report["rows"]}
    cells = []
    for key, _ in FIGURES:
        r = rows[key]
        ratio = r["ratio"]["median"] if r["ratio"] else float("nan")
        cells.append(f"{r['a']['median']:,.1f} / {r['b']['median']:,.1f} ({ratio:.3f})")
    a, b = name.split("-")[:2]
    label = f" (round {name.split('-')[2]})" if name.count("-") == 2 else " (round 1)"
    print(f"| {a} | {b}{label} | " + " | ".join(cells) + " |")
PY
echo "hottext commit $(git -C "$root" rev-parse --short HEAD); files in $build" >&2
