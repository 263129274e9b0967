# bench/blocks/run.sh's demo target (sourced): examples/demo-service built by clang 19.
# shellcheck shell=bash
# clang has no noclone attribute (gen.py writes it for gcc), and needs none: it does not clone.
demo_opt="-O2 -fbasic-block-address-map -Wno-unknown-attributes"
demo_requests=${DEMO_REQUESTS:-200000}
demo_sim=${DEMO_SIM_REQUESTS:-20000}
demo_trace=${DEMO_TRACE_REQUESTS:-200000}
demo_make() { # BUILD-DIR OPT TARGET...: the demo's Makefile, always with clang 19
    local build=$1 opt=$2
    shift 2
    make --no-print-directory -C "$root/examples/demo-service" BUILD="$build" CC=clang-19 OPT="$opt" "$@"
}
demo_build=$w/build       # the plain objects
demo_objs=$demo_build     # the objects t_link links: the plain ones or the split ones
t_prepare() {
    demo_make "$demo_build" "$demo_opt" -j2 objs >"$w/objs.log" 2>&1 || { tail -20 "$w/objs.log"; exit 1; }
    { clang-19 --version | head -1; echo "$demo_opt (and the Makefile's CFLAGS)"; } >"$w/compiler.txt"
    t_link default ""
}
t_link() { # NAME FLAGS
    local linker=bfd
    case $2 in *-fuse-ld=lld*) linker=lld ;; esac
    # -fuse-ld=lld is the Makefile's LINKER=lld; the rest of FLAGS goes to the link line.
    demo_make "$demo_objs" "$demo_opt${demo_extra:+ $demo_extra}" link LINKER=$linker OUT="$w/$1" \
        LDEXTRA="-Wl,--emit-relocs ${2/-fuse-ld=lld -B$llvm/}" >"$w/link-$1.log" 2>&1 ||
        { tail -20 "$w/link-$1.log"; exit 1; }
}
t_record() {
    "$hottext" record -o "$w/perf.data" -- "$w/default" --requests $((demo_requests * 5)) >/dev/null
    "$hottext" profile "$w/perf.data" --binary "$w/default" -o "$w/profile.profile" 2>"$w/profile.log"
    perf record -q -e cpu-clock -o "$w/bolt.data" -- "$w/default" --requests $((demo_requests * 5)) \
        >/dev/null 2>"$w/perf-bolt.log"
}
t_trace() { # DIR: the default binary under callgrind, every instruction and jump counted
    rm -rf "$1" && mkdir -p "$1"
    valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes --callgrind-out-file="$1/callgrind.out.1" \
        "$w/default" --requests "$demo_trace" >/dev/null 2>"$1/valgrind.log" || { tail -20 "$1/valgrind.log"; exit 1; }
}
# The split objects: a second build directory (the same generated sources), compiled with the
# cluster file; the plain objects stay as they are.
t_split_objects() {
    demo_objs=$w/build-split
    demo_extra="-fbasic-block-sections=list=$1"
    # The objects do not depend on the cluster file in the Makefile: a new file must rebuild them.
    rm -f "$demo_objs"/obj/*.o
    demo_make "$demo_objs" "$demo_opt $demo_extra" -j2 objs >"$w/objs-split.log" 2>&1 ||
        { tail -20 "$w/objs-split.log"; exit 1; }
}
t_plain_objects() { demo_objs=$demo_build; demo_extra=""; }
# The demo's functions pad their never-run tails with NOPs (gen.py), which BOLT deletes unless
# told not to (578 B of f_00012 became 287 B, its function-order hot range 1.3 MB for our
# 10.3 MB); real code's cold paths are not NOPs, so BOLT keeps them here (bench/demo does too).
t_bolt_flags() { echo "-keep-nops"; }
t_check() { # every arm computes what the default computes
    local want got a
    want=$("$w/default" --requests 1000 | grep '^checksum:')
    for a in $arms; do
        [ -e "$w/$a" ] || continue
        got=$("$w/$a" --requests 1000 | grep '^checksum:')
        [ "$got" = "$want" ] || { echo "bench-blocks: demo $a computes $got, the default $want" >&2; exit 1; }
    done
}
t_finish() { :; }
t_sim() { # NAME A B [ab options]
    local name=$1 a=$2 b=$3
    shift 3
    "$hottext" ab --simulate --json --jobs "$jobs" "$@" \
        --metric 'requests: ([0-9]+)' --metric-name request \
        -a "$a --requests $demo_sim" --baseline-a "$a --requests $((demo_sim / 10))" \
        -b "$b --requests $demo_sim" --baseline-b "$b --requests $((demo_sim / 10))" \
        >"$w/sim-$name.json" 2>"$w/sim-$name.err" || { tail -20 "$w/sim-$name.err"; exit 1; }
}
t_time() { # NAME BIN
    "$hottext" ab --runs "$runs" --warmup 1 \
        -a "$w/default --requests $demo_requests" -b "$2 --requests $demo_requests" \
        --metric '([0-9]+) requests/s' --metric-name requests/s --higher-is-better \
        --expect-same 'checksum: ([0-9a-f]+)' --json >"$w/ab-$1.json" 2>"$w/ab-$1.err" ||
        { tail -20 "$w/ab-$1.err"; exit 1; }
}
