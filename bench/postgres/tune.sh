#!/usr/bin/env bash
# `hottext tune` on PostgreSQL 15 under bench/postgres's select-only load, with every knob
# (those this machine lacks are reported so). Needs the build and data of `make bench-postgres`
# (BENCH_DIR, default /tmp/hottext-pg). Writes $BENCH_DIR/out/tune-select.json and prints the
# table. Root (THP is system-wide; tune puts it back).
#   bash bench/postgres/tune.sh
# Environment: VARIANT (the server binary, default cdsort: hottext's default layout),
# DURATION (seconds a pgbench run, default 5), BUDGET (minutes, default 20), MAX_RUNS (12),
# KNOBS (comma-separated, default every knob), LAYOUTS (other variants for the layout knob,
# default "default bolt-fn lld-cdsort c3"), OUT (the JSON's name, default tune-select).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${BENCH_DIR:-/tmp/hottext-pg}
variant=${VARIANT:-cdsort}
duration=${DURATION:-5}
user=${PG_USER:-hottext-pg}
inst=$dir/inst sock=$dir/sock data=$dir/data out=$dir/out
hottext=$root/target/release/hottext
[ -x "$dir/v/$variant/bin/postgres" ] && [ -f "$dir/data.ready" ] ||
    { echo "bench-postgres tune: run 'make bench-postgres' first (no $dir/v/$variant or data)" >&2; exit 2; }
server_of() { echo "exec setpriv --reuid=$user --regid=$user --clear-groups -- $dir/v/$1/bin/postgres -D $data"; }
server=$(server_of "$variant")
layouts=()
for v in ${LAYOUTS-default bolt-fn lld-cdsort c3}; do
    [ -x "$dir/v/$v/bin/postgres" ] || { echo "bench-postgres tune: no variant $v in $dir/v" >&2; exit 2; }
    layouts+=(--layout "$v=$(server_of "$v")")
done
knobs=()
[ -n "${KNOBS:-}" ] && knobs=(--knobs "$KNOBS")
json=$out/${OUT:-tune-select}.json
"$hottext" tune --server "$server" "${layouts[@]}" "${knobs[@]}" --binary "$dir/v/$variant/bin/postgres" --ready "$inst/bin/pg_isready -q -h $sock" \
    --load "bash $here/load.sh $inst/bin/pgbench $sock select $duration 0" \
    --metric 'tps = ([0-9.]+)' --metric-name tps \
    --budget "${BUDGET:-20}" --max-runs "${MAX_RUNS:-12}" --json >"$json"
python3 - "$json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("| knob | setting | tps B/A [95 % interval] | rounds | verdict (why it stopped) |")
print("| --- | --- | --- | --- | --- |")
for t in r["trials"] + ([r["confirmation"]] if r["confirmation"] else []):
    ratio = "%.3f [%.3f, %.3f]" % tuple(t["ratio"]) if t["ratio"] else "-"
    print(f"| {t['knob']} | {t['setting']} | {ratio} | {t['runs']} | {t['verdict']} ({t['stopped']}) |")
for k, why in r["unavailable"]:
    print(f"| {k} | not available here: {why} | | | |")
print()
print("to apply:", "; ".join(r["apply"]) or "nothing (no setting beat the current one)")
PY
