# The runtime's fault matrix, sourced by run.sh (its helpers: run, expect,
# has, need_root; its variables: T, THP, NRHP, FULL, FULL4K): the operator's
# settings that refuse, and system calls made to fail by fault_shim.c.
run disabled_env api self HOTTEXT_HUGIFY=0
expect disabled_env DISABLED_BY_ENV 0 0

run thp_disabled_prctl api thpoff
expect thp_disabled_prctl THP_DISABLED_PROCESS 0 0

if need_root thp_never $THP; then
    if ! echo never > $THP 2>/dev/null; then
        fail thp_never "cannot write $THP"
    else
        run thp_never api self
        echo "$THP_SAVED" > $THP
        expect thp_never THP_NEVER 0 0
    fi
    if [ "$(sed -n 's/.*\[\(.*\)\].*/\1/p' $THP)" = "$THP_SAVED" ]; then ok "thp_never: setting restored"; else
        fail thp_restored "THP setting not restored"; fi
fi

# MDWE forbids the copy becoming executable. The file path needs no such
# step (it maps the file read+execute, as ld.so does), so it may still work.
run mdwe_anon api mdwe HOTTEXT_BACKING=anon
expect mdwe_anon MDWE 0 0
run mdwe_auto_4k api_4k mdwe
expect mdwe_auto_4k MDWE 0 0
run mdwe_file api mdwe
expect mdwe_file OK $FULL $FULL file

if need_root hugetlb_empty $NRHP; then
    echo 0 > $NRHP
    run hugetlb_empty api self HOTTEXT_BACKING=hugetlb
    echo "$NRHP_SAVED" > $NRHP
    expect hugetlb_empty NO_HUGE_PAGES 0 0
fi

run second_thread api thread
expect second_thread MULTITHREADED 0 0

run no_markers api_nomark self
expect no_markers NO_MARKERS 0 0

run range_too_small api_small self
expect range_too_small RANGE_TOO_SMALL 0 0

run abi api abi
expect abi OK $FULL $FULL
has abi "abi version=ok short=intact zero=untouched" "a shorter or unsized result is not written past; hottext_version() is the header's"

run twice api twice
expect twice ALREADY_DONE $FULL $FULL
if [ "$(field twice first status)" = OK ]; then ok "twice: first call OK"; else
    fail twice_first "first call: $(field twice first status)"; fi
run twice_anon api_4k twice
expect twice_anon ALREADY_DONE $FULL $FULL4K

# A swap whose mremap unmaps the text and then fails (the kernel can, out of
# memory late in the move) must not leave a hole: the program runs on (expect
# checks its exit status, output and checksum), the text moved in by a second
# try, or restored from the prepared copy's bytes, or from the program file.
FAULT=LD_PRELOAD=$T/fault_shim.so
run swap_fails_once api self HOTTEXT_BACKING=anon $FAULT HOTTEXT_FAULT_MREMAP=once
expect swap_fails_once OK $FULL $FULL
run swap_fails_no_file api self HOTTEXT_BACKING=anon $FAULT HOTTEXT_FAULT_MREMAP=always HOTTEXT_FAULT_OPEN=1
expect swap_fails_no_file SYSCALL_FAILED 0 0
has swap_fails_no_file "unmapped it; restored" "the text is restored without the program file"
run swap_fails_file_path api self $FAULT HOTTEXT_FAULT_MREMAP=always
expect swap_fails_file_path SYSCALL_FAILED 0 $FULL
has swap_fails_file_path "unmapped it; restored" "the text is restored on the file path too"

# mprotect of the copy: ENOMEM (no memory to split the mapping) is a system
# call failure, EXEC_DENIED only for a policy's EACCES/EPERM.
run mprotect_enomem api self HOTTEXT_BACKING=anon $FAULT HOTTEXT_FAULT_CALLS=mprotect HOTTEXT_FAULT_FROM=1
expect mprotect_enomem SYSCALL_FAILED 0 0
has mprotect_enomem "error=12 .*mprotect(PROT_READ|PROT_EXEC) of the copy failed (ENOMEM)" "ENOMEM is a failed call with its errno, not a refusal"
run mprotect_eacces api self HOTTEXT_BACKING=anon $FAULT HOTTEXT_FAULT_CALLS=mprotect HOTTEXT_FAULT_FROM=1 \
    HOTTEXT_FAULT_ERRNO=EACCES
expect mprotect_eacces EXEC_DENIED 0 0
has mprotect_eacces "mprotect(PROT_READ|PROT_EXEC) of the copy was refused (EACCES)" "a policy's EACCES is EXEC_DENIED"

# Persistent faults, as the second hostile review injected them: every call
# of one syscall from the Nth on fails (a failing mremap unmaps its
# destination first), and runs of five failures of all three in a row. For
# every N the program must run on with its output and checksum as without
# hottext, and the status must not both claim the text unchanged and say it
# was left unmapped. Calls are counted from the start of the program: the
# library makes about 15 of them on these paths, so N goes past the last.
faulted() {
    local calls=$1 run=$2 backing=$3 n name crashed=0 runs=0 bad=""
    for n in $(seq 1 20); do
        name=persist_${calls// /_}_${run}_${backing}_$n
        run "$name" api self HOTTEXT_VERBOSE=1 HOTTEXT_BACKING="$backing" $FAULT "HOTTEXT_FAULT_CALLS=$calls" \
            HOTTEXT_FAULT_FROM="$n" HOTTEXT_FAULT_RUN="$run"
        runs=$((runs + 1))
        if [ "$RC" -ne 0 ] || ! cmp -s "$T/$name.out" "$T/$name.base" ||
            [ "$(sed -n 1p "$T/$name.out" | cut -d' ' -f2)" != "$(sed -n 2p "$T/$name.out" | cut -d' ' -f2)" ]; then
            crashed=$((crashed + 1))
            bad="$bad N=$n: exit $RC, $(grep -m1 '^result' "$T/$name.err");"
        elif grep -q "unchanged" "$T/$name.err" && grep -q "left it unmapped" "$T/$name.err"; then
            crashed=$((crashed + 1))
            bad="$bad N=$n: two statuses: $(grep -m1 '^result' "$T/$name.err");"
        fi
    done
    local what="every $calls call from the Nth on"
    [ "$run" = 0 ] || what="$run $calls calls in a row from the Nth"
    if [ "$crashed" = 0 ]; then ok "faults, $what ($backing): $runs runs, 0 crashes, output as without hottext"; else
        fail "faults_${calls// /_}_${run}_$backing" "$what: $crashed of $runs runs failed:$bad"; fi
}
for backing in auto anon; do
    for calls in mmap mremap madvise mprotect; do faulted "$calls" 0 "$backing"; done
    faulted "mmap mremap madvise" 5 "$backing"
done

