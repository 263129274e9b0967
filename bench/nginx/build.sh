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
mkdir -p "$dir"
cd "$dir"

# deb-src entry (idempotent): a copy of the deb822 source list with Types: deb-src.
if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    src=/etc/apt/sources.list.d/debian.sources
    [ -f "$src" ] || { echo "build.sh: $src not found; add a deb-src entry by hand" >&2; exit 2; }
    sed 's/^Types: deb$/Types: deb-src/' "$src" >/etc/apt/sources.list.d/hottext-deb-src.sources
    apt-get update -qq
fi
# configure's libraries, dpkg-dev for `apt-get source`, and for run.sh the peers (bolt-19,
# lld-19), the simulation (valgrind) and the load (apache2-utils: ab runs N requests).
need=""
for p in dpkg-dev libpcre2-dev zlib1g-dev gcc make bolt-19 lld-19 valgrind apache2-utils curl; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
[ -z "$need" ] || apt-get install -y -qq $need >/dev/null

if [ ! -d src ]; then
    rm -rf pkg && mkdir pkg
    ok=""
    for v in $(apt-cache showsrc nginx | sed -n 's/^Version: //p' | sort -rV); do
        if (cd pkg && apt-get source -qq --download-only "nginx=$v" >/dev/null 2>&1); then
            ok=$v; break
        fi
        rm -f pkg/*
    done
    [ -n "$ok" ] || { echo "build.sh: apt-get source nginx failed for every version" >&2; exit 1; }
    echo "source: nginx $ok"
    (cd pkg && dpkg-source -x --no-check ./*.dsc tree >/dev/null)
    mv pkg/tree src
fi

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
