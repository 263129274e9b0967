#!/bin/bash
# Tests of the hottext runtime. Each test runs a real program (hotprog.c with
# several MiB of generated hot code) and checks, through the program's own
# /proc/self/smaps report, whether the hot range is on huge pages, that the
# text is intact (checksum before == after, and stdout identical to a run with
# HOTTEXT_HUGIFY=0) and which status the library reports.
#
# Run from runtime/ after `make` (make test does both). Needs root for the
# sysfs cases (THP "never", hugetlb pool); every sysfs value changed here is
# restored on exit, whatever happens. A missing facility is a FAIL that names
# it, never a silent skip. The last line is "N passed, N failed".
set -u
# Each test sets the HOTTEXT_* variables it means; none leak in from outside.
for v in $(compgen -e | grep '^HOTTEXT_'); do unset "$v"; done
cd "$(dirname "$0")/.."
RT=$PWD
LIB=$RT/build/lib
T=$RT/build/tests
mkdir -p "$T"
CC=${CC:-gcc}
CFLAGS="-O2 -Wall -Wextra -Werror -I$RT/include"

PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1: $2"; }

THP=/sys/kernel/mm/transparent_hugepage/enabled
NRHP=/proc/sys/vm/nr_hugepages
THP_SAVED=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $THP 2>/dev/null)
NRHP_SAVED=$(cat $NRHP 2>/dev/null)
restore() {
    [ -n "$THP_SAVED" ] && echo "$THP_SAVED" > $THP 2>/dev/null
    [ -n "$NRHP_SAVED" ] && echo "$NRHP_SAVED" > $NRHP 2>/dev/null
}
trap restore EXIT
trap 'restore; exit 130' INT TERM

# ---------------------------------------------------------------- build
build() {
    set -e
    tests/gen_hot.sh 1000 340 .text.hot hot_ > "$T/hot.S"      # ~5.4 MiB hot
    tests/gen_hot.sh 200 340 .text.cold cold_ > "$T/cold.S"    # ~1.1 MiB cold after it
    tests/gen_hot.sh 150 340 .text.hot hot_ > "$T/small.S"     # ~0.8 MiB hot
    for s in hot cold small; do $CC -c "$T/$s.S" -o "$T/$s.o"; done
    local SRC=tests/hotprog.c HOTLD="-Wl,-T,tests/hot.ld" P2M="-Wl,-z,max-page-size=0x200000"
    # Linked with the API, markers, file offsets congruent to 2 MiB.
    $CC $CFLAGS -DHOTPROG_API $SRC "$T/hot.o" "$T/cold.o" $HOTLD $P2M "$LIB/libhottext.a" -o "$T/api"
    # Same, but the hot text's file offset is not 2 MiB-aligned: no file path.
    $CC $CFLAGS -DHOTPROG_API $SRC "$T/hot.o" "$T/cold.o" -Wl,-T,tests/hot_offset.ld "$LIB/libhottext.a" -o "$T/api_4k"
    # No markers.
    $CC $CFLAGS -DHOTPROG_API $SRC "$T/hot.o" "$T/cold.o" "$LIB/libhottext.a" -o "$T/api_nomark"
    # Hot range under 2 MiB with nothing after it to round into.
    $CC $CFLAGS -DHOTPROG_API $SRC "$T/small.o" $HOTLD $P2M "$LIB/libhottext.a" -o "$T/api_small"
    # Against the shared library (the program does not export the markers).
    $CC $CFLAGS -DHOTPROG_API $SRC "$T/hot.o" "$T/cold.o" $HOTLD $P2M -L"$LIB" -lhottext -Wl,-rpath,"$LIB" -o "$T/api_so"
    # Zero code change: one flag, dynamic and static programs, three linkers.
    $CC $CFLAGS -DHOTPROG_LINKED $SRC "$T/hot.o" "$T/cold.o" $HOTLD $P2M -L"$LIB" -lhottext_auto -o "$T/auto"
    $CC $CFLAGS -DHOTPROG_LINKED -static $SRC "$T/hot.o" "$T/cold.o" $HOTLD $P2M -L"$LIB" -lhottext_auto -o "$T/auto_static"
    $CC $CFLAGS -DHOTPROG_LINKED -fuse-ld=gold $SRC "$T/hot.o" "$T/cold.o" -L"$LIB" -lhottext_auto -o "$T/auto_gold"
    # For LD_PRELOAD: markers only in .symtab (not exported), and no markers.
    $CC $CFLAGS $SRC "$T/hot.o" "$T/cold.o" $HOTLD $P2M -o "$T/plain"
    $CC $CFLAGS $SRC "$T/hot.o" "$T/cold.o" -o "$T/plain_nomark"
    # LD_PRELOAD fault injection: failing mremap and open (see the file).
    $CC -O2 -Wall -Wextra -Werror -shared -fPIC tests/fault_shim.c -o "$T/fault_shim.so" -ldl
    # The range parser's fuzz target as a plain program under ASan and UBSan (see the file).
    $CC -O1 -g -Wall -Wextra -Werror -std=gnu11 -fsanitize=address,undefined -fno-sanitize-recover=all \
        -DFUZZ_SMOKE -Iinclude tests/fuzz_ranges.c src/ranges.c src/options.c src/procfs.c -o "$T/fuzz_ranges"
    set +e
}
(build) > "$T/build.log" 2>&1
if [ $? -ne 0 ]; then
    cat "$T/build.log"
    fail build "could not build the test programs (log above)"
    echo "$PASS passed, $FAIL failed"
    exit 1
fi
# The gold build uses no hot.ld (gold has no INSERT); mold is optional on
# the machine but then its test fails by name below.

# ---------------------------------------------------------------- helpers
# run NAME PROG MODE [ENV=VAL...]: runs a fresh copy of $T/PROG (so its page
# cache holds small folios, as after a build: results do not depend on what
# ran before) with the environment given; PROG "@NAME" reruns the copy of an
# earlier test. stdout goes to $T/NAME.out, stderr to $T/NAME.err, and a
# baseline run with HOTTEXT_HUGIFY=0 to $T/NAME.base. Sets RC.
mkdir -p "$T/run"
run() {
    local name=$1 prog=$2 mode=$3 bin
    shift 3
    if [ "${prog#@}" != "$prog" ]; then
        bin=$T/run/${prog#@}
    else
        bin=$T/run/$name
        cp "$T/$prog" "$bin"
    fi
    # api_4k's load address is random modulo 2 MiB, and one load in 512 puts its hot text where
    # the file path applies after all (CI saw it once); without ASLR its address is fixed at
    # one that never does.
    local fixed=()
    [ "$prog" = api_4k ] && fixed=(setarch "$(uname -m)" -R)
    env HOTTEXT_PERF_MAP=0 "$@" "${fixed[@]}" "$bin" $mode > "$T/$name.out" 2> "$T/$name.err"
    RC=$?
    env HOTTEXT_PERF_MAP=0 "$@" HOTTEXT_HUGIFY=0 "${fixed[@]}" "$bin" $mode > "$T/$name.base" 2>/dev/null
}
field() { sed -n "s/^$2 .*\b$3=\([^ ]*\).*/\1/p" "$T/$1.err" | head -1; }
# expect NAME STATUS [MIN_HUGE_KB [MAX_HUGE_KB [BACKING]]]
expect() {
    local name=$1 st=$2 min=${3:-0} max=${4:-0} backing=${5:-}
    local got kb b
    got=$(field "$name" result status)
    kb=$(field "$name" smaps huge_kb)
    b=$(field "$name" result backing)
    if [ "$RC" -ne 0 ]; then fail "$name" "exit status $RC; stderr: $(tr '\n' '|' < "$T/$name.err")"; return; fi
    if ! cmp -s "$T/$name.out" "$T/$name.base"; then fail "$name" "stdout differs from the run with HOTTEXT_HUGIFY=0"; return; fi
    if [ "$(sed -n 1p "$T/$name.out" | cut -d' ' -f2)" != "$(sed -n 2p "$T/$name.out" | cut -d' ' -f2)" ]; then
        fail "$name" "checksum changed"; return
    fi
    if [ "$got" != "$st" ]; then fail "$name" "status $got, want $st; $(grep '^result' "$T/$name.err")"; return; fi
    if [ -z "$kb" ] || [ "$kb" -lt "$min" ] || [ "$kb" -gt "$max" ]; then
        fail "$name" "huge kB in the range: ${kb:-?}, want $min..$max"; return
    fi
    if [ -n "$backing" ] && [ "$b" != "$backing" ]; then fail "$name" "backing $b, want $backing"; return; fi
    ok "$name ($st, ${kb} kB huge${b:+, $b})"
}
# has NAME PATTERN WHAT: the test's stderr matches PATTERN.
has() { if grep -q -- "$2" "$T/$1.err"; then ok "$1: $3"; else fail "$1" "stderr lacks '$2' ($3)"; fi; }
need_root() { [ "$(id -u)" = 0 ] || { fail "$1" "needs root to write $2"; return 1; }; }

# The hot range of api is 5.4 MiB from a 2 MiB boundary with 1.1 MiB of cold
# code after it: rounding up stays in the text mapping, so 3 pages (6144 kB).
FULL=6144
# api_4k's hot text shares a segment with 4 KiB alignment; `run` starts it
# without ASLR at a load address that is not 2 MiB-aligned (3 pages here; 3
# or 4 at another one).
FULL4K=8192

# ---------------------------------------------------------------- positive
# The file path: the program file itself on 2 MiB page-cache folios.
run file_path api self HOTTEXT_BACKING=file
expect file_path OK $FULL $FULL file
has file_path "after evicting small folios" "small folios of a fresh file were evicted and read back as 2 MiB folios"
# The next process of the same file finds 2 MiB folios in the page cache and
# the kernel maps them with PMDs at the first touch, hottext or not.
run file_next_free @file_path none
expect file_next_free NOT_CALLED $FULL $FULL
run file_next_already @file_path self
expect file_next_already ALREADY_DONE $FULL $FULL
has file_next_already "FilePmdMapped" "says the kernel already maps the text with PMDs"

run auto_backing api self
expect auto_backing OK $FULL $FULL file

run anon_path api self HOTTEXT_BACKING=anon
expect anon_path OK $FULL $FULL anon

run anon_fallback_4k api_4k self
expect anon_fallback_4k OK $FULL $FULL4K anon
has anon_fallback_4k "not 2 MiB-aligned" "says why the file path did not apply"

if need_root hugetlb_pool $NRHP; then
    echo 4 > $NRHP
    if [ "$(cat $NRHP)" -lt 3 ]; then
        fail hugetlb_pool "could not reserve 3 hugetlb pages (nr_hugepages=$(cat $NRHP))"
    else
        run hugetlb_pool api self HOTTEXT_BACKING=hugetlb
        expect hugetlb_pool OK $FULL $FULL hugetlb
    fi
    echo "$NRHP_SAVED" > $NRHP
fi

run shared_lib api_so self
expect shared_lib OK $FULL $FULL

run max_pages api self HOTTEXT_MAX_PAGES=1
expect max_pages OK 2048 2048

run bad_env api self HOTTEXT_MAX_PAGES=lots HOTTEXT_BACKING=bogus HOTTEXT_VERBOSE=maybe
expect bad_env OK $FULL $FULL
if [ "$(grep -c '^hottext: HOTTEXT_' "$T/bad_env.err")" = 3 ]; then ok "bad_env: 3 warnings"; else
    fail bad_env_warns "want 3 warnings: $(grep '^hottext:' "$T/bad_env.err" | tr '\n' '|')"; fi

# No malloc on the start-up path (the test program counts them).
run no_malloc_anon api_4k self HOTTEXT_VERBOSE=1 HOTTEXT_PERF_MAP=1
expect no_malloc_anon OK $FULL $FULL4K anon
has no_malloc_anon "mallocs=0 " "no malloc during the anonymous path with verbose output and perf map"
pid=$(field no_malloc_anon result pid)
# The map it wrote is gone once it exited (else thousands of runs fill /tmp).
if grep -q "functions named in /tmp/perf-$pid.map" "$T/no_malloc_anon.err" && [ ! -e "/tmp/perf-$pid.map" ]; then
    ok "no_malloc_anon: /tmp/perf-$pid.map written, and removed at exit"; else
    fail no_malloc_anon_perf_map "/tmp/perf-$pid.map not written, or left after exit"; fi
rm -f "/tmp/perf-$pid.map"
# perfmap_keep: HOTTEXT_PERF_MAP=keep leaves it, for a perf report after the process.
run perfmap_keep api_4k self HOTTEXT_PERF_MAP=keep
pid=$(field perfmap_keep result pid)
if grep -q " hot_kernel$" "/tmp/perf-$pid.map" 2>/dev/null; then ok "perfmap_keep: /tmp/perf-$pid.map names hot_kernel after exit"; else
    fail perfmap_keep "/tmp/perf-$pid.map lacks hot_kernel"; fi
rm -f "/tmp/perf-$pid.map"
# perfmap_jit: a map that was there already (a JIT's) is appended to and left. These runs
# force the anonymous copy, which is what a perf map names, whatever api_4k's load address.
env HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=1 sh -c 'echo "1000 10 jit_code" > "/tmp/perf-$$.map"; exec "$0" self' \
    "$T/api_4k" > "$T/perfmap_jit.out" 2> "$T/perfmap_jit.err"
spid=$(sed -n 's/^result .*\bpid=\([0-9]*\).*/\1/p' "$T/perfmap_jit.err" | head -1)
if [ -n "$spid" ] && grep -q "^1000 10 jit_code$" "/tmp/perf-$spid.map" && grep -q " hot_kernel$" "/tmp/perf-$spid.map"; then
    ok "perfmap_jit: another writer's map is appended to and kept"; else
    fail perfmap_jit "/tmp/perf-$spid.map: $(head -c 200 "/tmp/perf-$spid.map" 2>&1 | tr '\n' '|')"; fi
[ -n "$spid" ] && rm -f "/tmp/perf-$spid.map"
# perfmap_symlink: a symlink planted at /tmp/perf-PID.map (sh's $$ is the PID the program
# execs into) must not be followed: the target stays as it was, the program runs on, and the
# library says why it wrote no map.
victim=$T/perfmap_victim
echo untouched > "$victim"
env HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=1 HOTTEXT_VERBOSE=1 sh -c 'ln -sfn "$0" "/tmp/perf-$$.map"; exec "$1" self' \
    "$victim" "$T/api_4k" > "$T/perfmap_symlink.out" 2> "$T/perfmap_symlink.err"
rc=$?
spid=$(sed -n 's/^result .*\bpid=\([0-9]*\).*/\1/p' "$T/perfmap_symlink.err" | head -1)
if [ "$rc" = 0 ] && [ "$(cat "$victim")" = untouched ] && grep -q "no perf map: cannot open /tmp/perf-.*symlink" "$T/perfmap_symlink.err"; then
    ok "perfmap_symlink: the symlink's target is untouched and the refusal is reported"
else
    fail perfmap_symlink "exit $rc, target now: $(head -c 80 "$victim"), stderr: $(grep -m2 'perf map\|hottext' "$T/perfmap_symlink.err" | tr '\n' '|')"
fi
[ -n "$spid" ] && rm -f "/tmp/perf-$spid.map"
# perfmap_fifo: a FIFO planted there must not stop the program (open would block).
timeout 60 env HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=1 HOTTEXT_VERBOSE=1 sh -c 'mkfifo "/tmp/perf-$$.map" && exec "$0" self' \
    "$T/api_4k" > "$T/perfmap_fifo.out" 2> "$T/perfmap_fifo.err"
rc=$?
spid=$(sed -n 's/^result .*\bpid=\([0-9]*\).*/\1/p' "$T/perfmap_fifo.err" | head -1)
if [ "$rc" = 0 ] && grep -q "no perf map: cannot open /tmp/perf-" "$T/perfmap_fifo.err"; then
    ok "perfmap_fifo: the program runs on past a FIFO and says why it wrote no map"
else
    fail perfmap_fifo "exit $rc (124: it hung), stderr: $(grep -m2 'perf map\|hottext' "$T/perfmap_fifo.err" | tr '\n' '|')"
fi
[ -n "$spid" ] && rm -f "/tmp/perf-$spid.map"
# perfmap_foreign: a file another user created there first is not appended to.
env HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=1 HOTTEXT_VERBOSE=1 sh -c 'f=/tmp/perf-$$.map; : > "$f" && chown nobody "$f" && exec "$0" self' \
    "$T/api_4k" > "$T/perfmap_foreign.out" 2> "$T/perfmap_foreign.err"
rc=$?
spid=$(sed -n 's/^result .*\bpid=\([0-9]*\).*/\1/p' "$T/perfmap_foreign.err" | head -1)
if [ "$rc" = 0 ] && [ -n "$spid" ] && [ ! -s "/tmp/perf-$spid.map" ] && grep -q "no perf map: refusing /tmp/perf-" "$T/perfmap_foreign.err"; then
    ok "perfmap_foreign: another user's file is left alone and the refusal is reported"
else
    fail perfmap_foreign "exit $rc, stderr: $(grep -m2 'perf map\|hottext' "$T/perfmap_foreign.err" | tr '\n' '|')"
fi
[ -n "$spid" ] && rm -f "/tmp/perf-$spid.map"
has file_path "mallocs=0 " "no malloc during the file path"

run verbose api self HOTTEXT_VERBOSE=1
expect verbose OK $FULL $FULL
has verbose "^hottext: 0x.*huge page" "reports on stderr"
run output_fn api output HOTTEXT_VERBOSE=1
expect output_fn OK $FULL $FULL
has output_fn "^custom output: 0x.*huge page" "messages go to the program's output function"
run silent api self
if [ "$(grep -c '^hottext:' "$T/silent.err")" = 0 ]; then ok "silent: nothing on stderr by default"; else
    fail silent "printed without HOTTEXT_VERBOSE"; fi

# ---------------------------------------------------------------- fault matrix
# (its own file: the settings refused, and the syscalls made to fail)
. tests/fault_matrix.sh

# ---------------------------------------------------------------- zero code change
run ctor_dynamic auto none
expect ctor_dynamic OK $FULL $FULL
run ctor_static auto_static none
expect ctor_static OK $FULL $FULL
# gold: no INSERT in gold's scripts, so this binary has no markers; the
# point is that -lhottext_auto links and its constructor runs.
run ctor_gold auto_gold none
expect ctor_gold NO_MARKERS 0 0
if command -v mold > /dev/null; then
    if $CC $CFLAGS -DHOTPROG_LINKED -fuse-ld=mold tests/hotprog.c "$T/hot.o" "$T/cold.o" -L"$LIB" -lhottext_auto \
        -o "$T/auto_mold" 2> "$T/mold.log"; then
        run ctor_mold auto_mold none
        expect ctor_mold NO_MARKERS 0 0
    else
        fail ctor_mold "mold could not link -lhottext_auto: $(head -3 "$T/mold.log" | tr '\n' '|')"
    fi
else
    fail ctor_mold "mold is not installed (apt-get install mold)"
fi

PRE=LD_PRELOAD=$LIB/libhottext_preload.so
run preload_markers plain none $PRE
expect preload_markers OK $FULL $FULL

run preload_nothing plain_nomark none $PRE
expect preload_nothing NO_MARKERS 0 0

# Link-time addresses of the hot functions, from the symbol table. The binary
# is linked with 4 KiB alignment, so how many 2 MiB pages fit depends on the
# load address: 2 or 3.
lohi=$(nm -n "$T/plain_nomark" | grep -E ' T hot_f[0-9]+$' | sed -n '1s/^0*/0x/p;$s/^0*/0x/p' | cut -d' ' -f1)
set -- $lohi 0 0
run preload_ranges plain_nomark none $PRE HOTTEXT_RANGES="$1-$2"
expect preload_ranges OK 4096 $FULL anon

{
    echo "# hottext ranges"
    echo "# build-id: $(readelf -n "$T/plain_nomark" | sed -n 's/.*Build ID: //p')"
    echo "$1 $2"
} > "$T/ranges.txt"
run preload_ranges_file plain_nomark none $PRE HOTTEXT_RANGES_FILE="$T/ranges.txt"
expect preload_ranges_file OK 4096 $FULL anon

sed 's/build-id: ../build-id: 00/' "$T/ranges.txt" > "$T/ranges_wrong.txt"
run preload_ranges_wrong_build plain_nomark none $PRE HOTTEXT_RANGES_FILE="$T/ranges_wrong.txt"
expect preload_ranges_wrong_build NO_MARKERS 0 0
has preload_ranges_wrong_build "build-id differs" "warns"

run preload_bad_ranges plain_nomark none $PRE HOTTEXT_RANGES="0x10-zz,nonsense,0x5-0x1,0x1000-0x2000"
expect preload_bad_ranges NO_MARKERS 0 0
has preload_bad_ranges 'cannot use "0x10-zz,nonsense.*HOTTEXT_RANGES ignored' "one bad entry voids the variable"

# (its own file: hostile ranges files and variables, an unmappable program file)
. tests/preload_inputs.sh

# fuzz_ranges_smoke: the parser of those ranges on the seeds of fuzz/seeds/ranges and 20 000
# mutations of them (`make fuzz` searches for hours). A seed's range that reaches the top of the
# address space once wrapped the merge of near ranges.
if "$T/fuzz_ranges" "$RT"/../fuzz/seeds/ranges/* > "$T/fuzz_ranges.out" 2> "$T/fuzz_ranges.err" &&
    grep -q "no failure" "$T/fuzz_ranges.out"; then ok "fuzz_ranges_smoke: $(cat "$T/fuzz_ranges.out")"; else
    fail fuzz_ranges_smoke "$(grep -m3 -E 'ERROR|runtime error|Abort' "$T/fuzz_ranges.err" | tr '\n' '|')"; fi

run preload_whole_text plain_nomark none $PRE HOTTEXT_WHOLE_TEXT=1
expect preload_whole_text OK 4096 100000 anon
# A stripped hottext layout: no markers to find (they were only in .symtab),
# two text segments (ld starts one at the 2 MiB-aligned hot section): each
# segment gets its own call; the last, the hot one, must be huge.
strip -o "$T/plain_stripped" "$T/plain"
run preload_whole_text_segments plain_stripped none $PRE HOTTEXT_WHOLE_TEXT=1
expect preload_whole_text_segments OK $FULL 100000

rm -rf "$T/run"

# ---------------------------------------------------------------- perf
# perf launching the program: the text keeps its file name in perf's records.
perf_report() { perf report -i "$1" --stdio --no-children --sort dso,sym 2>/dev/null; }
if ! command -v perf > /dev/null; then
    fail perf_launched "perf is not installed (apt-get install linux-perf)"
    fail perf_attached "perf is not installed (apt-get install linux-perf)"
else
    rm -f "$T/perf1.data"
    touch "$T/perf.start"
    HOTTEXT_BACKING=anon perf record -q -e cpu-clock -g -o "$T/perf1.data" -- "$T/api_4k" perf 1 > /dev/null 2> "$T/perf1.err"
    if perf_report "$T/perf1.data" | grep -q "hot_kernel"; then ok perf_launched; else
        fail perf_launched "perf report does not name hot_kernel: $(tail -3 "$T/perf1.err" | tr '\n' '|')"; fi

    # perf attaching later sees anonymous text and needs /tmp/perf-PID.map.
    rm -f "$T/perf2.data"
    HOTTEXT_BACKING=anon HOTTEXT_PERF_MAP=keep "$T/api_4k" perf 4 > /dev/null 2> "$T/perf2.err" &
    prog=$!
    for _ in $(seq 50); do grep -q '^ready' "$T/perf2.err" && break; sleep 0.1; done
    perf record -q -e cpu-clock -g -p $prog -o "$T/perf2.data" -- sleep 1.5 > /dev/null 2>> "$T/perf2.log"
    wait $prog
    perf_report "$T/perf2.data" > "$T/perf2.report"
    # perf 6.1 shows code named through the perf map as DSO "[JIT] tid PID".
    if grep -E -q "(perf-$prog.map|\[JIT\] tid $prog).*hot_kernel" "$T/perf2.report"; then ok "perf_attached (named through /tmp/perf-$prog.map)"; else
        fail perf_attached "perf report does not name hot_kernel via perf-$prog.map: $(grep -m3 hot "$T/perf2.report" | tr '\n' '|')"; fi
    grep -q " hot_kernel$" /tmp/perf-$prog.map 2>/dev/null && ok perf_map_file || fail perf_map_file "/tmp/perf-$prog.map lacks hot_kernel"
    # Remove the perf maps our test programs left (their processes are gone).
    for f in $(find /tmp -maxdepth 1 -name 'perf-*.map' -newer "$T/perf.start"); do
        p=${f#/tmp/perf-}; p=${p%.map}
        [ -d /proc/$p ] || rm -f "$f"
    done
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
