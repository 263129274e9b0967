# bench/graph/run.sh's postgres program (sourced): PostgreSQL 15 under pgbench select-only.
#
# The server is a copy of PG_DIR's installation (default /tmp/hottext-pg-clang, clang 19 with
# frame pointers, the build bench/blocks uses; built there by bench/postgres/build.sh when it is
# missing, and otherwise only read: a copy, so that a reinstall there during the run cannot
# change the binary between the truth and the recordings), with its own cluster, socket and port
# (PG_PORT, default 5499) in the program's directory. pgbench runs PG_TX select-only transactions
# (default 100000) on one connection with a fixed random seed, against a freshly started server
# each time, so the truth and every recording run the same transactions.
# shellcheck shell=bash
pg_dir=${PG_DIR:-/tmp/hottext-pg-clang}
pg_port=${PG_PORT:-5499}
pg_tx=${PG_TX:-100000}
pg_scale=${PG_SCALE:-1}
pg_user=${PG_USER:-hottext-pg}
# PostgreSQL refuses to run as root: the server runs as $pg_user (setpriv execs, so the pid of
# the shell that starts it is the postmaster's, under valgrind too).
pg_as_user=(setpriv --reuid="$pg_user" --regid="$pg_user" --clear-groups --)
pg_pid=""

prepare_postgres() {
    local dir=$1
    if [ ! -x "$pg_dir/inst/bin/postgres" ]; then
        step "postgres: no PostgreSQL in $pg_dir; building it with clang 19 (about 25 minutes)"
        BENCH_DIR=$pg_dir CC=clang-19 EXTRA_CFLAGS=-fbasic-block-address-map bash "$root/bench/postgres/build.sh"
    fi
    rm -rf "$dir/inst" "$dir/data" "$dir/sock" "$dir/truth"
    cp -a "$pg_dir/inst" "$dir/inst"
    cp "$pg_dir/compiler.txt" "$dir/compiler.txt" 2>/dev/null || true
    bin=$dir/inst/bin/postgres
    id "$pg_user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
    mkdir -p "$dir/data" "$dir/sock" "$dir/truth"
    chown "$pg_user:" "$dir/data" "$dir/sock" "$dir/truth"
    "${pg_as_user[@]}" "$dir/inst/bin/initdb" -N -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1 ||
        { tail -20 "$dir/initdb.log" >&2; exit 1; }
    cat "$root/bench/postgres/small.conf" - >>"$dir/data/postgresql.conf" <<CONF
# bench/graph/postgres.sh: its own port and socket
port = $pg_port
unix_socket_directories = '$dir/sock'
CONF
    pg_start "$dir"
    "$dir/inst/bin/pgbench" -i -q -s "$pg_scale" -h "$dir/sock" -p "$pg_port" -U postgres postgres \
        >"$dir/pgbench-init.log" 2>&1 || { tail -20 "$dir/pgbench-init.log" >&2; exit 1; }
    pg_stop
    truth=pg_truth
    recorder=pg_record
}

# pg_start DIR [WRAPPER...]: the server, under WRAPPER (valgrind) if given; waits until it
# accepts connections, read from postmaster.pid rather than by connecting (under valgrind every
# probe would be one more backend in the truth).
pg_start() {
    local dir=$1
    shift
    "${pg_as_user[@]}" "$@" "$dir/inst/bin/postgres" -D "$dir/data" >"$dir/server.log" 2>&1 &
    pg_pid=$!
    for _ in $(seq 1800); do
        grep -qx 'ready *' "$dir/data/postmaster.pid" 2>/dev/null && return 0
        kill -0 "$pg_pid" 2>/dev/null || break
        sleep 0.2
    done
    tail -20 "$dir/server.log" >&2
    echo "bench-graph: postgres did not start (server.log above)" >&2
    exit 1
}

# Fast shutdown (SIGINT); waits for every process of the server to exit.
pg_stop() {
    kill -INT "$pg_pid"
    wait "$pg_pid" || true
    pg_pid=""
}
trap '[ -z "$pg_pid" ] || pg_stop' EXIT

pg_bench() {
    "$dir/inst/bin/pgbench" -n -S -c 1 -t "$pg_tx" --random-seed=1 -h "$dir/sock" -p "$pg_port" \
        -U postgres postgres >"$dir/pgbench-$1.log" 2>&1 || { tail -20 "$dir/pgbench-$1.log" >&2; exit 1; }
}

# The truth: the server under callgrind, following its processes (one file per process); summed
# over the backends (the processes that ran PostgresMain: pgbench's connection and the one it
# opens first to read the scale), the background processes left out: under callgrind they run
# 50 times longer than the workload would let them natively. Costs are collected only below
# BackendRun (a backend's work from its login on, PostgresMain with its caller): a forked child
# inherits its parent's counts, so each file would otherwise hold the postmaster's start too.
pg_truth() {
    local files
    step "postgres: the truth under callgrind: pgbench -S -c 1 -t $pg_tx"
    rm -f "$dir"/truth/*
    pg_start "$dir" valgrind --tool=callgrind --separate-callers=1 --separate-recs=2 --trace-children=yes \
        --collect-atstart=no --toggle-collect=BackendRun --vgdb=no \
        --callgrind-out-file="$dir/truth/callgrind.out.%p" --log-file="$dir/truth/valgrind.%p.log"
    pg_bench truth
    pg_stop
    mapfile -t files < <(grep -lw PostgresMain "$dir"/truth/callgrind.out.*)
    [ "${#files[@]}" -gt 0 ] || { echo "bench-graph: no backend among $dir/truth/callgrind.out.*" >&2; exit 1; }
    printf '%s\n' "${files[@]}" >"$dir/truth.files"
    python3 "$here/callgrind_edges.py" "${files[@]}" "$bin" >"$dir/truth.edges" 2>"$dir/truth.log"
}

# pg_record MODE DATA: the same transactions recorded in MODE, attached to the postmaster (its
# processes forked later are recorded too: perf's per-process events are inherited) until it
# exits after the run.
pg_record() {
    local mode=$1 data=$2 recording
    pg_start "$dir"
    case $mode in
        fp) "$hottext" record --per-process --pid "$pg_pid" --frequency "$freq" -o "$data" ;;
        dwarf) perf record -q -e cpu-clock:u -F "$freq" --call-graph dwarf,2048 -p "$pg_pid" -o "$data" ;;
        none) perf record -q -e cpu-clock:u -F "$freq" -p "$pg_pid" -o "$data" ;;
        *) echo "bench-graph: unknown mode $mode (fp, dwarf, none)" >&2; exit 2 ;;
    esac >"$dir/$mode.record.log" 2>&1 &
    recording=$!
    # perf opens its events after it creates the file; a backend forked before that would be
    # missed.
    for _ in $(seq 150); do [ -s "$data" ] && break; sleep 0.2; done
    sleep 2
    pg_bench "$mode"
    pg_stop
    wait "$recording"
}
