#!/usr/bin/env bash
# The one set-up step of a fresh Debian 12 machine, shared by `make demo`, `make test`, `make lint`
# and `.ci/run`. Idempotent: when everything is there it only checks (well under a second) and
# touches neither apt nor the network.
#
#   scripts/setup.sh demo   what `make demo` needs: compilers, the three linkers, perf
#   scripts/setup.sh test   the above, and what the tests add: mold, cmake, git, Java and Maven
#                           with the s3proxy jar (the S3 store tests run a real S3-compatible server)
#   scripts/setup.sh lint   rustfmt and clippy
#   scripts/setup.sh fuzz   clang-19 and its libFuzzer, for `make fuzz`
#   scripts/setup.sh bench  what the benchmarks add to `demo`: clang 19, BOLT 19 (llvm-bolt,
#                           perf2bolt) and LLVM 19's tools, the peers every `make bench-*` runs
#
# Debian packages are installed when missing (`apt-get update` only then); as a user who is not
# root it stops instead, printing the exact command to run. Exit status 2 when something is missing
# that it cannot install.
set -euo pipefail

usage() { echo "usage: scripts/setup.sh demo|test|lint|fuzz|bench" >&2; exit 2; }
[ $# -eq 1 ] || usage
what=$1

# Debian package, and the file that proves it is usable (a metapackage can be installed while the
# program itself is not: linux-perf's wrapper without the perf of the running kernel, say).
demo_packages=(gcc:/usr/bin/gcc make:/usr/bin/make python3:/usr/bin/python3
    binutils:/usr/bin/ld.gold lld-19:/usr/lib/llvm-19/bin/ld.lld linux-perf:/usr/bin/perf
    valgrind:/usr/bin/valgrind)
test_packages=("${demo_packages[@]}" mold:/usr/bin/mold cmake:/usr/bin/cmake git:/usr/bin/git
    openjdk-17-jre-headless:/usr/bin/java maven:/usr/bin/mvn chromium:/usr/bin/chromium
    nginx:/usr/sbin/nginx apache2-utils:/usr/bin/ab curl:/usr/bin/curl
    clang-19:/usr/bin/clang-19 llvm-19:/usr/bin/llvm-readobj-19)

bench_packages=("${demo_packages[@]}" clang-19:/usr/bin/clang-19 llvm-19:/usr/bin/llvm-readobj-19
    bolt-19:/usr/lib/llvm-19/bin/llvm-bolt curl:/usr/bin/curl)

fuzz_packages=(clang-19:/usr/bin/clang-19
    libclang-rt-19-dev:/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a)

S3PROXY_VERSION=2.6.0
s3proxy_jar="${HOME:-/root}/.m2/repository/org/gaul/s3proxy/$S3PROXY_VERSION/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"

say() { echo "setup: $*" >&2; }

install_packages() {
    local missing=() entry
    for entry in "$@"; do
        [ -e "${entry#*:}" ] || missing+=("${entry%%:*}")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        say "missing Debian packages: ${missing[*]}"
        say "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
        exit 2
    fi
    say "installing ${missing[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    for entry in "$@"; do
        [ -e "${entry#*:}" ] || { say "${entry%%:*} is installed but ${entry#*:} is missing"; exit 2; }
    done
}

need_cargo() {
    command -v cargo >/dev/null || {
        say "cargo is missing: install Rust with rustup (https://rustup.rs), then run this again"
        exit 2
    }
}

fetch_s3proxy() {
    [ -f "$s3proxy_jar" ] && return 0
    say "fetching s3proxy $S3PROXY_VERSION from Maven Central (once, into ~/.m2)"
    local log
    log=$(mktemp)
    mvn -q -B -Dstyle.color=never dependency:get \
        -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" >"$log" 2>&1 ||
        { cat "$log" >&2; rm -f "$log"; say "mvn could not fetch s3proxy (output above)"; exit 2; }
    rm -f "$log"
    [ -f "$s3proxy_jar" ] || { say "mvn ran but $s3proxy_jar is not there"; exit 2; }
}

need_rust_components() {
    local missing=()
    cargo fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
    cargo clippy --version >/dev/null 2>&1 || missing+=(clippy)
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v rustup >/dev/null || { say "missing Rust components ${missing[*]} and no rustup to add them"; exit 2; }
    say "adding Rust components ${missing[*]}"
    rustup component add "${missing[@]}" >&2
}

case $what in
    demo) need_cargo; install_packages "${demo_packages[@]}" ;;
    test) need_cargo; install_packages "${test_packages[@]}"; fetch_s3proxy ;;
    lint) need_cargo; need_rust_components ;;
    fuzz) need_cargo; install_packages "${fuzz_packages[@]}" ;;
    bench) need_cargo; install_packages "${bench_packages[@]}" ;;
    *) usage ;;
esac
