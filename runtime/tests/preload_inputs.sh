# What the preload library is given, sourced by run.sh after its preload
# tests (its helpers: run, expect, field, has; its variables: T, LIB, PRE,
# FULL, and $1 $2 the link-time bounds of plain_nomark's hot functions):
# ranges files and variables that are wrong, hostile or endless, and a
# program file that cannot be mapped to look for the markers.

# hostile NAME PATTERN WHAT ENV...: plain_nomark under the preload library
# must start, run and exit by itself (timeout 60 only catches a hang, it
# measures nothing), apply no range (NO_MARKERS: no markers, and the ranges
# ignored), and print at most 3 warnings, one of them matching PATTERN.
hostile() {
    local name=$1 pattern=$2 what=$3 warnings
    shift 3
    timeout 60 env HOTTEXT_PERF_MAP=0 $PRE "$@" "$T/plain_nomark" none > "$T/$name.out" 2> "$T/$name.err"
    RC=$?
    warnings=$(grep -c '^hottext:' "$T/$name.err")
    if [ "$RC" -ne 0 ]; then
        fail "$name" "exit status $RC (124: it hung); stderr: $(head -c 300 "$T/$name.err" | tr '\n' '|')"
    elif [ "$(field "$name" result status)" != NO_MARKERS ]; then
        fail "$name" "status $(field "$name" result status), want NO_MARKERS (nothing applied)"
    elif [ "$warnings" -gt 3 ]; then
        fail "$name" "$warnings warnings, want at most 3: $(grep -m4 '^hottext:' "$T/$name.err" | tr '\n' '|')"
    elif ! grep -q -- "$pattern" "$T/$name.err"; then
        fail "$name" "no warning says '$pattern': $(grep '^hottext:' "$T/$name.err" | tr '\n' '|')"
    else
        ok "$name: $what ($warnings warning)"
    fi
}

hostile ranges_dev_zero "/dev/zero is a character device, not a regular file" "/dev/zero is refused unread" \
    HOTTEXT_RANGES_FILE=/dev/zero
hostile ranges_dev_urandom "/dev/urandom is a character device" "/dev/urandom is refused unread" \
    HOTTEXT_RANGES_FILE=/dev/urandom
rm -f "$T/ranges.fifo" && mkfifo "$T/ranges.fifo"
hostile ranges_fifo "ranges.fifo is a FIFO, not a regular file" "a FIFO with no writer is refused, not waited on" \
    HOTTEXT_RANGES_FILE="$T/ranges.fifo"
rm -f "$T/ranges.fifo"
hostile ranges_dir "is a directory" "a directory is refused" HOTTEXT_RANGES_FILE="$T"
head -c 3145728 /dev/urandom > "$T/ranges_junk_3m"
hostile ranges_junk_3m "is 3145728 bytes, more than a ranges file holds (64 KiB); ignored" \
    "a 3 MB file is refused by its size, unread" HOTTEXT_RANGES_FILE="$T/ranges_junk_3m"
head -c 60000 /dev/urandom > "$T/ranges_junk_60k"
hostile ranges_junk_60k "ranges_junk_60k:[0-9]*: .*ranges file ignored" "60 kB of random bytes: one warning" \
    HOTTEXT_RANGES_FILE="$T/ranges_junk_60k"
if LC_ALL=C grep -q $'\e' "$T/ranges_junk_60k.err"; then
    fail ranges_junk_escapes "the warning passes the file's control bytes to stderr"
else
    ok "ranges_junk_escapes: the warning shows no control byte of the file"
fi
yes 'not a range' | head -5000 > "$T/ranges_bad_lines.txt"
hostile ranges_bad_lines "ranges_bad_lines.txt:1: cannot read \"not a range\"" \
    "5000 bad lines: the first voids the file, one warning" HOTTEXT_RANGES_FILE="$T/ranges_bad_lines.txt"
printf '%s %s\nnonsense\n' "$1" "$2" > "$T/ranges_then_bad.txt"
hostile ranges_then_bad "ranges_then_bad.txt:2: cannot read \"nonsense\"" \
    "a good range before a bad line is not applied (as verify --ranges refuses the file)" \
    HOTTEXT_RANGES_FILE="$T/ranges_then_bad.txt"
printf '%s %s\n' "$2" "$1" > "$T/ranges_empty.txt"
hostile ranges_empty "ranges_empty.txt:1: \"$2 $1\" is empty" "an empty range voids the file" \
    HOTTEXT_RANGES_FILE="$T/ranges_empty.txt"
printf '%s\0 %s\n' "$1" "$2" > "$T/ranges_nul.txt"
hostile ranges_nul "ranges_nul.txt:1: a NUL byte in" "a NUL byte is not the end of a line" \
    HOTTEXT_RANGES_FILE="$T/ranges_nul.txt"
hostile ranges_env_flood "HOTTEXT_RANGES ignored" "20 000 bad entries in HOTTEXT_RANGES: one warning" \
    HOTTEXT_RANGES="$(printf 'x,%.0s' $(seq 20000))"
hostile ranges_outside "range 0x1000-0x2000 and 1 more are not inside the executable's text" \
    "ranges of another program: one warning for all" HOTTEXT_RANGES="0x1000-0x2000,0x7f0000000000-0x7f0000001000"

# What verify --ranges reads, the runtime reads: CRLF line ends, and more
# lines than the runtime keeps (the first 32 are applied, one warning).
printf '%s %s\r\n' "$1" "$2" > "$T/ranges_crlf.txt"
run preload_ranges_crlf plain_nomark none $PRE HOTTEXT_RANGES_FILE="$T/ranges_crlf.txt"
expect preload_ranges_crlf OK 4096 $FULL anon
for _ in $(seq 40); do echo "$1 $2"; done > "$T/ranges_40.txt"
run preload_ranges_40 plain_nomark none $PRE HOTTEXT_RANGES_FILE="$T/ranges_40.txt"
expect preload_ranges_40 OK 4096 $FULL anon
has preload_ranges_40 "ranges_40.txt: 8 ranges after the first 32 are ignored" "says once how many ranges it dropped"

# The markers could not be looked for (mapping /proc/self/exe failed): that
# is SYSCALL_FAILED, not NO_MARKERS, and the fallbacks (here HOTTEXT_RANGES)
# are not taken: the program may have markers.
run preload_exe_unmappable plain none "LD_PRELOAD=$T/fault_shim.so $LIB/libhottext_preload.so" \
    HOTTEXT_FAULT_CALLS=mmap HOTTEXT_FAULT_FROM=1 HOTTEXT_FAULT_RUN=1 HOTTEXT_RANGES="$1-$2"
expect preload_exe_unmappable SYSCALL_FAILED 0 0
has preload_exe_unmappable "error=12 detail=__hot_start/__hot_end: cannot map /proc/self/exe (ENOMEM)" \
    "says which call failed, with its errno"
