#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Install every build and test dependency of xsock from Debian packages.
# Non-interactive and idempotent: packages already present are not reinstalled.
set -eu

PKGS="build-essential autoconf automake libtool pkg-config make gcc clang \
libclang-rt-14-dev llvm \
liburing-dev libssl-dev libibverbs-dev librdmacm-dev libisal-dev \
ibverbs-utils rdmacm-utils perftest fio qperf socat curl iperf3 sockperf \
tshark tcpdump python3 groff-base valgrind procps \
qemu-system-x86 busybox-static cpio kmod iproute2 strace linux-source-6.1 gcc-12 patch xz-utils \
redis-server redis-tools nginx-light openssh-server openssh-client rsync wrk postgresql libfabric-bin \
tgt libiscsi-bin python3-pyverbs memcached gnuplot-nox time git openmpi-bin libopenmpi-dev \
apache2-utils lighttpd gdb"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
echo "install-deps: installed$missing"
