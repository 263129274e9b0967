#!/bin/bash
# Cost of hottext_hugify_self() per 2 MiB page, per backing.
#   bench/hugify-cost/run.sh [RUNS]      (default 11 runs per case; root for hugetlb)
# Each run is a fresh process whose 16 MiB hot range (8 pages) has not been
# touched before the call. Cases:
#   anon        copy into anonymous THP (MADV_HUGEPAGE + MADV_COLLAPSE), mremap
#   file-warm   page cache already holds the text as 2 MiB folios: map the file
#               again with MADV_HUGEPAGE, populate, mremap
#   file-cold   fresh copy of the binary, synced to disk (small clean folios,
#               as after installing a package): the above plus eviction and
#               re-reading the range from disk into 2 MiB folios
#   file-dirty  fresh copy not yet written back (as right after a build):
#               file-cold plus writing the range back first
#   hugetlb     copy into MAP_HUGETLB pages (pool filled for the run, restored)
# Prints a table and writes RESULTS.part.md next to this script (git-ignored), to paste into
# bench/RESULTS.md.
set -eu
RUNS=${1:-11}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RT=$ROOT/runtime
W=$(mktemp -d /tmp/hugify-cost.XXXXXX)
NRHP=/proc/sys/vm/nr_hugepages
NRHP_SAVED=$(cat $NRHP)
cleanup() { echo "$NRHP_SAVED" > $NRHP 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT

make -s -C "$RT" > /dev/null
"$RT/tests/gen_hot.sh" 2900 340 .text.hot hot_ > "$W/hot.S"     # ~15.6 MiB
"$RT/tests/gen_hot.sh" 200 340 .text.cold cold_ > "$W/cold.S"   # ~1.1 MiB, so rounding up gives 8 pages
gcc -O2 -I"$RT/include" "$HERE/bench.c" "$W/hot.S" "$W/cold.S" -Wl,-T,"$RT/tests/hot.ld" \
    "$RT/build/lib/libhottext.a" -o "$W/bench"

load=$(cut -d' ' -f1 /proc/loadavg)
echo "load average before: $load (timings are only meaningful on an idle machine)"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A MED PAGES
measure() { # NAME ENV...: runs the bench RUNS times; MED[NAME] = median ns
    local name=$1 i bin out
    shift
    : > "$W/$name.ns"
    for i in $(seq "$RUNS"); do
        bin=$W/bench
        if [ "$name" = file-cold ] || [ "$name" = file-dirty ]; then bin=$W/bench.$i; cp "$W/bench" "$bin"; fi
        if [ "$name" = file-cold ]; then sync "$bin"; fi
        if [ "$name" = file-warm ] && [ "$i" = 1 ]; then env HOTTEXT_BACKING=file "$bin" > /dev/null; fi # fill the cache
        out=$(env "$@" "$bin")
        case $out in *status=OK*) ;; *) echo "$name: $out" >&2; return 1 ;; esac
        echo "$out" | sed 's/.*ns=\([0-9]*\).*/\1/' >> "$W/$name.ns"
        PAGES[$name]=$(echo "$out" | sed 's/.*pages=\([0-9]*\).*/\1/')
        if [ "$bin" != "$W/bench" ]; then rm -f "$bin"; fi
    done
    MED[$name]=$(median < "$W/$name.ns")
}
start=$(date +%s)
measure anon HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=0
measure file-warm HOTTEXT_BACKING=file
measure file-cold HOTTEXT_BACKING=file
measure file-dirty HOTTEXT_BACKING=file
cases="anon file-warm file-cold file-dirty"
if echo 8 > $NRHP 2>/dev/null && [ "$(cat $NRHP)" -ge 8 ]; then
    measure hugetlb HOTTEXT_BACKING=hugetlb HOTTEXT_PERF_MAP=0
    cases="$cases hugetlb"
fi
echo "$NRHP_SAVED" > $NRHP

table=$(for c in $cases; do
    awk -v c="$c" -v m="${MED[$c]}" -v p="${PAGES[$c]}" -v lo="$(sort -n "$W/$c.ns" | head -1)" \
        -v hi="$(sort -n "$W/$c.ns" | tail -1)" \
        'BEGIN { printf "| %s | %d | %.3f | %.3f | %.3f | %.3f .. %.3f |\n", c, p, m / 1e6, m / 1e6 / p, lo / 1e6 / p, lo / 1e6, hi / 1e6 }'
done)
kernel=$(uname -r)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)
cat > "$HERE/RESULTS.part.md" <<MD
### hugify_self() cost per 2 MiB page

Command: \`bench/hugify-cost/run.sh $RUNS\` ($RUNS fresh processes per case, median;
$(date -u +%Y-%m-%d), Linux $kernel, $cpu, $(nproc) vCPUs (Firecracker VM), THP \`$thp\`,
load average $load at start). Goal: under 1 ms per page.
$(awk -v l="$load" 'BEGIN { if (l >= 1) print "\nMeasured while other work ran (load " l " on 2 vCPUs): the minimum is the better estimate of the\nuncontended cost." }')

| case | pages | median ms | median ms per 2 MiB page | min ms per page | min .. max ms |
| --- | --- | --- | --- | --- | --- |
$table

- anon: copy into anonymous THP (MADV_HUGEPAGE before the copy, MADV_COLLAPSE per page), mprotect R+X, mremap; perf map off.
- file-warm: the page cache already holds the text as 2 MiB folios (an earlier process took the file path): map the
  file again with MADV_HUGEPAGE, MADV_POPULATE_READ, mremap. Such a process is in fact already PMD-mapped by the kernel
  at its first touch of the text; the bench calls hottext before touching it.
- file-cold: a fresh copy of the binary, synced (small clean folios, as after installing a package): the above,
  plus MADV_DONTNEED, POSIX_FADV_DONTNEED and re-reading 16 MiB from disk into 2 MiB folios. Paid once per binary
  and boot: later processes find the 2 MiB folios (file-warm, or PMD-mapped by the kernel outright).
- file-dirty: a copy just written (as right after a build): file-cold plus writing the range back first.
- hugetlb: copy into MAP_HUGETLB pages (pool filled for the run); perf map off.
MD
echo
echo "| case | pages | median ms | median ms per 2 MiB page | min ms per page | min .. max ms |"
echo "$table"
echo "wrote $HERE/RESULTS.part.md ($(($(date +%s) - start)) s)"
