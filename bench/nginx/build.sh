#!/usr/bin/env bash
# bench/nginx/build.sh: build nginx 1.22 from the Debian source package with nginx's own
# configure, the way a user following README.md would: -O2 -ffunction-sections
# -fno-omit-frame-pointer, the default modules (static files, gzip, proxy), objects kept so that
# run.sh can relink objs/nginx with other link flags (`relink` below, nginx's own link rule).
#
# Environment: BENCH_DIR (work directory, default /tmp/hottext-nginx).
# Output: $BENCH_DIR/src (the source tree, built; objs/nginx is the plain build),
#         $BENCH_DIR/build.log.
set -euo pipefail
unset MAKELEVEL MAKEFLAGS MFLAGS MAKEOVERRIDES
dir=${BENCH_DIR:-/tmp/hottext-nginx}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
cd "$dir"

# configure's libraries, and for run.sh the peers (bolt-19, lld-19), the simulation (valgrind)
# and the load (apache2-utils: ab runs N requests).
. "$here/../debian_source.sh"
debian_source nginx libpcre2-dev zlib1g-dev gcc make bolt-19 lld-19 valgrind apache2-utils curl

cd src
if [ ! -f objs/Makefile ]; then
    # --emit-relocs in every link: BOLT needs the relocations, and every configuration carries
    # the flag so that the only difference between them is the layout.
    ./configure --prefix="$dir/inst" \
        --with-cc-opt="-O2 -ffunction-sections -fno-omit-frame-pointer" \
        --with-ld-opt="-Wl,--emit-relocs" >"$dir/build.log" 2>&1 ||
        { tail -30 "$dir/build.log"; exit 1; }
fi
make -j2 >>"$dir/build.log" 2>&1 || { tail -30 "$dir/build.log"; exit 1; }
echo "built: $dir/src/objs/nginx ($(stat -c %s objs/nginx) bytes)"
