# bench/blocks/run.sh's postgres target (sourced): PostgreSQL 15 built with clang 19 by
# bench/postgres/build.sh in PG_DIR, relinked from its objects; pgbench select-only.
# shellcheck shell=bash
pg_dir=${PG_DIR:-/tmp/hottext-pg-clang}
pg_src=$pg_dir/src
pg_inst=$pg_dir/inst
pg_scale=${PG_SCALE:-2}
pg_tx=${PG_SIM_TX:-2000}
pg_record_s=${PG_RECORD_SECONDS:-20}
pg_seconds=${PG_SECONDS:-5}
pg_trace_tx=${PG_TRACE_TX:-2000}
pg_user=${PG_USER:-hottext-pg}
pg_cpu=$(($(nproc) - 1))
pg_sock() { echo "$w/sock-$1"; }
# A server as `hottext ab` runs it: SLOT is a number or {slot}, every slot with its own copy of
# the cluster and its own socket directory. PostgreSQL refuses to run as root: as_user runs it
# as $pg_user (setpriv execs, so its pid is the postmaster's).
as_user() { echo "setpriv --reuid=$pg_user --regid=$pg_user --clear-groups --"; }
pg_server() { # BINARY SLOT
    echo "exec $(as_user) $1 -D $w/data-$2 -k $(pg_sock "$2")"
}
pg_ready() { echo "$pg_inst/bin/pg_isready -q -h $(pg_sock "$1")"; }
# Ready without connecting: the postmaster writes "ready" into postmaster.pid once it accepts
# connections. Under valgrind every pg_isready probe forks a backend that the simulation counts,
# and the number of probes varies with the machine's load (10 M instructions each, seen here).
pg_ready_quiet() { echo "grep -qx 'ready *' $w/data-$1/postmaster.pid"; }
pg_load() { # SLOT PGBENCH-OPTIONS...: prewarm (bench/postgres/prewarm.sql), then pgbench -S
    local slot=$1
    shift
    echo "$pg_inst/bin/psql -qAt -h $(pg_sock "$slot") -U postgres postgres -f $root/bench/postgres/prewarm.sql >/dev/null &&" \
        "taskset -c 0 $pg_inst/bin/pgbench -n -S $* -h $(pg_sock "$slot") -U postgres postgres"
}
t_prepare() {
    if [ ! -x "$pg_inst/bin/postgres" ]; then
        echo "bench-blocks: no PostgreSQL in $pg_dir; building it with clang 19 (about 25 minutes)"
        BENCH_DIR=$pg_dir CC=clang-19 EXTRA_CFLAGS=-fbasic-block-address-map bash "$root/bench/postgres/build.sh"
    fi
    grep -q clang "$pg_dir/compiler.txt" 2>/dev/null || (cd "$pg_src" &&
        { sed -n 's/^CC = //p' src/Makefile.global | xargs -I{} sh -c '{} --version | head -1'
          sed -n 's/^CFLAGS = .*\(-O[0-9s].*\)$/\1/p' src/Makefile.global; } >"$pg_dir/compiler.txt")
    grep -q clang "$pg_dir/compiler.txt" ||
        die "$pg_dir was not built with clang: BENCH_DIR=$pg_dir CC=clang-19 EXTRA_CFLAGS=-fbasic-block-address-map bash bench/postgres/build.sh"
    cp "$pg_dir/compiler.txt" "$w/compiler.txt"
    # A binary finds its share and lib directories at ../share and ../lib of its own directory.
    ln -sfn "$pg_inst/share" "$work/share"
    ln -sfn "$pg_inst/lib" "$work/lib"
    t_link default ""
    id "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
    for s in 0 1; do mkdir -p "$(pg_sock $s)" && chown "$pg_user:" "$(pg_sock $s)"; done
    [ -f "$w/data.ready" ] && return 0
    rm -rf "$w/data-0" "$w/data-1"
    mkdir -p "$w/data-0" && chown "$pg_user:" "$w/data-0"
    $(as_user) "$pg_inst/bin/initdb" -N -D "$w/data-0" -U postgres -A trust >"$w/initdb.log"
    cat "$root/bench/postgres/small.conf" >>"$w/data-0/postgresql.conf"
    pg_start default
    "$pg_inst/bin/psql" -qAt -h "$(pg_sock 0)" -U postgres postgres -c "CREATE EXTENSION pg_prewarm"
    "$pg_inst/bin/pgbench" -i -q -s "$pg_scale" -h "$(pg_sock 0)" -U postgres postgres >"$w/pgbench-init.log" 2>&1
    pg_stop
    cp -a "$w/data-0" "$w/data-1"
    touch "$w/data.ready"
}
pg_pid=""
pg_start() { # NAME: the arm's server on slot 0, pinned to the last CPU
    taskset -c "$pg_cpu" sh -c "$(pg_server "$w/$1" 0)" >"$w/server-$1.log" 2>&1 &
    pg_pid=$!
    for _ in $(seq 300); do $(pg_ready 0) && return 0; sleep 0.1; done
    tail -20 "$w/server-$1.log" >&2
    die "postgres $1 did not answer"
}
pg_stop() { kill -INT "$pg_pid"; wait "$pg_pid" || true; pg_pid=""; }
trap '[ -z "$pg_pid" ] || pg_stop' EXIT
t_record() {
    local load
    load=$(pg_load 0 -c 1 -T $((pg_record_s + 3)))
    pg_start default
    sh -c "$load" >"$w/record-load.log" 2>&1 &
    sleep 2
    "$hottext" record -o "$w/perf.data" --pid "$pg_pid" --duration "$pg_record_s" --cpu "$pg_cpu"
    wait $!
    sh -c "$load" >"$w/record-load-bolt.log" 2>&1 &
    sleep 2
    perf record -q -e cpu-clock -C "$pg_cpu" -o "$w/bolt.data" -- sleep "$pg_record_s" 2>"$w/perf-bolt.log"
    wait $!
    pg_stop
    "$hottext" profile "$w/perf.data" --binary "$w/default" -o "$w/profile.profile" 2>"$w/profile.log"
}
# The default server under callgrind (every instruction and jump counted, one file a process),
# pgbench as t_record runs it for PG_TRACE_TX transactions. Counted only below BackendRun (a
# backend's work from its login on): a forked child starts with its parent's counts, so each
# file would hold the postmaster's start again; the background processes count nothing.
t_trace() { # DIR
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir" && chown "$pg_user:" "$dir"
    taskset -c "$pg_cpu" sh -c "exec $(as_user) valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes \
        --trace-children=yes --collect-atstart=no --toggle-collect=BackendRun --vgdb=no \
        --callgrind-out-file=$dir/callgrind.out.%p --log-file=$dir/valgrind.%p.log \
        $w/default -D $w/data-0 -k $(pg_sock 0)" >"$w/server-trace.log" 2>&1 &
    pg_pid=$!
    for _ in $(seq 1500); do sh -c "$(pg_ready_quiet 0)" 2>/dev/null && break; sleep 0.2; done
    sh -c "$(pg_ready_quiet 0)" 2>/dev/null || { tail -20 "$w/server-trace.log" >&2; die "postgres under callgrind did not start"; }
    sh -c "$(pg_load 0 -c 1 -t "$pg_trace_tx")" >"$w/trace-load.log" 2>&1 ||
        { tail -20 "$w/trace-load.log" >&2; die "pgbench under the trace failed"; }
    pg_stop
}
t_link() { # NAME LDFLAGS_EX: PostgreSQL's own link rule with more flags
    rm -f "$pg_src/src/backend/postgres"
    env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -C "$pg_src/src/backend" postgres LDFLAGS_EX="$2" \
        >"$w/link-$1.log" 2>&1 || { tail -20 "$w/link-$1.log"; exit 1; }
    cp "$pg_src/src/backend/postgres" "$w/$1"
}
# The split arm recompiles the backend's objects in the tree with the cluster file (COPT is
# PostgreSQL's own variable for extra compiler flags), and t_plain_objects compiles back the
# ones the file changed (those with block sections): the tree is never copied, at the cost of
# one backend compile (8 minutes here) and a few objects. PostgreSQL's Makefile.global
# declares every target .SECONDARY: a missing object is not rebuilt while the objfiles.txt that
# lists it is newer than its source, so those go too.
pg_recompile() { # COPT LOG
    find "$pg_src/src/backend" -name objfiles.txt -delete
    env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -j2 -C "$pg_src/src/backend" COPT="$1" \
        >"$w/$2" 2>&1 || { tail -20 "$w/$2"; exit 1; }
}
t_split_objects() {
    find "$pg_src/src/backend" -name '*.o' -delete
    pg_recompile "-fbasic-block-sections=list=$1" compile-split.log
}
t_plain_objects() {
    local o
    # Not `grep -q`: under pipefail, readelf killed by the early exit would read as no match.
    for o in $(find "$pg_src/src/backend" -name '*.o'); do
        if readelf -SW "$o" | grep -E '\.text\.(hot|split)\.' >/dev/null; then rm -f "$o"; fi
    done
    pg_recompile "" compile-plain.log
    t_link default-again ""
    # The plain objects again: the same binary as the one recorded.
    [ "$(t_build_id "$w/default-again")" = "$(t_build_id "$w/default")" ] ||
        die "the backend recompiled without the cluster file differs from $w/default (build id)"
    rm -f "$w/default-again"
}
t_build_id() { readelf -n "$1" | sed -n 's/.*Build ID: //p'; }
# ExecInterpExpr (computed gotos) stops BOLT 19 on gcc's build (bench/postgres/README.md).
t_bolt_flags() { echo "-skip-funcs=ExecInterpExpr/1"; }
t_check() { # every arm starts and answers a query
    local a
    for a in $arms; do
        [ -e "$w/$a" ] || continue
        pg_start "$a"
        "$pg_inst/bin/psql" -qAt -h "$(pg_sock 0)" -U postgres postgres -c "SELECT count(*) FROM pgbench_branches" >/dev/null
        pg_stop
    done
}
# The tree's own binary is the default build again, as bench/postgres/run.sh expects.
t_finish() { t_link default ""; }
t_sim() { # NAME A B [ab options]
    local name=$1 a=$2 b=$3
    shift 3
    # The whole `ab` runs as $pg_user: valgrind writes its logs into ab's private directory
    # from the server's processes, which a server that dropped root could not.
    # --stop-timeout: ab freezes the postmaster while its children get SIGTERM (so that it
    # cannot kill them before valgrind wrote their counts); the checkpointer ignores SIGTERM, so
    # that phase always lasts the whole timeout, and then the postmaster's own shutdown under
    # valgrind has as long again: 20 s is enough for both here.
    # valgrind's gdb server names a file in /tmp by pid and user, and one left by root's run of
    # the same pid stops it: no gdb server (VALGRIND_OPTS), and the user's own name.
    env USER="$pg_user" LOGNAME="$pg_user" VALGRIND_OPTS=--vgdb=no $(as_user) "$hottext" ab --simulate --json --jobs "$jobs" "$@" --ready-timeout 300 --stop-timeout 20 \
        --server-a "exec $a -D $w/data-{slot} -k $(pg_sock '{slot}')" \
        --server-b "exec $b -D $w/data-{slot} -k $(pg_sock '{slot}')" \
        --ready "$(pg_ready_quiet '{slot}')" --load "$(pg_load '{slot}' -c 1 -t "$pg_tx")" \
        --baseline-load "$(pg_load '{slot}' -c 1 -t $((pg_tx / 10)))" \
        --metric 'number of transactions actually processed: ([0-9]+)' --metric-name transaction \
        >"$w/sim-$name.json" 2>"$w/sim-$name.err" || { tail -20 "$w/sim-$name.err"; exit 1; }
}
t_time() { # NAME BIN
    "$hottext" ab --runs "$runs" --warmup 1 --cpu "$pg_cpu" \
        --server-a "$(pg_server "$w/default" 0)" --server-b "$(pg_server "$2" 0)" \
        --ready "$(pg_ready 0)" --load "$(pg_load 0 -c 2 -j 2 -T "$pg_seconds")" \
        --metric 'tps = ([0-9.]+)' --metric-name tps --higher-is-better \
        --json >"$w/ab-$1.json" 2>"$w/ab-$1.err" || { tail -20 "$w/ab-$1.err"; exit 1; }
}
