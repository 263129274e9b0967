#!/usr/bin/env bash
# `make bench-blocks` (issue 36, item 4): clang-built programs laid out by function order and by
# full BOLT, all from one profile of one load, compared by simulated iTLB and i-cache misses.
#
# Targets (TARGETS, default "postgres demo"; each in its own file, sourced):
#   postgres  PostgreSQL 15 built by bench/postgres/build.sh with CC=clang-19 and
#             EXTRA_CFLAGS=-fbasic-block-address-map (PG_DIR; built once, relinked here: the
#             tree is never copied), pgbench select-only on a small cluster of its own
#   demo      examples/demo-service compiled by clang-19 with -O2 -fbasic-block-address-map
#             (and the Makefile's -ffunction-sections -fno-omit-frame-pointer)
#
# Arms (ARMS, default all), each linked from the same objects, --emit-relocs everywhere:
#   default    the plain link (GNU ld)
#   auto       hottext order (--algorithm auto), GNU ld script, at each hot-range offset
#   cdsort     hottext order --algorithm cdsort, at each offset
#   split      hottext order --format clang-bb-sections: the objects recompiled with
#              -fbasic-block-sections=list=FILE, the hot parts ordered by the ld script, at each
#              offset; skipped (with the reason printed) while `hottext order --help` has no
#              such format
#   split-edges  the split arm from the profile with exact block edges (profile-edges.profile:
#              trace_edges.py adds to profile.profile the edges and blocks that ran of a
#              callgrind trace of the default binary under the same load, standing in for the
#              branch records this machine cannot take): the blocks that ran kept, each
#              function's laid out by ext-TSP (--block-order ext-tsp, the default); its ld script
#              from the same profile
#   split-edges-original  the same with --block-order original (the compiler's order): what
#              the kept blocks buy apart from the order
#   bolt-fn    BOLT 19 -reorder-functions=cdsort (profile without LBR: perf2bolt -nl)
#   bolt-full  BOLT 19 as its docs recommend: -reorder-blocks=ext-tsp -split-functions
#              -split-all-cold -split-eh -reorder-functions=cdsort, same profile
#   bolt-full-edges  bolt-full fed the split-edges arms' callgrind trace as branch records
#              (trace_edges.py --bolt: every jump and call as `B`, every fall-through as `F`, in
#              perf2bolt -pa's pre-aggregated format, converted to bolt-edges.fdata): the fair
#              peer of split-edges
#   bolt-full-edges-sampled  the same, the trace's transfers kept only within and between the
#              profile's functions (trace_edges.py --bolt-sampled): the functions split-edges has
#              edges for, where bolt-full-edges has every function that ran
#   lld-cdsort lld 19 --call-graph-profile-sort=cdsort on hottext's call edges (lld-cgprofile)
# The BOLT arms add -hot-text (only the __hot_start/__hot_end symbols around the hot
# functions), so that their hot range is measured like ours. BOLT moves code, it cannot be
# relinked at an offset: its arms and lld's are simulated at their one layout.
#
# One recording: `hottext record` of the load with call chains, then (perf2bolt cannot read
# call chains) `perf record` without them under the same load, converted by perf2bolt -nl.
# The split-edges and bolt-full-edges arms add a shorter run of the same load under callgrind
# (not a recording: exact counts, more than sampled branch records would give).
#
# Measures (bench/blocks/table.py writes the table): `hottext ab --simulate` (cachegrind: L1
# iTLB, L2 iTLB, L1i; exact counts, so a busy machine does not change them), arms simulated in
# pairs (A and B of one `ab`, every figure min/median/max over the offsets); executable bytes
# and hot-range bytes from the ELF. With MEASURE=1, timed `hottext ab` of each arm against
# `default` (tps / requests/s). MEASURE defaults to 0: timings on a machine shared with other
# work mean nothing.
#
# Environment: WORK (default /tmp/hottext-blocks-bench), TARGETS, ARMS, SPLIT_FLAGS (options of
# the split arms' `hottext order --format clang-bb-sections`, e.g. "--min-split-samples 2"; an
# arm's cluster file is written again only when its binaries are older than it or it is older
# than its profile), OFFSETS (default "0 64 128 192"), MEASURE (0), RUNS (timed rounds, 10),
# JOBS (simulations at once, 2), REUSE (1: the recordings already in WORK are used again, the
# default binary being the same, and so are the split arms' binaries (the objects are not
# recompiled), the callgrind trace (WORK/TARGET/trace, done when trace.done is there;
# profile-edges.profile and the bolt-edges arms' fdata are written again when older than it or
# than profile.profile), and the
# simulations already there: an arm on either side of some sim-A--B.json is not simulated again,
# table.py reads it from there, so move the file away when the arm's binaries change), and
# per target: PG_DIR (/tmp/hottext-pg-clang), PG_SCALE (2), PG_SIM_TX (select-only
# transactions a simulated run, net of a tenth, 2000), PG_RECORD_SECONDS (20), PG_SECONDS
# (timed run, 5), PG_TRACE_TX (transactions under the trace, 2000); DEMO_SIM_REQUESTS (20000,
# net of a tenth), DEMO_REQUESTS (timed, 200000), DEMO_TRACE_REQUESTS (under the trace, 200000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${WORK:-/tmp/hottext-blocks-bench}
targets=${TARGETS:-postgres demo}
arms=${ARMS:-default auto cdsort split split-edges split-edges-original bolt-fn bolt-full bolt-full-edges bolt-full-edges-sampled lld-cdsort}
offsets=${OFFSETS:-0 64 128 192}
runs=${RUNS:-10}
jobs=${JOBS:-2}
hottext=$root/target/release/hottext
llvm=/usr/lib/llvm-19/bin
step() { printf '\n== %s  (%s)\n' "$*" "$(date +%T)"; }
die() { echo "bench-blocks: $*" >&2; exit 2; }
has() { case " $arms " in *" $1 "*) return 0 ;; esac; return 1; }

[ -x "$hottext" ] || die "$hottext is missing: run 'make build' first"
for tool in clang-19 "$llvm/llvm-bolt" "$llvm/perf2bolt" "$llvm/ld.lld" valgrind perf; do
    command -v "$tool" >/dev/null || die "$tool is missing: apt-get install clang-19 bolt-19 lld-19 valgrind linux-perf"
done
offsets_csv=$(echo "$offsets" | tr ' ' ,)
split_reason=""
if { has split || has split-edges || has split-edges-original; } && ! "$hottext" order --help | grep -q clang-bb-sections; then
    split_reason="skipped: hottext has no clang-bb-sections format yet (hottext order --help does not list it)"
fi

# The arms of one target, from its t_* functions (postgres.sh, demo.sh): t_prepare (objects and
# $w/default), t_record (profile.profile, bolt.data), t_trace DIR (DIR/callgrind.out.*: the
# default binary under callgrind, every instruction and jump counted, for the edge arms),
# t_link NAME FLAGS, t_split_objects CLUSTER-FILE (recompile; t_link then links them),
# t_plain_objects (back to the plain objects), t_bolt_flags, t_check (every arm runs), t_finish
# (after the links), t_sim NAME A-BIN B-BIN [ab options], t_time NAME BIN.
bench_target() {
    local t=$1 w=$work/$1
    mkdir -p "$w"
    # shellcheck source=/dev/null
    . "$here/$t.sh"
    step "$t: objects and the default binary"
    t_prepare
    if [ "${REUSE:-0}" = 1 ] && [ -f "$w/profile.profile" ] && [ -f "$w/bolt.fdata" ]; then
        echo "reusing the recordings in $w"
        # A profile written before block counts existed (v2/v3, no `block` lines) is profiled
        # again from the same perf.data: the split arm needs the blocks.
        if has split && ! grep -q '^block ' "$w/profile.profile"; then
            echo "profiling $w/perf.data again for block counts"
            "$hottext" profile "$w/perf.data" --binary "$w/default" -o "$w/profile.profile" 2>"$w/profile.log"
        fi
    else
        step "$t: one load, recorded for hottext (call chains) and for BOLT (plain samples)"
        t_record
        "$llvm/perf2bolt" -nl -p "$w/bolt.data" -o "$w/bolt.fdata" "$w/default" >"$w/perf2bolt.log" 2>&1 ||
            { tail -20 "$w/perf2bolt.log"; exit 1; }
    fi

    # split_arm NAME PROFILE [ORDER-OPTIONS]: an arm with clang's block sections: PROFILE's
    # cluster file (clusters.txt for split, clusters-edges.txt for split-edges, ...), the objects
    # compiled again with it, PROFILE's ld script at each offset, the plain objects back after.
    split_arm() {
        local name=$1 prof=$2 clusters=$w/clusters${1#split}.txt o
        shift 2
        if [ "${REUSE:-0}" = 1 ] && [ "$clusters" -nt "$prof" ] && split_linked "$name" "$clusters"; then
            echo "$name: reusing the $name-at-* binaries in $w (built from $clusters)"
        else
            # shellcheck disable=SC2086 # SPLIT_FLAGS: options, split on spaces
            order_of "$prof" --format clang-bb-sections ${SPLIT_FLAGS:-} "$@" -o "$clusters" \
                2>"$w/order-$name.log"
            t_split_objects "$clusters"
            for o in $offsets; do
                order_of "$prof" --format ld-script --hot-offset "$o" -o "$w/$name-at-$o.ld" 2>>"$w/order-$name.log"
                t_link "$name-at-$o" "-Wl,-T,$w/$name-at-$o.ld"
            done
            t_plain_objects
        fi
        ln -sf "$name-at-${offsets%% *}" "$w/$name"
    }
    split_linked() { # NAME CLUSTERS: the arm's binaries at every offset, newer than its cluster file
        local o
        for o in $offsets; do [ "$w/$1-at-$o" -nt "$2" ] || return 1; done
    }
    # The default binary traced under callgrind (t_trace), once a run: reused under REUSE=1.
    local trace_taken=""
    traced() {
        [ -z "$trace_taken" ] || return 0
        trace_taken=1
        if [ "${REUSE:-0}" = 1 ] && [ -f "$w/trace.done" ]; then
            echo "reusing the trace in $w/trace"
        else
            step "$t: the default binary traced under callgrind, for exact block edges"
            rm -f "$w/trace.done"
            t_trace "$w/trace"
            touch "$w/trace.done"
        fi
    }
    # The profile with exact block edges (trace_edges.py): the trace's edges added to
    # profile.profile.
    edges_profile() {
        traced
        if ! { [ "$w/profile-edges.profile" -nt "$w/profile.profile" ] &&
            [ "$w/profile-edges.profile" -nt "$w/trace.done" ]; }; then
            python3 "$here/trace_edges.py" "$w/profile.profile" "$w/default" "$w"/trace/callgrind.out.* \
                >"$w/profile-edges.profile" 2>"$w/trace-edges.log" || { cat "$w/trace-edges.log"; exit 1; }
        fi
        cat "$w/trace-edges.log"
    }
    step "$t: orders and links"
    order_of() { local prof=$1; shift; "$hottext" order "$prof" --binary "$w/default" "$@"; }
    order() { order_of "$w/profile.profile" "$@"; }
    for a in auto cdsort; do
        has $a || continue
        for o in $offsets; do
            order --algorithm $a --format ld-script --hot-offset "$o" -o "$w/$a-at-$o.ld" 2>"$w/order-$a.log"
            t_link "$a-at-$o" "-Wl,-T,$w/$a-at-$o.ld"
        done
        ln -sf "$a-at-${offsets%% *}" "$w/$a"
    done
    rm -f "$w/split-skipped.txt"
    if [ -n "$split_reason" ]; then
        echo "split: $split_reason" | tee "$w/split-skipped.txt"
    else
        ! has split || split_arm split "$w/profile.profile"
        if has split-edges || has split-edges-original; then
            edges_profile
            ! has split-edges || split_arm split-edges "$w/profile-edges.profile"
            ! has split-edges-original ||
                split_arm split-edges-original "$w/profile-edges.profile" --block-order original
        fi
    fi
    if has lld-cdsort; then
        order --format lld-cgprofile -o "$w/cg.txt" 2>/dev/null
        t_link lld-cdsort "-fuse-ld=lld -B$llvm -Wl,--call-graph-ordering-file=$w/cg.txt -Wl,--call-graph-profile-sort=cdsort"
    fi
    # BOLT's profile from the same trace (trace_edges.py --bolt or --bolt-sampled PROFILE, then
    # perf2bolt -pa): NAME.fdata, written again when older than the trace or the profile.
    bolt_edges_data() { # NAME TRACE-EDGES-MODE...
        local name=$1
        shift
        traced
        [ "$w/$name.fdata" -nt "$w/trace.done" ] && [ "$w/$name.fdata" -nt "$w/profile.profile" ] &&
            return 0
        python3 "$here/trace_edges.py" "$@" "$w/default" "$w"/trace/callgrind.out.* \
            >"$w/$name.preagg" 2>"$w/trace-$name.log" || { cat "$w/trace-$name.log"; exit 1; }
        "$llvm/perf2bolt" -pa -p "$w/$name.preagg" -o "$w/$name.fdata" "$w/default" \
            >"$w/perf2bolt-$name.log" 2>&1 || { tail -20 "$w/perf2bolt-$name.log"; exit 1; }
        cat "$w/trace-$name.log"
        grep -E '^PERF2BOLT: (traces mismatching|Out of range)|have non-empty' "$w/perf2bolt-$name.log"
    }
    bolt() { # NAME FDATA OPTIONS...
        local name=$1 data=$2
        shift 2
        "$llvm/llvm-bolt" "$w/default" -o "$w/$name" -data="$data" -hot-text $(t_bolt_flags) "$@" \
            >"$w/bolt-$name.log" 2>&1 || { tail -20 "$w/bolt-$name.log"; exit 1; }
    }
    local full=(-reorder-blocks=ext-tsp -split-functions -split-all-cold -split-eh -reorder-functions=cdsort)
    ! has bolt-fn || bolt bolt-fn "$w/bolt.fdata" -reorder-functions=cdsort
    ! has bolt-full || bolt bolt-full "$w/bolt.fdata" "${full[@]}"
    if has bolt-full-edges; then
        bolt_edges_data bolt-edges --bolt
        bolt bolt-full-edges "$w/bolt-edges.fdata" "${full[@]}"
    fi
    if has bolt-full-edges-sampled; then
        bolt_edges_data bolt-edges-sampled --bolt-sampled "$w/profile.profile"
        bolt bolt-full-edges-sampled "$w/bolt-edges-sampled.fdata" "${full[@]}"
    fi
    t_check
    t_finish

    # Pairs, so that no `ab` runs the same binary at every offset for nothing: the arms with
    # offsets together, the one-layout arms together.
    step "$t: simulate (offsets $offsets for hottext's arms)"
    simulated() { # ARM: the first sim-*--*.json with ARM on one side, as table.py reads it
        local f
        for f in "$w"/sim-*--*.json; do
            [ -s "$f" ] || continue
            case "--$(basename "$f" .json | sed 's/^sim-//')--" in *"--$1--"*) echo "$f"; return 0 ;; esac
        done
        return 1
    }
    local with=() without=()
    for a in $arms; do
        [ -e "$w/$a" ] || continue
        # An arm that a pair already there simulated (REUSE=1) is not simulated again.
        if [ "${REUSE:-0}" = 1 ] && simulated "$a" >/dev/null; then
            echo "  $a: reusing $(simulated "$a")"
            continue
        fi
        case $a in auto | cdsort | split*) with+=("$a") ;; *) without+=("$a") ;; esac
    done
    sim_pairs() { # OFFSETS ARM...: an odd arm out goes with the first arm again
        local offs=$1 first=$2
        shift
        while [ $# -gt 0 ]; do
            local a=$1 b=${2:-$first}
            local ba=$w/$a bb=$w/$b opts=()
            if [ -n "$offs" ]; then
                ba=$w/$a-at-{offset} bb=$w/$b-at-{offset} opts=(--offsets "$offs")
            fi
            if [ "${REUSE:-0}" = 1 ] && [ -s "$w/sim-$a--$b.json" ]; then
                echo "  $a, $b: reusing sim-$a--$b.json"
            else
                t_sim "$a--$b" "$ba" "$bb" "${opts[@]}"
                echo "  $a, $b simulated"
            fi
            shift 2 || shift
        done
    }
    [ ${#with[@]} = 0 ] || sim_pairs "$offsets_csv" "${with[@]}"
    [ ${#without[@]} = 0 ] || sim_pairs "" "${without[@]}"

    if [ "${MEASURE:-0}" = 1 ]; then
        step "$t: time each arm against default ($runs rounds)"
        for a in $arms; do
            [ "$a" != default ] && [ -e "$w/$a" ] || continue
            t_time "$a" "$w/$a"
            echo "  $a timed"
        done
    fi
    python3 "$here/table.py" --dir "$w" --target "$t" --arms "$arms" --offsets "$offsets" \
        >"$w/table.md"
    cat "$w/table.md"
}

machine="$(nproc) vCPUs $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"), Linux $(uname -r)"
mkdir -p "$work"
echo "$machine" >"$work/machine.txt"
for t in $targets; do
    case $t in postgres | demo) ;; *) die "unknown target $t (postgres, demo)" ;; esac
    t0=$SECONDS
    (bench_target "$t")
    echo "bench-blocks: $t done in $((SECONDS - t0)) s"
done
