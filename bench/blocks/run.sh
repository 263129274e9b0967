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
#   bolt-fn    BOLT 19 -reorder-functions=cdsort (profile without LBR: perf2bolt -nl)
#   bolt-full  BOLT 19 as its docs recommend: -reorder-blocks=ext-tsp -split-functions
#              -split-all-cold -split-eh -reorder-functions=cdsort, same profile
#   lld-cdsort lld 19 --call-graph-profile-sort=cdsort on hottext's call edges (lld-cgprofile)
# Both BOLT arms add -hot-text (only the __hot_start/__hot_end symbols around the hot
# functions), so that their hot range is measured like ours. BOLT moves code, it cannot be
# relinked at an offset: its arms and lld's are simulated at their one layout.
#
# One recording: `hottext record` of the load with call chains, then (perf2bolt cannot read
# call chains) `perf record` without them under the same load, converted by perf2bolt -nl.
#
# Measures (bench/blocks/table.py writes the table): `hottext ab --simulate` (cachegrind: L1
# iTLB, L2 iTLB, L1i; exact counts, so a busy machine does not change them), arms simulated in
# pairs (A and B of one `ab`, every figure min/median/max over the offsets); executable bytes
# and hot-range bytes from the ELF. With MEASURE=1, timed `hottext ab` of each arm against
# `default` (tps / requests/s). MEASURE defaults to 0: timings on a machine shared with other
# work mean nothing.
#
# Environment: WORK (default /tmp/hottext-blocks-bench), TARGETS, ARMS, SPLIT_FLAGS (options of
# the split arm's `hottext order --format clang-bb-sections`, e.g. "--min-split-samples 2"; the
# cluster file is written again only when the split binaries are older than it), OFFSETS (default
# "0 64 128 192"), MEASURE (0), RUNS (timed rounds, 10), JOBS (simulations at once, 2), REUSE
# (1: the recordings already in WORK are used again, the default binary being the same, and so
# are the simulated pairs already there, sim-A--B.json, and the split arm's binaries: a new arm
# is simulated alone, and the objects are not recompiled), and
# per target: PG_DIR (/tmp/hottext-pg-clang), PG_SCALE (2), PG_SIM_TX (select-only
# transactions a simulated run, net of a tenth, 2000), PG_RECORD_SECONDS (20), PG_SECONDS
# (timed run, 5); DEMO_SIM_REQUESTS (20000, net of a tenth), DEMO_REQUESTS (timed, 200000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${WORK:-/tmp/hottext-blocks-bench}
targets=${TARGETS:-postgres demo}
arms=${ARMS:-default auto cdsort split bolt-fn bolt-full lld-cdsort}
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
if has split && ! "$hottext" order --help | grep -q clang-bb-sections; then
    split_reason="skipped: hottext has no clang-bb-sections format yet (hottext order --help does not list it)"
fi

# The arms of one target, from its t_* functions (postgres.sh, demo.sh): t_prepare (objects and
# $w/default), t_record (profile.profile, bolt.data), t_link NAME FLAGS, t_split_objects
# CLUSTER-FILE (recompile; t_link then links them), t_plain_objects (back to the plain objects),
# t_bolt_flags, t_check (every arm runs), t_finish (after the links), t_sim NAME A-BIN B-BIN
# [ab options], t_time NAME BIN.
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

    split_linked() { # the split arm's binaries at every offset, newer than their cluster file
        local o
        for o in $offsets; do [ "$w/split-at-$o" -nt "$w/clusters.txt" ] || return 1; done
    }
    step "$t: orders and links"
    order() { "$hottext" order "$w/profile.profile" --binary "$w/default" "$@"; }
    for a in auto cdsort; do
        has $a || continue
        for o in $offsets; do
            order --algorithm $a --format ld-script --hot-offset "$o" -o "$w/$a-at-$o.ld" 2>"$w/order-$a.log"
            t_link "$a-at-$o" "-Wl,-T,$w/$a-at-$o.ld"
        done
        ln -sf "$a-at-${offsets%% *}" "$w/$a"
    done
    if has split; then
        rm -f "$w/split-skipped.txt"
        if [ -n "$split_reason" ]; then
            echo "split: $split_reason" | tee "$w/split-skipped.txt"
        elif [ "${REUSE:-0}" = 1 ] && split_linked; then
            echo "split: reusing the split-at-* binaries in $w (built from $w/clusters.txt)"
            ln -sf "split-at-${offsets%% *}" "$w/split"
        else
            # shellcheck disable=SC2086 # SPLIT_FLAGS: options, split on spaces
            order --format clang-bb-sections ${SPLIT_FLAGS:-} -o "$w/clusters.txt" 2>"$w/order-split.log"
            t_split_objects "$w/clusters.txt"
            for o in $offsets; do
                order --format ld-script --hot-offset "$o" -o "$w/split-at-$o.ld" 2>>"$w/order-split.log"
                t_link "split-at-$o" "-Wl,-T,$w/split-at-$o.ld"
            done
            ln -sf "split-at-${offsets%% *}" "$w/split"
            t_plain_objects
        fi
    fi
    if has lld-cdsort; then
        order --format lld-cgprofile -o "$w/cg.txt" 2>/dev/null
        t_link lld-cdsort "-fuse-ld=lld -B$llvm -Wl,--call-graph-ordering-file=$w/cg.txt -Wl,--call-graph-profile-sort=cdsort"
    fi
    bolt() { # NAME OPTIONS...
        local name=$1
        shift
        "$llvm/llvm-bolt" "$w/default" -o "$w/$name" -data="$w/bolt.fdata" -hot-text $(t_bolt_flags) "$@" \
            >"$w/bolt-$name.log" 2>&1 || { tail -20 "$w/bolt-$name.log"; exit 1; }
    }
    ! has bolt-fn || bolt bolt-fn -reorder-functions=cdsort
    ! has bolt-full || bolt bolt-full -reorder-blocks=ext-tsp -split-functions -split-all-cold -split-eh \
        -reorder-functions=cdsort
    t_check
    t_finish

    # Pairs, so that no `ab` runs the same binary at every offset for nothing: the arms with
    # offsets together, the one-layout arms together.
    step "$t: simulate (offsets $offsets for hottext's arms)"
    local with=() without=()
    for a in $arms; do
        [ -e "$w/$a" ] || continue
        case $a in auto | cdsort | split) with+=("$a") ;; *) without+=("$a") ;; esac
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
