#!/usr/bin/env bash
# bench/graph/run.sh: hottext's call graph against the exact one (issue 32), one table.
#
#   1. builds each program (PROGRAMS, default "tailcall tailcall-nosib demo postgres"):
#        tailcall  gen_tailcall.py, gcc 12 -O2 -ffunction-sections -fno-omit-frame-pointer; the
#                  sibling calls are checked to be jmps with objdump
#        tailcall-nosib  the same source with -fno-optimize-sibling-calls (every tail call a
#                  `call`): the control, the same logical graph without jumps
#        demo      examples/demo-service as `make demo` builds it (-Og, 64 MiB of text), GNU ld
#        postgres  PostgreSQL 15 (clang 19, frame pointers) under pgbench select-only: postgres.sh
#   2. the truth: the program's workload under valgrind --tool=callgrind --separate-callers=1
#      --separate-recs=2, converted by callgrind_edges.py (README.md: what it counts and why);
#      PostgreSQL's is summed over its backend processes (postgres.sh)
#   3. the same workload recorded in each mode (MODES, default "fp dwarf none"), run REPEAT
#      times in a row for more samples (callgrind's count is exact after one run; the demo's
#      graph has a long tail that sampling covers slowly, see compare.py's floor; postgres: one
#      pgbench run, attached to the postmaster):
#        fp     `hottext record` (frame-pointer stacks)
#        dwarf  perf record --call-graph dwarf,2048 (2 KiB of stack: the first frames are enough)
#        none   perf record without -g (samples only)
#      and read by hottext (`hottext profile`) and by perf itself (perf_edges.py: perf script's
#      frames, same edge definition, no repair); a reader that fails is a row with its exit status
#      and message, not a figure; `none` is also read by BOLT 19 (perf2bolt -nl, the call graph
#      llvm-bolt builds to order functions, bolt_edges.py): the binaries are linked with
#      --emit-relocs, without which llvm-bolt does not reorder functions
#   4. compare.py on each reading: weighted overlap, top-50 recall, top-50 agreement, self overlap,
#      caller attribution, and the floors sampling noise sets to overlap and self
#
# Environment: BUILD (default build/graph), FREQ (sampling Hz, default 20000), TAIL_REQUESTS
# (default 20000000), TAIL_REPEAT (1), DEMO_REQUESTS (default 500000), DEMO_REPEAT (5), HOTTEXT
# (default the release binary of CARGO_TARGET_DIR or target/), BOLT_BIN (llvm-bolt's directory,
# default /usr/lib/llvm-19/bin), PG_DIR, PG_TX, PG_PORT (see postgres.sh).  Leaves every file in BUILD/<program>/; the table is also in BUILD/table.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build/graph}
programs=${PROGRAMS:-tailcall tailcall-nosib demo postgres}
modes=${MODES:-fp dwarf none}
freq=${FREQ:-20000}
tail_requests=${TAIL_REQUESTS:-20000000}
demo_requests=${DEMO_REQUESTS:-500000}
tail_repeat=${TAIL_REPEAT:-1}
demo_repeat=${DEMO_REPEAT:-5}
hottext=${HOTTEXT:-${CARGO_TARGET_DIR:-$root/target}/release/hottext}
bolt_bin=${BOLT_BIN:-/usr/lib/llvm-19/bin}
mkdir -p "$build"
table=$build/table.md

tools=("$hottext" valgrind perf gcc-12 objdump python3)
case " $modes " in *" none "*) tools+=("$bolt_bin/perf2bolt" "$bolt_bin/llvm-bolt") ;; esac
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "bench-graph: $tool is missing (BOLT: apt-get install bolt-19)" >&2; exit 2; }
done
step() { printf '== %s  (%s)\n' "$*" "$(date +%T)" >&2; }
# shellcheck source=bench/graph/postgres.sh
. "$here/postgres.sh"

# prepare_PROGRAM DIR: builds the program into DIR and sets bin (the binary), cmd (its workload)
# and repeat (how many times perf records it).
# prepare_tailcall DIR [EXTRA-CFLAGS JMPS]: JMPS is how many jmps into a mid_k route must have.
prepare_tailcall() {
    local dir=$1 extra=${2:-} want=${3:-80} jumps
    python3 "$here/gen_tailcall.py" >"$dir/tailcall.c"
    # shellcheck disable=SC2086 # extra is a list of flags
    gcc-12 -O2 -ffunction-sections -fno-omit-frame-pointer $extra -Wall -Wl,--emit-relocs \
        -o "$dir/tailcall" "$dir/tailcall.c"
    # The point of the program: route's cases and half the handlers are jmps, not calls.
    jumps=$(objdump -d --no-show-raw-insn "$dir/tailcall" | awk '/<route>:/,/^$/' | grep -c 'jmp .*<mid_' || true)
    [ "$jumps" -eq "$want" ] || { echo "bench-graph: route has $jumps jmps into mid_k, not $want" >&2; exit 1; }
    bin=$dir/tailcall
    cmd=("$bin" "$tail_requests")
    repeat=$tail_repeat
    truth=truth_command
    recorder=record_command
}

prepare_demo() {
    local dir=$1
    make --no-print-directory -C "$root/examples/demo-service" BUILD="$dir" -j2 objs >"$dir/objs.log" 2>&1 ||
        { tail -20 "$dir/objs.log"; exit 1; }
    make --no-print-directory -C "$root/examples/demo-service" BUILD="$dir" link LINKER=bfd \
        LDEXTRA=-Wl,--emit-relocs OUT="$dir/demo" >/dev/null
    bin=$dir/demo
    cmd=("$bin" --requests "$demo_requests")
    repeat=$demo_repeat
    truth=truth_command
    recorder=record_command
}

# The truth and the recordings of a program that is one command (cmd, run repeat times in a row
# for perf); a prepare_ function sets truth and recorder to these or to its own.
truth_command() {
    step "$program: the truth under callgrind: ${cmd[*]}"
    valgrind --tool=callgrind --separate-callers=1 --separate-recs=2 \
        --callgrind-out-file="$dir/callgrind.out" -- "${cmd[@]}" >"$dir/callgrind.stdout" 2>"$dir/callgrind.log"
    python3 "$here/callgrind_edges.py" "$dir/callgrind.out" "$bin" >"$dir/truth.edges" 2>"$dir/truth.log"
}

# record_command MODE DATA: the command's runs recorded in MODE; perf's messages in MODE.record.log.
record_command() {
    local mode=$1 data=$2 recorded
    # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
    recorded=(bash -c 'for ((i = 0; i < $0; i++)); do "$@" >/dev/null || exit; done' "$repeat" "${cmd[@]}")
    case $mode in
        fp) "$hottext" record --frequency "$freq" -o "$data" -- "${recorded[@]}" ;;
        dwarf) perf record -q -e cpu-clock:u -F "$freq" --call-graph dwarf,2048 -o "$data" -- "${recorded[@]}" ;;
        none) perf record -q -e cpu-clock:u -F "$freq" -o "$data" -- "${recorded[@]}" ;;
        *) echo "bench-graph: unknown mode $mode (fp, dwarf, none)" >&2; exit 2 ;;
    esac >"$dir/$mode.record.log" 2>&1
}

# row PROGRAM MODE READER FILE-OR-STATUS: one line of the table.
row() {
    local program=$1 mode=$2 reader=$3 file=$4 figures
    if [ -f "$file" ] && figures=$(python3 "$here/compare.py" "$dir/truth.edges" "$file" 2>>"$dir/compare.log"); then
        # overlap X recall50 X top50 X self X callers X floor X self_floor X truth_edges N profile_edges N
        set -- $figures
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n' "$program" "$mode" "$reader" \
            "$2" "$4" "$6" "$8" "${10}" "${12}" "${14}" "${16}" "${18}" | tee -a "$table"
    else
        printf '| %s | %s | %s | - | - | - | - | - | - | - | %s |\n' "$program" "$mode" "$reader" "$file" |
            tee -a "$table"
    fi
}

# read_hottext MODE DATA: hottext's profile of DATA, or the failure as "exit N: message".
read_hottext() {
    local mode=$1 data=$2 status=0
    "$hottext" profile "$data" --binary "$bin" -o "$dir/$mode.profile" >"$dir/$mode.profile.log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        row "$program" "$mode" hottext "$dir/$mode.profile"
    else
        row "$program" "$mode" hottext "exit $status: $(grep -m1 '^hottext:' "$dir/$mode.profile.log" | cut -c1-160)"
    fi
}

read_perf() {
    local mode=$1 data=$2
    if python3 "$here/perf_edges.py" "$data" "$bin" >"$dir/$mode.perf.edges" 2>"$dir/$mode.perf.log"; then
        row "$program" "$mode" "perf script" "$dir/$mode.perf.edges"
    else
        row "$program" "$mode" "perf script" "failed: $(tail -1 "$dir/$mode.perf.log" | cut -c1-160)"
    fi
}

# read_bolt MODE DATA: BOLT 19's call graph of a recording without call chains (bolt_edges.py:
# what it weighs and how it is made comparable).
read_bolt() {
    local mode=$1 data=$2 stage
    for stage in perf2bolt llvm-bolt convert; do
        case $stage in
            perf2bolt) "$bolt_bin/perf2bolt" -nl -p "$data" -o "$dir/$mode.fdata" "$bin" ;;
            llvm-bolt) "$bolt_bin/llvm-bolt" "$bin" -o "$dir/$mode.bolt" -data="$dir/$mode.fdata" \
                -reorder-functions=cdsort --dump-cg="$dir/$mode.cg.dot" ;;
            convert) python3 "$here/bolt_edges.py" "$dir/$mode.cg.dot" "$dir/$mode.fdata" >"$dir/$mode.bolt.edges" ;;
        esac >"$dir/$mode.$stage.log" 2>&1 || {
            row "$program" "$mode" bolt "$stage failed: $(grep -m1 -i -E 'error|bolt_edges' "$dir/$mode.$stage.log" | cut -c1-160)"
            return
        }
    done
    rm -f "$dir/$mode.bolt"  # only its call graph is read
    row "$program" "$mode" bolt "$dir/$mode.bolt.edges"
}

echo "| program | mode | reader | overlap | recall50 | top50 | self | callers | floor | self floor |" \
    "edges truth / read |" | tee "$table"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |" | tee -a "$table"
for program in $programs; do
    dir=$build/$program
    mkdir -p "$dir"
    step "$program: build"
    case $program in
        tailcall | demo | postgres) "prepare_$program" "$dir" ;;
        tailcall-nosib) prepare_tailcall "$dir" -fno-optimize-sibling-calls 0 ;;
        *) echo "bench-graph: unknown program $program (tailcall, tailcall-nosib, demo, postgres)" >&2; exit 2 ;;
    esac

    "$truth"
    : >"$dir/compare.log"
    for mode in $modes; do
        step "$program: record ($mode) and read"
        data=$dir/$mode.data
        rm -f "$data"
        status=0
        "$recorder" "$mode" "$data" || status=$?
        if [ "$status" -ne 0 ]; then
            row "$program" "$mode" record "exit $status: $(tail -1 "$dir/$mode.record.log" | cut -c1-160)"
            continue
        fi
        read_hottext "$mode" "$data"
        read_perf "$mode" "$data"
        [ "$mode" != none ] || read_bolt "$mode" "$data"
    done
done
echo "hottext $("$hottext" --version 2>/dev/null | head -1), commit $(git -C "$root" rev-parse --short HEAD); files in $build" >&2
