#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# guest-prepare.sh: everything the interop guest needs, cached.
#   1. packages (qemu, busybox, rdma-core tools, perftest, tcpdump, tshark,
#      socat)
#   2. siw.ko with kpatch/siw-mpa-params.patch (kpatch/build-siw.sh)
#   3. Debian's kernel image for the same ABI (apt-get download, unpacked)
#   4. the initramfs: busybox, rdma-core userland copied from the host with
#      their libraries (the siw and rxe providers), the RDMA kernel modules +
#      siw + rdma_rxe, tests/interop/guest/*.  No tshark in the guest: the
#      RoCE cells capture on the host's tap, the siw matrix decodes on the host
# A warm run only checks keys and takes well under a second.
#
#   tests/interop/guest-prepare.sh [--no-install] [--force]
# Env: XS_INTEROP_CACHE (default /var/cache/xsock-interop), XS_INTEROP_KVER.
# Prints "guest-prepare: ready ..." with the step times.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${XS_INTEROP_CACHE:-/var/cache/xsock-interop}
export XS_INTEROP_CACHE=$cache
install=1 force=0 pass=()
for a in "$@"; do
    case $a in
        --no-install) install=0; pass+=(--no-install) ;;
        --force) force=1; pass+=(--force) ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "guest-prepare: unknown option $a" >&2; exit 2 ;;
    esac
done
say() { echo "guest-prepare: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
t_all=$(date +%s.%N); t_step=$t_all
lap() { local t; t=$(date +%s.%N)
        awk -v a="$t_step" -v b="$t" -v s="$1" 'BEGIN{printf "guest-prepare: %-22s %6.1f s\n", s, b-a}' >&2
        t_step=$t; }
[ "$(id -u)" = 0 ] || [ $install = 0 ] || die "run as root (apt-get, $cache)"

need=()
for p in qemu-system-x86 busybox-static cpio kmod gzip iproute2 tcpdump tshark rdma-core \
         libibverbs1 librdmacm1 ibverbs-providers ibverbs-utils rdmacm-utils perftest \
         libibverbs-dev librdmacm-dev gcc strace socat; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    [ $install = 1 ] || die "missing packages: ${need[*]}"
    say "apt-get install ${need[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    timeout 600 apt-get -qq -o DPkg::Lock::Timeout=300 update || true
    DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${need[@]}" >&2
fi
lap packages

ko=$("$top/kpatch/build-siw.sh" "${pass[@]}" | tail -n 1)
kver=$(cat "$cache/kver")
[ -f "$ko" ] || die "no siw.ko"
lap "siw.ko"

# The guest kernel: the image package of the ABI the headers are for.
kdir=$cache/kernel-$kver
if [ ! -f "$kdir/.done" ] || [ $force = 1 ]; then
    rm -rf "$kdir" "$cache/debs"; mkdir -p "$kdir" "$cache/debs"
    ( cd "$cache/debs" && timeout 900 apt-get -qq download "linux-image-$kver" ) 2>&1 |
        grep -v 'unsandboxed' >&2 || true
    deb=$(ls "$cache"/debs/linux-image-"$kver"_*.deb 2>/dev/null | tail -n 1)
    [ -n "$deb" ] || die "apt-get download linux-image-$kver failed"
    dpkg-deb -x "$deb" "$kdir"
    rm -rf "$cache/debs"
    touch "$kdir/.done"
fi
vmlinuz=$kdir/boot/vmlinuz-$kver
mods=$kdir/lib/modules/$kver
[ -r "$vmlinuz" ] || die "no $vmlinuz"
core=$(find "$mods" -name ib_core.ko | head -n 1)
[ "$(modinfo -F vermagic "$ko")" = "$(modinfo -F vermagic "$core")" ] ||
    die "vermagic of $ko does not match the kernel image"
lap "kernel image"

# Userland: host binaries and everything they load.
# socat: the kernel-path cells run it under libxsock (matrix.sh, *-k-*)
# tc: netem on the guest's eth1 (roce-netem.sh; the host kernel has none)
bins=(/usr/bin/busybox /usr/bin/tcpdump /usr/bin/rdma /usr/sbin/ip /usr/bin/strace /usr/bin/socat
    /usr/sbin/tc)
for pkg in ibverbs-utils rdmacm-utils perftest; do
    while read -r f; do [ -f "$f" ] && [ -x "$f" ] && bins+=("$f"); done \
        < <(dpkg -L "$pkg" | grep -E '^/usr/s?bin/[^/]+$')
done
libdir=/usr/lib/x86_64-linux-gnu
# dlopen()ed, invisible to ldd
dl=("$libdir/libibverbs/libsiw-rdmav34.so" "$libdir/libibverbs/librxe-rdmav34.so" "$libdir/libgcc_s.so.1")
initrd=$cache/initramfs-$kver.cpio.gz
key=$( { echo "$kver ${bins[*]}"; cat "$0" "$here"/guest/*;
         sha256sum "$ko" "${bins[@]}" "${dl[@]}" "$libdir/libibverbs.so.1" "$libdir/librdmacm.so.1" | cut -c1-64; } 2>/dev/null |
       sha256sum | cut -c1-16)
if [ $force = 1 ] || [ ! -f "$initrd" ] || [ "$(cat "$initrd.key" 2>/dev/null)" != "$key" ]; then
    root=$cache/initramfs.d
    rm -rf "$root"
    mkdir -p "$root"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$root"/{etc/xs,etc/libibverbs.d,proc,sys,dev,tmp,run,host,root}
    for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
    put() { # put PATH: copy PATH into the tree, following its symlink chain
        local p=$1 t
        while :; do
            if [ ! -e "$root$p" ] && [ ! -L "$root$p" ]; then
                mkdir -p "$root${p%/*}"
                cp -P "$p" "$root$p"
            fi
            [ -L "$p" ] || return 0
            t=$(readlink "$p")
            case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac
        done
    }
    put_elf() { # put_elf PATH: the file and every library it needs
        local l
        put "$1"
        for l in $(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+' | sort -u); do
            case $l in /lib/*|/lib64/*) l=/usr$l ;; esac
            put "$l"
        done
    }
    for b in "${bins[@]}" "${dl[@]}"; do put_elf "$b"; done
    for app in $(busybox --list-full); do
        [ -e "$root/usr/${app#usr/}" ] || ln -s /usr/bin/busybox "$root/usr/${app#usr/}"
    done
    cp /etc/libibverbs.d/siw.driver /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
    cp /etc/protocols /etc/services "$root/etc/" 2>/dev/null || true
    printf 'root:x:0:0:root:/root:/bin/sh\ntcpdump:x:0:0::/:/bin/false\n' > "$root/etc/passwd"
    printf 'root:x:0:\ntcpdump:x:0:\n' > "$root/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files\n' > "$root/etc/nsswitch.conf"
    printf '127.0.0.1 localhost\n10.0.2.15 xs-guest\n10.0.2.2 host\n10.0.3.2 xs-guest-tap\n10.0.3.1 host-tap\n' > "$root/etc/hosts"

    # Kernel modules in load order (modinfo depends, depth first).
    declare -A have=()
    order=()
    addmod() {
        local n=${1//-/_} f d
        [ -n "${have[$n]:-}" ] && return 0
        have[$n]=1
        if [ "$n" = siw ]; then f=$ko
        else f=$(find "$mods/kernel" \( -name "$n.ko" -o -name "${n//_/-}.ko" \) | head -n 1); fi
        [ -n "$f" ] || die "module $1 not in $kver"
        for d in $(modinfo -F depends "$f" | tr ',' ' '); do addmod "$d"; done
        mkdir -p "$root/lib/modules/$kver/kernel"
        cp "$f" "$root/lib/modules/$kver/kernel/"
        order+=("$(basename "$f" .ko)")
    }
    for m in virtio_pci virtio_net 9pnet_virtio 9p; do addmod "$m"; done
    printf '%s\n' "${order[@]}" > "$root/etc/xs/modules.virtio"; order=()
    for m in crc32c_generic crc32c-intel libcrc32c ib_core ib_uverbs iw_cm ib_cm rdma_cm rdma_ucm; do addmod "$m"; done
    printf '%s\n' "${order[@]}" > "$root/etc/xs/modules.rdma"; order=()
    # rdma_rxe (Soft-RoCE) for the tap NIC, loaded by xs-rxe (guest.sh --rxe)
    # crc32_generic: rxe asks the crypto API for "crc32" (its ICRC) when a
    # link is added, not a module dependency modinfo lists
    for m in crc32_generic udp_tunnel ip6_udp_tunnel rdma_rxe; do addmod "$m"; done
    printf '%s\n' "${order[@]}" > "$root/etc/xs/modules.rxe"; order=()
    # sch_netem: loss and reordering on eth1 (roce-netem.sh loads it)
    addmod sch_netem
    printf '%s\n' "${order[@]}" > "$root/etc/xs/modules.netem"; order=()
    addmod siw
    install -m 0755 "$here/guest/init" "$root/init"
    install -m 0755 "$here/guest/xs-wait-port" "$here/guest/xs-capture" "$here/guest/xs-rxe" \
        "$root/usr/bin/"
    { echo "kernel=$kver"
      echo "linux-source=$(dpkg-query -W -f='${Version}' linux-source-6.1)"
      echo "rdma-core=$(dpkg-query -W -f='${Version}' rdma-core)"
      echo "perftest=$(dpkg-query -W -f='${Version}' perftest)"; } > "$root/etc/xs/versions"
    ( cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet ) | gzip -1 > "$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
    echo "$key" > "$initrd.key"
    rm -rf "$root"
fi
ln -sfn "$vmlinuz" "$cache/vmlinuz"
ln -sfn "$initrd" "$cache/initramfs.cpio.gz"
lap "initramfs $(du -h "$initrd" | cut -f1)"
awk -v a="$t_all" -v b="$(date +%s.%N)" -v k="$kver" -v c="$cache" \
    'BEGIN{printf "guest-prepare: ready in %.1f s (kernel %s, cache %s)\n", b-a, k, c}' >&2
