#!/usr/bin/env bash
# `make fuzz`: every fuzz target under libFuzzer, one after another, then a table of runs, corpus
# sizes and crashes. A benchmark, not a test (`make test` runs a short smoke of each target).
#
#   make fuzz                                     every target, 60 s each
#   make fuzz FUZZ_SECONDS=3600                   an hour each, as bench/RESULTS.md records
#   make fuzz FUZZ_TARGETS="profile ranges"       some of them
#
# Targets: perf_data, profile, meta, config, bb_addr_map (Rust: fuzz/fuzz_targets, bodies in hottext::fuzz) and
# ranges (C: runtime/tests/fuzz_ranges.c, the preload library's range parser). Each corpus grows
# in fuzz/corpus/TARGET from the seeds in fuzz/seeds/TARGET; an input that fails lands in
# fuzz/artifacts/TARGET/ (reproduce it: `cargo fuzz run TARGET FILE`, or
# `fuzz/target/ranges FILE`), the log of each run in fuzz/artifacts/TARGET.log.
#
# The Rust targets need cargo-fuzz (installed with `cargo install` when missing) and a toolchain
# that takes -Z flags: nightly when rustup has it, else the installed one with RUSTC_BOOTSTRAP=1.
# The C target needs clang-19 and its libFuzzer (scripts/setup.sh fuzz installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-perf_data profile meta config bb_addr_map ranges}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_SECONDS must be a whole number of seconds, not '$seconds'" >&2; exit 2; }
for t in $targets; do
    [ -d "fuzz/seeds/$t" ] || { echo "fuzz: no target '$t' (targets: $(ls fuzz/seeds | tr '\n' ' '))" >&2; exit 2; }
done

bash scripts/setup.sh fuzz
cargo fuzz --version >/dev/null 2>&1 || {
    echo "fuzz: installing cargo-fuzz (cargo install, once)" >&2
    cargo install cargo-fuzz --locked >&2
}
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    cargo_fuzz=(cargo +nightly fuzz)
else
    echo "fuzz: no nightly Rust; building with the installed toolchain and RUSTC_BOOTSTRAP=1" >&2
    cargo_fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi

# libFuzzer: stop after the time, a 2 GB memory limit and 1 GB for any one allocation (the
# parsers must bound what they allocate: an allocation bomb is a failure, an oom-* artifact),
# 25 s per input counts as a hang.
flags=(-max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=25 -print_final_stats=1)
summary=()
crashed=0
for t in $targets; do
    corpus=fuzz/corpus/$t artifacts=fuzz/artifacts/$t
    mkdir -p "$corpus" "$artifacts"
    cp -n fuzz/seeds/$t/* "$corpus"/
    log=fuzz/artifacts/$t.log
    echo "fuzz: $t for $seconds s (log: $log)" >&2
    if [ "$t" = ranges ]; then
        mkdir -p fuzz/target
        clang-19 -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
            -Iruntime/include runtime/tests/fuzz_ranges.c runtime/src/ranges.c runtime/src/options.c \
            runtime/src/procfs.c -o fuzz/target/ranges
        # Its warnings go to stderr for every input: close it (libFuzzer keeps its own copy).
        fuzz/target/ranges "$corpus" -artifact_prefix="$artifacts/" -close_fd_mask=2 "${flags[@]}" >"$log" 2>&1 || true
    else
        # No leak checks: Rust frees what it owns, and LeakSanitizer reports the 32 bytes glibc
        # keeps for a thread-local destructor registered on the first input that needs one.
        "${cargo_fuzz[@]}" run -O "$t" "$corpus" -- -artifact_prefix="$artifacts/" -detect_leaks=0 \
            "${flags[@]}" >"$log" 2>&1 || true
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    failures=$(find "$artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
    [ "$failures" -eq 0 ] || crashed=1
    [ -n "$runs" ] || { echo "fuzz: $t did not finish; the end of $log:" >&2; tail -20 "$log" >&2; crashed=1; }
    summary+=("$(printf '%-10s %8s s %14s runs %8s inputs in the corpus %4s failures' \
        "$t" "$seconds" "${runs:-?}" "$(find "$corpus" -type f | wc -l)" "$failures")")
done
printf '%s\n' "${summary[@]}"
exit $crashed
