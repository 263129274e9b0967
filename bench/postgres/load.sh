#!/usr/bin/env bash
# The load of one measured run (run.sh passes it to `hottext ab --load`):
#   load.sh PGBENCH SOCKET select|tpcb SECONDS CPU
# Loads the tables into shared_buffers (prewarm.sql), then runs
# pgbench with 2 clients pinned to CPU and prints its report, whose "latency average" is
# measured (progress reporting, -P, makes pgbench time every transaction instead of deriving
# the average from tps), then "latency p99 = X ms" from its per-transaction log (--log).
set -euo pipefail
pgbench=$1 sock=$2 mode=$3 seconds=$4 cpu=$5
psql=$(dirname "$pgbench")/psql
taskset -c "$cpu" "$psql" -qAt -h "$sock" -U postgres postgres -f "$(dirname "$0")/prewarm.sql" >/dev/null
flags=""
[ "$mode" = select ] && flags="-S"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# -P longer than the run: no progress lines, but measured latencies.
taskset -c "$cpu" "$pgbench" -n $flags -c 2 -j 2 -T "$seconds" -P $((seconds + 60)) \
    --log --log-prefix="$tmp/tx" -h "$sock" -U postgres postgres
# Log lines: client transaction latency_us script epoch_s epoch_us
cat "$tmp"/tx* | awk '{ print $3 }' | sort -n | awk '
    { v[NR] = $1 }
    END {
        if (NR == 0) { print "load.sh: pgbench logged no transactions" > "/dev/stderr"; exit 1 }
        i = int(NR * 0.99); if (i < NR * 0.99) i++; if (i < 1) i = 1
        printf "latency p99 = %.3f ms (%d transactions)\n", v[i] / 1000, NR
    }'
