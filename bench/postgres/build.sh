#!/usr/bin/env bash
# bench/postgres/build.sh: build PostgreSQL 15 from the Debian source package with
# -O2 -ffunction-sections -fno-omit-frame-pointer, keeping the object files so that the
# `postgres` binary can be relinked with other link flags (see relink() in run.sh).
#
# Environment: BENCH_DIR (work directory, default /tmp/hottext-pg), CC (the compiler, default
# gcc; read by configure, so it holds for the tree's lifetime: a different compiler needs a
# second BENCH_DIR, e.g. BENCH_DIR=/tmp/hottext-pg-clang CC=clang-19), EXTRA_CFLAGS (appended to
# the compiler flags at configure time, e.g. to measure code-alignment flags in a second BENCH_DIR,
# or -fbasic-block-address-map for bench/blocks).
# Output: $BENCH_DIR/src (the source tree, built), $BENCH_DIR/inst (make install prefix),
#         $BENCH_DIR/build.log, $BENCH_DIR/build-seconds, $BENCH_DIR/compiler.txt (the compiler
#         and flags configure settled on, for the benchmarks' tables).
set -euo pipefail
# PostgreSQL builds its generated headers (lwlocknames.h, ...) only in a top-level make
# (MAKELEVEL 0); under `make bench-postgres` this script is a sub-make's child, so forget that.
unset MAKELEVEL MAKEFLAGS MFLAGS MAKEOVERRIDES
dir=${BENCH_DIR:-/tmp/hottext-pg}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
cd "$dir"

# What configure and the build need (the tarball ships bison/flex outputs; install them anyway
# so that a patched grammar still builds), and for run.sh bolt-19, lld-19 (the lld-*
# configurations) and valgrind (sim.py).
. "$here/../debian_source.sh"
debian_source postgresql-15 bison flex libreadline-dev zlib1g-dev perl gcc make bolt-19 lld-19 valgrind

cd src
start=$SECONDS
fresh=0
if [ ! -f config.status ]; then
    fresh=1
    CC=${CC:-gcc} ./configure --prefix="$dir/inst" --without-icu --without-readline --without-zlib \
        --without-openssl --without-ldap --without-gssapi --without-systemd --without-llvm \
        CFLAGS="-O2 -ffunction-sections -fno-omit-frame-pointer ${EXTRA_CFLAGS:-}" \
        LDFLAGS="-Wl,--emit-relocs" >"$dir/build.log" 2>&1 ||
        { tail -30 "$dir/build.log"; exit 1; }
fi
# What compiled this tree (configure's choice, so also right for a tree configured earlier).
{ sed -n 's/^CC = //p' src/Makefile.global | xargs -I{} sh -c '{} --version | head -1'
  sed -n 's/^CFLAGS = .*\(-O[0-9s].*\)$/\1/p' src/Makefile.global; } >"$dir/compiler.txt"
# Debian's patch points the server's module directory at the system's
# /usr/lib/postgresql/15/lib; keep this build's modules (plpgsql, pg_prewarm) in its own prefix
# so that installing it never overwrites the files of an installed postgresql-15 package.
if grep -q '^override pkglibdir := /usr/lib/postgresql' src/Makefile.global; then
    sed -i 's|^override pkglibdir := /usr/lib/postgresql.*|override pkglibdir := $(libdir)/postgresql|' \
        src/Makefile.global
    rm -f src/port/pg_config_paths.h # regenerated with the new directory
fi
# Only what the benchmark runs: the server, initdb, pg_ctl, pgbench and psql (libpq comes along),
# and pg_prewarm, which loads the tables into shared_buffers at the start of every measured run.
# run.sh relinks src/backend/postgres with other flags; link the default again first so that
# the installed postgres is always the default build.
rm -f src/backend/postgres
{
    make -j2 -C src/backend &&
        make -j2 -C src/backend install &&
        for d in src/interfaces/libpq src/bin/initdb src/bin/pg_ctl src/bin/pgbench src/bin/psql src/bin/scripts src/pl/plpgsql \
            src/bin/pg_config src/include src/port src/common src/timezone src/backend/snowball \
            src/backend/utils/mb/conversion_procs contrib/pg_prewarm; do
            make -j2 -C "$d" install || exit 1
        done
} >>"$dir/build.log" 2>&1 || { tail -30 "$dir/build.log"; exit 1; }
# The build time of a fresh tree (configure included) is what the results quote.
[ "$fresh" = 0 ] || echo $((SECONDS - start)) >"$dir/build-seconds"
echo "postgres built (or brought up to date) in $((SECONDS - start)) s: $dir/inst/bin/postgres"
