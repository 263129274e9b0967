#!/usr/bin/env bash
# `make bench-postgres`: PostgreSQL 15 (Debian source package) under pgbench, default build
# against hottext's layouts, huge pages and BOLT, each measured with `hottext ab`.
#
#   1. build.sh: PostgreSQL with -O2 -ffunction-sections -fno-omit-frame-pointer, objects kept,
#      every binary linked with -Wl,--emit-relocs (BOLT needs the relocations to move functions;
#      all configurations carry the flag, so it is not a difference between them)
#   2. initdb, pgbench -i -s $SCALE (fits in shared_buffers), server on a Unix socket only
#   3. record the server (pinned to CPU $CPU) under select-only then tpcb-like load with
#      `hottext record --cpu`, profile, order with C3 and Pettis-Hansen; a second recording
#      without call chains for BOLT (perf2bolt cannot read -g profiles)
#   4. relink `postgres` from the same objects: control (no order), ph, c3, cdsort, c3 +
#      -lhottext_auto;
#      the default build with the preload runtime mapping its whole text (HOTTEXT_WHOLE_TEXT=1);
#      BOLT 19: -reorder-functions=cdsort alone, and with block reordering, splitting, -hugify.
#      Where BOLT's lead comes from (not in the default CONFIGS): BOLT rewriting the code with no
#      reordering (bolt-none; bolt-none-noalign without its 64 B function alignment;
#      bolt-none-nopasses without the passes that delete code), BOLT's order keeping the nops
#      (bolt-keepnops), lld with no order
#      (lld-control) and lld ordering our profile's call edges itself (lld-cdsort, lld-hfsort),
#      and C3 with every hot function on a 64 B boundary (c3-align64); cdsort with
#      `--align-cache-lines` (cdsort-lines) and with BOLT's alignment rule (cdsort-align32)
#   5. per configuration: evict the binaries from the page cache, start it once to record
#      AnonHugePages / FilePmdMapped and `hottext verify --pid`, then `hottext ab` against the
#      default build, select-only and tpcb-like, 2 clients (load.sh: pg_prewarm, pgbench with
#      measured latencies, their 99th percentile); metrics tps, latency-ms, p99-ms
#   6. sim.py: instructions, iTLB and i-cache misses per transaction of each layout, simulated
#      by cachegrind (for machines without a PMU; SIMULATE=0 skips it); model_check.py: whether
#      the layout model behind `order --algorithm auto` ranks the configurations as the
#      simulation does
#   7. bench/postgres/RESULTS.part.md: the table (APPEND_RESULTS=1 also appends it to
#      bench/RESULTS.md)
#
# Environment: BENCH_DIR (default /tmp/hottext-pg), SCALE (pgbench scale, default 10 = 160 MB),
# RUNS (ab rounds, >= 6, default 10), DURATION (seconds a pgbench run, default 5),
# RECORD_SECONDS (default 20), CPU (server CPU, default the last), CONFIGS (default all but the
# decomposition ones, in the order below), WORKLOADS (default "select tpcb"), MEASURE (1; 0 skips
# the timed `hottext ab` runs, e.g. for a simulation-only run on a busy machine), SIMULATE (1),
# SIM_TX (2000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${BENCH_DIR:-/tmp/hottext-pg}
scale=${SCALE:-10}
runs=${RUNS:-10}
duration=${DURATION:-5}
record_s=${RECORD_SECONDS:-20}
cpu=${CPU:-$(($(nproc) - 1))}
loadcpu=0
configs=${CONFIGS:-control ph c3 cdsort c3-huge whole-huge bolt-fn bolt-full}
workloads=${WORKLOADS:-select tpcb}
export BENCH_DIR=$dir
hottext=$root/target/release/hottext
inst=$dir/inst
src=$dir/src
data=$dir/data
sock=$dir/sock
out=$dir/out
bolt_bin=/usr/lib/llvm-19/bin
lld_flags="-fuse-ld=lld -B/usr/lib/llvm-19/bin"
user=${PG_USER:-hottext-pg}
mkdir -p "$out" "$sock"
# PostgreSQL refuses to run as root: an unprivileged user owns the cluster and the socket.
id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
chown "$user:" "$sock"
as_user() { setpriv --reuid="$user" --regid="$user" --clear-groups -- "$@"; }

step() { printf '\n== %s  (%s)\n' "$*" "$(date +%T)"; }
t0=$SECONDS

[ -x "$hottext" ] || { echo "bench-postgres: $hottext is missing: run 'make build' first" >&2; exit 2; }
step "build PostgreSQL (bench/postgres/build.sh)"
bash "$here/build.sh"
make --no-print-directory -C "$root/runtime" >/dev/null

# ---- server control ---------------------------------------------------------------------
# A configuration is a directory $dir/v/NAME with bin/postgres and share, lib linked to the
# installation (postgres finds its share directory relative to its own binary).
variant_dir() {
    local d=$dir/v/$1
    mkdir -p "$d/bin"
    ln -sfn "$inst/share" "$d/share"
    ln -sfn "$inst/lib" "$d/lib"
    echo "$d"
}
# The server command of a configuration, as `hottext ab` runs it (sh -c, pinned by ab).
server_cmd() {
    local env=""
    case $1 in
        whole-huge) env="HOTTEXT_WHOLE_TEXT=1 LD_PRELOAD=$root/runtime/build/lib/libhottext_preload.so " ;;
    esac
    # setpriv execs: the server's pid is the postmaster's
    echo "${env}exec setpriv --reuid=$user --regid=$user --clear-groups -- $dir/v/$1/bin/postgres -D $data"
}
pg_ready() { "$inst/bin/pg_isready" -q -h "$sock"; }
load_cmd() { # select|tpcb SECONDS: prewarm, pgbench, p99 (load.sh)
    echo "bash $here/load.sh $inst/bin/pgbench $sock $1 $2 $loadcpu"
}
# Start a configuration in the background, pinned to $cpu; sets $server_pid (the postmaster).
start_server() {
    taskset -c "$cpu" sh -c "$(server_cmd "$1")" >"$out/server-$1.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 300); do pg_ready && return 0; sleep 0.1; done
    echo "bench-postgres: server $1 did not answer; $out/server-$1.log:" >&2
    tail -20 "$out/server-$1.log" >&2
    return 1
}
stop_server() {
    kill -INT "$server_pid" 2>/dev/null || true # fast shutdown
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
server_pid=""
trap '[ -z "$server_pid" ] || stop_server' EXIT

# ---- database -----------------------------------------------------------------------------
v=$(variant_dir default)
cp "$inst/bin/postgres" "$v/bin/postgres"
if [ ! -f "$dir/data.ready" ]; then
    step "initdb and pgbench -i -s $scale"
    rm -rf "$data"
    mkdir -p "$data" && chown "$user:" "$data"
    as_user "$inst/bin/initdb" -N -D "$data" -U postgres -A trust >"$out/initdb.log"
    cat >>"$data/postgresql.conf" <<EOF
# bench/postgres/run.sh
listen_addresses = ''
unix_socket_directories = '$sock'
shared_buffers = 1GB
huge_pages = off
max_connections = 20
synchronous_commit = off
max_wal_size = 4GB
checkpoint_timeout = 30min
logging_collector = off
EOF
    start_server default
    "$inst/bin/pgbench" -i -q -s "$scale" -h "$sock" -U postgres postgres >"$out/pgbench-init.log" 2>&1
    stop_server
    touch "$dir/data.ready"
fi

# ---- recordings ---------------------------------------------------------------------------
step "record the default build under load (hottext record, then perf without call chains for BOLT)"
half=$(((record_s + 1) / 2))
start_server default
"$inst/bin/psql" -qAt -h "$sock" -U postgres postgres -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm"
sh -c "$(load_cmd select $((half + 3))); $(load_cmd tpcb $((half + 3)))" >"$out/record-load.log" 2>&1 &
load=$!
sleep 2
"$hottext" record -o "$out/perf.data" --pid "$server_pid" --duration "$record_s" --cpu "$cpu"
wait "$load"
sh -c "$(load_cmd select $((half + 3))); $(load_cmd tpcb $((half + 3)))" >"$out/record-load-bolt.log" 2>&1 &
load=$!
sleep 2
rm -f "$out/bolt.fdata"
perf record -e cpu-clock -C "$cpu" -o "$out/bolt.data" -- sleep "$record_s" 2>"$out/perf-bolt.log"
wait "$load"
stop_server

step "profile and order"
"$hottext" profile "$out/perf.data" --binary "$v/bin/postgres" -o "$out/postgres.profile"
"$hottext" order "$out/postgres.profile" --binary "$v/bin/postgres" --format ld-script -o "$out/c3.ld"
"$hottext" order "$out/postgres.profile" --binary "$v/bin/postgres" --algorithm ph --format ld-script -o "$out/ph.ld"
"$hottext" order "$out/postgres.profile" --binary "$v/bin/postgres" --algorithm cdsort --format ld-script -o "$out/cdsort.ld"
"$hottext" order "$out/postgres.profile" --binary "$v/bin/postgres" --algorithm cdsort --format ld-script \
    --align-cache-lines -o "$out/cdsort-lines.ld"
"$hottext" order "$out/postgres.profile" --binary "$v/bin/postgres" --format lld-cgprofile -o "$out/cg.txt"
# Every hot function on a cache-line start: the C3 script with an ALIGN before each pattern.
sed 's/^    \*(/    . = ALIGN(64);\n    *(/' "$out/c3.ld" >"$out/c3-align64.ld"
# BOLT's rule on cdsort's order: a hot function starts on a 64 B line whenever that costs at most
# 32 B of padding (after the compiler's own 16 B alignment), whether or not it saves a line.
sed 's/^    \*(/    . = (-ALIGN(16) \& 63) <= 32 ? ALIGN(64) : .;\n    *(/' "$out/cdsort.ld" >"$out/cdsort-align32.ld"

# ---- relinks ------------------------------------------------------------------------------
relink() { # NAME LDFLAGS_EX
    local d
    d=$(variant_dir "$1")
    rm -f "$src/src/backend/postgres"
    make -C "$src/src/backend" postgres LDFLAGS_EX="$2" >"$out/link-$1.log" 2>&1 ||
        { tail -20 "$out/link-$1.log"; exit 1; }
    cp "$src/src/backend/postgres" "$d/bin/postgres"
}
bolt() { # NAME OPTIONS...
    local name=$1 d
    shift
    d=$(variant_dir "$name")
    "$bolt_bin/llvm-bolt" "$v/bin/postgres" -o "$d/bin/postgres" -data="$out/bolt.fdata" "$@" \
        >"$out/bolt-$name.log" 2>&1 || { tail -20 "$out/bolt-$name.log"; exit 1; }
}
step "relink postgres from the same objects, and BOLT it"
for c in $configs; do
    case $c in
        control) relink control "" ;;
        ph) relink ph "-Wl,-T,$out/ph.ld" ;;
        c3) relink c3 "-Wl,-T,$out/c3.ld" ;;
        cdsort) relink cdsort "-Wl,-T,$out/cdsort.ld" ;;
        cdsort-lines) relink cdsort-lines "-Wl,-T,$out/cdsort-lines.ld" ;;
        cdsort-align32) relink cdsort-align32 "-Wl,-T,$out/cdsort-align32.ld" ;;
        c3-huge) relink c3-huge "-Wl,-T,$out/c3.ld -L$root/runtime/build/lib -lhottext_auto" ;;
        c3-align64) relink c3-align64 "-Wl,-T,$out/c3-align64.ld" ;;
        lld-control) relink lld-control "$lld_flags" ;;
        lld-cdsort) relink lld-cdsort "$lld_flags -Wl,--call-graph-ordering-file=$out/cg.txt -Wl,--call-graph-profile-sort=cdsort" ;;
        lld-hfsort) relink lld-hfsort "$lld_flags -Wl,--call-graph-ordering-file=$out/cg.txt -Wl,--call-graph-profile-sort=hfsort" ;;
        whole-huge) cp "$v/bin/postgres" "$(variant_dir whole-huge)/bin/postgres" ;;
        bolt-fn | bolt-full | bolt-none | bolt-keepnops | bolt-none-noalign | bolt-none-nopasses)
            if [ ! -f "$out/bolt.fdata" ]; then
                # The suffixed perf2bolt-19 did not convert a profile here; this one does.
                "$bolt_bin/perf2bolt" -nl -p "$out/bolt.data" -o "$out/bolt.fdata" "$v/bin/postgres" \
                    >"$out/perf2bolt.log" 2>&1 || { tail -20 "$out/perf2bolt.log"; exit 1; }
            fi
            if [ "$c" = bolt-fn ]; then
                bolt bolt-fn -reorder-functions=cdsort -skip-funcs=ExecInterpExpr/1
            elif [ "$c" = bolt-none ]; then
                bolt bolt-none -reorder-functions=none -skip-funcs=ExecInterpExpr/1
            elif [ "$c" = bolt-none-noalign ]; then
                # Functions start wherever the previous one ends, as the linker packed them.
                bolt bolt-none-noalign -reorder-functions=none -align-functions=1 \
                    -align-functions-max-bytes=0 -skip-funcs=ExecInterpExpr/1
            elif [ "$c" = bolt-none-nopasses ]; then
                # No rewriting pass that removes instructions or blocks: what is left is BOLT
                # re-emitting the code (its own alignment, no gcc padding, short branches).
                bolt bolt-none-nopasses -reorder-functions=none -simplify-conditional-tail-calls=0 \
                    -eliminate-unreachable=0 -strip-rep-ret=0 -peepholes=none -skip-funcs=ExecInterpExpr/1
            elif [ "$c" = bolt-keepnops ]; then
                bolt bolt-keepnops -reorder-functions=cdsort -keep-nops -skip-funcs=ExecInterpExpr/1
            else
                # ExecInterpExpr (computed gotos) stops BOLT 19 here, with either option set and
                # depending on the profile: "unable to get new address corresponding to input
                # address ... Consider adding this function to --skip-funcs"; so both skip it.
                # The flags BOLT's docs recommend (-split-eh moves C++ landing pads: none in C,
                # kept so that the command is theirs), with cdsort as in bolt-fn, and -hugify.
                bolt bolt-full -reorder-functions=cdsort -reorder-blocks=ext-tsp -split-functions \
                    -split-all-cold -split-eh -hugify -skip-funcs=ExecInterpExpr/1
            fi
            ;;
        *) echo "bench-postgres: unknown configuration $c" >&2; exit 2 ;;
    esac
    case $c in ph | c3 | cdsort | cdsort-lines | cdsort-align32 | c3-huge | c3-align64) "$hottext" verify --binary "$dir/v/$c/bin/postgres" >"$out/verify-$c.txt" || true ;; esac
done

# ---- measurements -------------------------------------------------------------------------
evict() { # drop the binaries from the page cache (the data stays)
    python3 - "$@" <<'EOF'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(os.path.realpath(p), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
}
machine="$(nproc) vCPUs $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"), Linux $(uname -r), THP $(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled)"
echo "$machine" >"$out/machine.txt"
for c in $configs; do
    [ "${MEASURE:-1}" = 1 ] || break
    step "$c against default"
    evict "$dir/v/default/bin/postgres" "$dir/v/$c/bin/postgres"
    # huge pages of the text: one start with a short load, then smaps_rollup of the postmaster
    start_server "$c"
    "$inst/bin/pgbench" -n -S -c 2 -j 2 -T 2 -h "$sock" -U postgres postgres >/dev/null 2>&1
    awk '/^(AnonHugePages|FilePmdMapped):/ {printf "%s %s kB\n", $1, $2}' "/proc/$server_pid/smaps_rollup" \
        | tee "$out/huge-$c.txt"
    "$hottext" verify --pid "$server_pid" >"$out/verify-pid-$c.txt" 2>&1 || true
    stop_server
    for w in $workloads; do
        echo "-- $w"
        "$hottext" ab --runs "$runs" --warmup 1 --cpu "$cpu" \
            --server-a "$(server_cmd default)" --server-b "$(server_cmd "$c")" \
            --ready "$inst/bin/pg_isready -q -h $sock" --load "$(load_cmd "$w" "$duration")" \
            --metric 'tps = ([0-9.]+)' --metric-name tps --higher-is-better tps \
            --metric 'latency average = ([0-9.]+) ms' --metric-name latency-ms \
            --metric 'latency p99 = ([0-9.]+) ms' --metric-name p99-ms \
            --json >"$out/ab-$c-$w.json" 2>"$out/ab-$c-$w.err" ||
            { tail -20 "$out/ab-$c-$w.err"; exit 1; }
        pgrep -f "$dir/v/.*/bin/postgres" >/dev/null &&
            { echo "bench-postgres: a postgres was left running after ab" >&2; exit 1; }
    done
done

if [ "${SIMULATE:-1}" = 1 ]; then
    # Layouts only: c3-huge and whole-huge share c3's and the default's (see sim.py).
    sim_configs="default"
    for c in $configs; do case $c in c3-huge | whole-huge) ;; *) sim_configs="$sim_configs $c" ;; esac; done
    step "simulated iTLB and i-cache misses under cachegrind: $sim_configs"
    python3 "$here/sim.py" --dir "$dir" --configs "$sim_configs" --workloads "$workloads" \
        --cpu "$cpu" --load-cpu "$loadcpu" --user "$user" --tx "${SIM_TX:-2000}"
fi

step "table"
python3 "$here/table.py" --out-dir "$out" --configs "$configs" --workloads "$workloads" \
    --machine "$machine" --runs "$runs" --duration "$duration" --scale "$scale" \
    --build-seconds "$(cat "$dir/build-seconds" 2>/dev/null || echo '?')" \
    --total-seconds $((SECONDS - t0)) --note "${NOTE:-}" >"$here/RESULTS.part.md"
if [ "${SIMULATE:-1}" = 1 ]; then
    # The ranking --algorithm auto relies on, checked against the simulation's.
    { echo; echo "Layout model (\`hottext order --binary CONFIG --json\`, \`current\`) against the simulation:"
      echo; python3 "$here/model_check.py" --dir "$dir" --hottext "$hottext" --configs "$sim_configs" \
        --workloads "$workloads"; } >>"$here/RESULTS.part.md"
fi
cat "$here/RESULTS.part.md"
if [ "${APPEND_RESULTS:-0}" = 1 ]; then
    { echo; cat "$here/RESULTS.part.md"; } >>"$root/bench/RESULTS.md"
fi
echo "bench-postgres: done in $((SECONDS - t0)) s"
