#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# build-siw.sh: build the Linux soft-iWARP driver (siw.ko) out of tree from
# Debian's linux-source-6.1, with kpatch/siw-mpa-params.patch applied, for the
# kernel ABI KVER (default: the one Debian's linux-image-amd64 depends on).
#
#   kpatch/build-siw.sh [--kver KVER] [--cache DIR] [--no-install] [--force]
#
# Prints the path of the built module on stdout (last line).  The build is
# cached under DIR/siw-KVER and redone only when the kernel ABI, the package
# versions or the patch change.  --no-install: do not apt-get anything.
# Env: XS_INTEROP_CACHE (default /var/cache/xsock-interop), XS_INTEROP_KVER.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${XS_INTEROP_CACHE:-/var/cache/xsock-interop}
kver=${XS_INTEROP_KVER:-}
install=1 force=0
while [ $# -gt 0 ]; do
    case $1 in
        --kver) kver=${2:?}; shift ;;
        --cache) cache=${2:?}; shift ;;
        --no-install) install=0 ;;
        --force) force=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "build-siw: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
say() { echo "build-siw: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

apt_ready=0
pkg_install() { # pkg_install PKG... : apt-get install what is not installed yet
    local need=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
    done
    [ ${#need[@]} = 0 ] && return 0
    [ $install = 1 ] || die "missing packages: ${need[*]} (run without --no-install, as root)"
    if [ $apt_ready = 0 ]; then
        timeout 600 apt-get -qq -o DPkg::Lock::Timeout=300 update || true
        apt_ready=1
    fi
    say "apt-get install ${need[*]}"
    DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${need[@]}" >&2
}

# Debian keeps only the current kernel ABI in the archive: follow the
# linux-image-amd64 metapackage unless told otherwise.
if [ -z "$kver" ]; then
    if [ -f "$cache/kver" ] && [ $force = 0 ]; then
        kver=$(cat "$cache/kver")
    else
        [ $install = 1 ] && { timeout 600 apt-get -qq -o DPkg::Lock::Timeout=300 update || true; apt_ready=1; }
        kver=$(apt-cache depends linux-image-amd64 2>/dev/null |
               sed -n 's/.*Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
        [ -n "$kver" ] || die "cannot find the kernel ABI of linux-image-amd64 (apt-get update?)"
    fi
fi
mkdir -p "$cache"
echo "$kver" > "$cache/kver"

pkg_install linux-source-6.1 "linux-headers-$kver" gcc-12 make patch xz-utils kmod
src_tar=/usr/src/linux-source-6.1.tar.xz
[ -f "$src_tar" ] || die "$src_tar missing"
kbuild=/usr/src/linux-headers-$kver
[ -d "$kbuild" ] || die "$kbuild missing"

patchf=$here/siw-mpa-params.patch
out=$cache/siw-$kver
ko=$out/siw.ko
key=$( { echo "$kver"; dpkg-query -W -f='${Version}\n' linux-source-6.1 "linux-headers-$kver";
         cat "$patchf" "$0"; } | sha256sum | cut -c1-16)
if [ $force = 0 ] && [ -f "$ko" ] && [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ]; then
    echo "$ko"; exit 0
fi

t0=$(date +%s)
rm -rf "$out"; mkdir -p "$out/tree"
# Only drivers/infiniband/sw/siw is needed from the 140 MB tarball.
tar -xJf "$src_tar" -C "$out/tree" --wildcards 'linux-source-6.1/drivers/infiniband/sw/siw/*' ||
    die "cannot extract siw from $src_tar"
( cd "$out/tree/linux-source-6.1" && patch -s -p1 --no-backup-if-mismatch < "$patchf" ) ||
    die "$patchf does not apply to linux-source-6.1 $(dpkg-query -W -f='${Version}' linux-source-6.1)"
cp -r "$out/tree/linux-source-6.1/drivers/infiniband/sw/siw" "$out/src"
rm -rf "$out/tree"
# Debian builds its kernels with the gcc major it ships headers for (gcc-12).
if ! make -C "$kbuild" M="$out/src" CONFIG_RDMA_SIW=m CC=gcc-12 modules > "$out/build.log" 2>&1; then
    cat "$out/build.log" >&2; die "siw build failed"
fi
cp "$out/src/siw.ko" "$ko"
echo "$key" > "$out/.key"
say "built $ko for $kver in $(( $(date +%s) - t0 )) s ($(modinfo -F vermagic "$ko"))"
echo "$ko"
