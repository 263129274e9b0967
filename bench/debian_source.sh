# Sourced by the benchmarks' build scripts: Debian source packages, unpacked.
#
#   debian_source PACKAGE [DEPENDENCY...]
#
# Adds a deb-src entry if there is none (a copy of the deb822 source list with Types: deb-src),
# installs the DEPENDENCY packages that are missing, and unpacks PACKAGE's source into ./src
# unless it is there: the newest version apt knows first, then the older ones (a mirror may lack
# the newest: the security archive's postgresql-15 15.20 gave 404 here).

debian_source() {
    local package=$1
    shift
    if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        local list=/etc/apt/sources.list.d/debian.sources
        [ -f "$list" ] || { echo "debian_source: $list not found; add a deb-src entry by hand" >&2; exit 2; }
        sed 's/^Types: deb$/Types: deb-src/' "$list" >/etc/apt/sources.list.d/hottext-deb-src.sources
        apt-get update -qq
    fi
    local need="" p
    for p in dpkg-dev "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
    done
    [ -z "$need" ] || apt-get install -y -qq $need >/dev/null
    [ -d src ] && return 0
    rm -rf pkg && mkdir pkg
    local ok="" v
    for v in $(apt-cache showsrc "$package" | sed -n 's/^Version: //p' | sort -rV); do
        if (cd pkg && apt-get source -qq --download-only "$package=$v" >/dev/null 2>&1); then
            ok=$v
            break
        fi
        rm -f pkg/*
    done
    [ -n "$ok" ] || { echo "debian_source: apt-get source $package failed for every version" >&2; exit 1; }
    echo "source: $package $ok"
    (cd pkg && dpkg-source -x --no-check ./*.dsc tree >/dev/null)
    mv pkg/tree src
}
