# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Shared by the plain-server tests (test-xsock-plain.sh,
# test-xsock-plain-nb.sh).  Sourced after xs_test_lib.sh; needs $peer
# (tests/xsock-plain-peer.py), $tmp, and for plain_client_run $mpa and
# $ping (the first octets of an MPA Request and of the client's own).
#
# plain_client_run PORT HOW KIND: the peer's client, its way of waiting
# HOW, two connections to PORT under --iwarp with XSOCK_DEBUG=1 (output in
# $tmp/c.out, c.err); what the KIND server logged of them meanwhile
# ($tmp/KIND.log).  Sets rc, nmpa, nping, nother (the server's
# connections by first octets), why (the first XSOCK_DEBUG reason),
# lately (connections plain at once), tries (connections plain).
plain_client_run() {
    n0=$(wc -l <"$tmp/$3.log")
    XSOCK_DEBUG=1 XSOCK_RULES= XSOCK_CONFIG= timeout 60 "$XS_RUN" --iwarp \
        python3 "$peer" client "$1" $2 2 >"$tmp/c.out" 2>"$tmp/c.err"
    rc=$?
    sleep 0.1 # the server's log line of the last connection
    seen=$(tail -n +$((n0 + 1)) "$tmp/$3.log")
    nmpa=$(echo "$seen" | grep -c "^$mpa")
    nping=$(echo "$seen" | grep -c "^$ping")
    nother=$(echo "$seen" | grep -vc "^$mpa\|^$ping")
    why=$(grep 'a plain TCP connection instead' "$tmp/c.err" | head -n 1 | sed 's/.*fd [0-9]*: //; s/: a plain TCP connection instead//')
    lately=$(grep -c 'a plain TCP server lately' "$tmp/c.err")
    tries=$(grep -c 'a plain TCP connection instead' "$tmp/c.err")
}

# The xsock-stat case:
#
# plain_stat_run [WAIT]: three plain servers (greet, close, silent), and a
# live client under --iwarp, with the default settings, that connects to
# greet twice, close and silent (WAIT: its way of waiting, for a
# non-blocking connect) and stays; xsock-stat reads it then, into
# $tmp/stat.txt, stat.json, list.txt, list.json.  Sets cpid, state
# ("ready" if the client got there), crc (its exit status), p_greet,
# p_close, p_silent.  plain_stat_ok: the text view counts what it must.
plain_stat_want="4 connects went plain (octets 1, closed 1, silent 1, remembered 1, other 0)"
plain_stat_run() {
    stat=${XS_TOP_BUILDDIR:-.}/tools/xsock-stat
    pids=
    for kind in greet close silent; do
        port=$(xs_free_port)
        env -u LD_PRELOAD python3 "$peer" server $kind "$port" "$tmp/$kind.stat.log" 2>>"$tmp/srv.err" &
        pids="$pids $!"
        xs_wait_listen "$port" || { echo "FAIL: $kind server did not listen"; cat "$tmp/srv.err"; xs_reap $pids; exit 1; }
        eval "p_$kind=$port"
    done
    XSOCK_DEBUG=1 XSOCK_RULES= XSOCK_CONFIG= timeout 90 "$XS_RUN" --iwarp \
        python3 "$peer" stay "$p_greet,$p_greet,$p_close,$p_silent" "$tmp/ready" ${1:+"$1"} \
        >"$tmp/stay.out" 2>"$tmp/stay.err" &
    cli=$!
    i=0
    while [ ! -f "$tmp/ready" ] && [ $i -lt 300 ] && kill -0 $cli 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
    read -r cpid state <"$tmp/ready" 2>/dev/null || { cpid=; state=; }
    if [ "$state" = ready ]; then
        "$stat" -p "$cpid" >"$tmp/stat.txt" 2>&1
        "$stat" -p "$cpid" --json >"$tmp/stat.json" 2>&1
        "$stat" >"$tmp/list.txt" 2>&1
        "$stat" --json >"$tmp/list.json" 2>&1
    fi
    rm -f "$tmp/ready"
    wait $cli
    crc=$?
    xs_reap $pids
}
plain_stat_ok() {
    [ "$state" = ready ] && [ $crc = 0 ] && grep -qF "plain TCP: $plain_stat_want" "$tmp/stat.txt" &&
        [ "$(grep -c '^plain  -> ' "$tmp/stat.txt")" = 4 ] &&
        grep '^plain  -> ' "$tmp/stat.txt" | head -n 1 | grep -q "127.0.0.1:$p_silent  *silent" &&
        grep -q "127.0.0.1:$p_close  *closed" "$tmp/stat.txt" &&
        grep -q "127.0.0.1:$p_greet  *octets" "$tmp/stat.txt" &&
        grep -q "127.0.0.1:$p_greet  *remembered" "$tmp/stat.txt"
}
