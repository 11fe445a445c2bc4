#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Unmodified Debian clients under `xsock-run --iwarp` against servers that
# are not an xsock (run without the preload), as a user who runs a program
# under --iwarp meets them: every client must get its answer over a plain
# TCP connection (xsock(7) PLAIN SERVERS), the first to a destination and
# the next one (remembered), whatever the client's way of connecting:
#   HTTP (the server waits for the client): curl, wget, Python's urllib,
#     Perl's IO::Socket::INET with a Timeout (a non-blocking connect), and
#     Node.js' http.get (libuv) where node is installed;
#   redis-cli (hiredis) to redis-server, and memcached through socat;
#   git clone from git daemon (the server waits), rsync from rsync's daemon
#   (the server speaks first: "@RSYNCD:").
# Each client's XSOCK_DEBUG=1 line says why its first connection went
# plain; the second must say the destination was remembered.  A row whose
# program is not installed fails (scripts/install-deps.sh installs them),
# except node, which is not a Debian package here: its row then says so.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
xs_scratch
fail=0
srv=

# client_row NAME CHECK-OUTPUT-REGEX COMMAND...: the command twice under
# --iwarp with XSOCK_DEBUG=1 (stderr apart), each must succeed and print
# what CHECK-OUTPUT-REGEX matches, the first saying why it went plain, the
# second that the destination was remembered
client_row() {
    name=$1; want=$2; shift 2
    ok=1
    for i in 1 2; do
        XSOCK_DEBUG=1 iwarp_run timeout 60 "$@" >"$tmp/$name.$i.out" 2>"$tmp/$name.$i.err"
        rc=$?
        why=$(grep -o "libxsock: fd [0-9]*: .*: a plain TCP connection instead" "$tmp/$name.$i.err" | head -1 |
            sed 's/^libxsock: fd [0-9]*: //; s/: a plain TCP connection instead$//')
        if [ $rc != 0 ] || ! grep -Eq "$want" "$tmp/$name.$i.out"; then
            echo "FAIL $name: run $i: exit $rc"; tail -3 "$tmp/$name.$i.out"; grep -v "^xsock: " "$tmp/$name.$i.err" | tail -5
            ok=0
        elif [ -z "$why" ]; then
            echo "FAIL $name: run $i: no XSOCK_DEBUG line says the connection went plain"; tail -3 "$tmp/$name.$i.err"
            ok=0
        elif [ $i = 2 ] && [ "$why" != "a plain TCP server lately" ]; then
            echo "FAIL $name: run 2 was not remembered: $why"; ok=0
        else
            eval "why_$i=\$why"
        fi
    done
    if [ $ok = 1 ]; then
        echo "ok   $name: first: $why_1; then: $why_2"
    else
        fail=1
    fi
}
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "FAIL $1 missing (scripts/install-deps.sh)"; fail=1; return 1
}

# ---- HTTP: Python's http.server (waits for the client) ----
mkdir -p "$tmp/www"
head -c 100000 /dev/urandom >"$tmp/www/f.bin"
sum=$(sha256sum <"$tmp/www/f.bin" | cut -d' ' -f1)
hport() { # a fresh server per client: each row's first connect is a first
    xs_reap $srv
    port=$(xs_free_port)
    (cd "$tmp/www" && env -u LD_PRELOAD python3 -m http.server --bind 127.0.0.1 "$port" \
        >"$tmp/http.log" 2>&1) &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: http.server did not listen"; fail=1; }
    url=http://127.0.0.1:$port/f.bin
}
# a non-sanitized client with libasan preloaded: curl hangs in setlocale
# there (test-prog-nginx.sh), so the HTTP rows run with the build's own
# preload only where it has no sanitizer
case "${LD_PRELOAD:-}" in
*libasan*) asan=1 ;;
*) asan=0 ;;
esac
if [ $asan = 0 ] && need curl; then
    hport
    client_row curl "^$sum\$" sh -c "curl -sS --max-time 20 '$url' | sha256sum | cut -d' ' -f1"
fi
if [ $asan = 0 ] && need wget; then
    hport
    client_row wget "^$sum\$" sh -c "wget -q -T 20 -O - '$url' | sha256sum | cut -d' ' -f1"
fi
hport
client_row python-urllib "^$sum\$" python3 -c "
import hashlib, urllib.request
print(hashlib.sha256(urllib.request.urlopen('$url', timeout=20).read()).hexdigest())"
if need perl; then
    hport
    client_row perl "^$sum\$" sh -c "perl -MIO::Socket::INET -e '
my \$s = IO::Socket::INET->new(PeerAddr => \"127.0.0.1:$port\", Timeout => 10) or die \"connect: \$!\";
print \$s \"GET /f.bin HTTP/1.0\\r\\n\\r\\n\"; local \$/; my \$r = <\$s>; \$r =~ s/^.*?\\r\\n\\r\\n//s; print \$r;
' | sha256sum | cut -d' ' -f1"
fi
if command -v node >/dev/null 2>&1; then
    hport
    client_row node "^$sum\$" node -e "
const h = require('crypto').createHash('sha256');
require('http').get('$url', r => { r.on('data', d => h.update(d)); r.on('end', () => console.log(h.digest('hex'))); })
  .on('error', e => { console.error(e); process.exit(1); });"
else
    echo "--   node: not installed (no Debian package here): not tried"
fi
xs_reap $srv; srv=

# ---- redis-cli to redis-server; memcached through socat ----
if need redis-server && need redis-cli; then
    port=$(xs_free_port)
    env -u LD_PRELOAD redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        >"$tmp/redis.log" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: redis-server did not listen"; fail=1; }
    client_row redis-cli "^v42\$" sh -c "redis-cli -p $port set k v42 >/dev/null && redis-cli -p $port get k"
    xs_reap $srv; srv=
fi
if need memcached && need socat; then
    port=$(xs_free_port)
    env -u LD_PRELOAD memcached -l 127.0.0.1 -p "$port" -U 0 -u nobody >"$tmp/mc.log" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: memcached did not listen"; fail=1; }
    client_row socat-memcached "^VERSION " sh -c "printf 'version\\r\\nquit\\r\\n' | socat -t 5 - TCP:127.0.0.1:$port"
    xs_reap $srv; srv=
fi

# ---- git daemon (waits), rsync's daemon (speaks first) ----
if need git; then
    export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
    git init -q "$tmp/w"
    echo one >"$tmp/w/f"
    git -C "$tmp/w" add f
    git -C "$tmp/w" -c user.email=t@x -c user.name=t commit -qm one
    git clone -q --bare "$tmp/w" "$tmp/r.git"
    head=$(git -C "$tmp/w" rev-parse HEAD)
    port=$(xs_free_port)
    env -u LD_PRELOAD git daemon --reuseaddr --base-path="$tmp" --export-all --port="$port" \
        --listen=127.0.0.1 >"$tmp/git.log" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: git daemon did not listen"; fail=1; }
    client_row git-clone "^$head\$" sh -c "d=\$(mktemp -d '$tmp/c.XXXX') && git clone -q git://127.0.0.1:$port/r.git \"\$d/c\" && git -C \"\$d/c\" rev-parse HEAD"
    xs_reap $srv; srv=
fi
if need rsync; then
    mkdir -p "$tmp/src"
    head -c 200000 /dev/urandom >"$tmp/src/a"
    cat >"$tmp/rsyncd.conf" <<EOF
pid file = $tmp/rsyncd.pid
use chroot = no
uid = $(id -u)
gid = $(id -g)
[mod]
path = $tmp/src
read only = yes
EOF
    port=$(xs_free_port)
    env -u LD_PRELOAD rsync --daemon --no-detach --config="$tmp/rsyncd.conf" --address=127.0.0.1 \
        --port="$port" >"$tmp/rsyncd.log" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL: rsync daemon did not listen"; fail=1; }
    asum=$(sha256sum <"$tmp/src/a" | cut -d' ' -f1)
    client_row rsync "^$asum\$" sh -c "d=\$(mktemp -d '$tmp/r.XXXX') && rsync -a rsync://127.0.0.1:$port/mod/ \"\$d/\" && sha256sum <\"\$d/a\" | cut -d' ' -f1"
    xs_reap $srv; srv=
fi
exit $fail
