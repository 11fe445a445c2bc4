#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Selection rules end to end (xsock.conf(5)): a plain sockets program
# (tests/xsock-select-check) listens on two free ports A and B, connects to
# each and copies data; under `xsock-run --iwarp-port A` only A's sockets
# (listener, connected, accepted) must report IWARP_MODE 1, B's 0.  The
# same through --config FILE (with a malformed line, which must be
# reported on stderr and skipped), through --iwarp-addr, and with a "tcp"
# rule carving B out of --iwarp.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
chk=${XS_TOP_BUILDDIR:-.}/tests/xsock-select-check
[ -x "$chk" ] || { echo "FAIL: $chk missing"; exit 99; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
a=$(xs_free_port)
b=$(xs_free_port)
while [ "$b" = "$a" ]; do b=$(xs_free_port); done

step() {
    name=$1; shift
    if env XSOCK_RULES= XSOCK_CONFIG= timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"; then
        echo "$name: ok"; sed 's/^/  /' "$tmp/out"
    else
        echo "FAIL $name"; cat "$tmp/out" "$tmp/err"; fail=1
    fi
}

step "--iwarp-port A" "$XS_RUN" --iwarp-port "$a" "$chk" "$a" 1 "$b" 0
step "--iwarp-addr 127.0.0.0/8" "$XS_RUN" --iwarp-addr 127.0.0.0/8 "$chk" "$a" 1 "$b" 1
step "--iwarp-addr 10.0.0.0/8" "$XS_RUN" --iwarp-addr 10.0.0.0/8 "$chk" "$a" 0 "$b" 0

cat >"$tmp/xsock.conf" <<CONF
# test configuration: the first rule that matches wins
tcp   xsock-select-*  both    127.0.0.1:$b
iwarp nonsense
iwarp xsock-select-*  listen  127.0.0.0/8:$a
iwarp xsock-select-*  connect 127.0.0.1:$a-$a
CONF
step "--config FILE" "$XS_RUN" --config "$tmp/xsock.conf" "$chk" "$a" 1 "$b" 0
if grep -q "xsock.conf:3: .*rule ignored" "$tmp/err"; then
    echo "--config FILE: malformed line reported"
else
    echo "FAIL --config FILE: no message for line 3"; cat "$tmp/err"; fail=1
fi
step "--iwarp with a tcp rule" "$XS_RUN" --iwarp --config "$tmp/xsock.conf" "$chk" "$a" 1 "$b" 0
# a rule for another program selects nothing
printf 'iwarp someotherprogram both *\n' >"$tmp/other.conf"
step "rule for another program" "$XS_RUN" --config "$tmp/other.conf" "$chk" "$a" 0 "$b" 0
exit $fail
