#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's postgresql-15 over libxsock (issue 12): a scratch cluster
# (initdb as the postgres user, 127.0.0.1 only, fsync off); pgbench -i,
# then pgbench -c 4 -j 2 -T 3 (TPC-B like) and -S (select only) over TCP,
# 0 failed transactions and a tps; psql writes a row and reads it back:
#   iwarp  postgres and the clients under `xsock-run --iwarp`,
#   mixed  postgres under it, plain clients (the mixed listener),
#   plain  all plain (libxsock preloaded, no IWARP socket): the ratios;
#   roce   postgres and the clients under `xsock-run --iwarp --roce`.
# postgres forks a backend per connection (xsock(7) FORK): over iWARP the
# backend claims the connection, over RoCE (a connection is its maker's)
# the postmaster relays it to the backend.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
pgbin=/usr/lib/postgresql/15/bin
for p in initdb postgres pgbench psql; do
    [ -x "$pgbin/$p" ] || { echo "SKIP: $pgbin/$p missing (postgresql-15)"; exit 77; }
done
id postgres >/dev/null 2>&1 || { echo "SKIP: no postgres user"; exit 77; }
# With libasan preloaded (the sanitizer build), Debian's postgres, initdb
# and psql hang at exit, with or without libxsock: libp11-kit's destructor
# calls freelocale(), which waits forever on glibc's __libc_setlocale_lock
# (gdb: _dl_call_fini -> libp11-kit -> __freelocale -> rwlock_wrlock), as
# curl does in test-xsock-programs.sh.  Every case needs the server.
# (Any process with libasan and libp11-kit loaded hangs so, even
# `psql --version`; a toolchain limit, listed in tests/skip-reasons.)
case "${LD_PRELOAD:-}" in
*libasan*) echo "SKIP: postgres/initdb/psql hang at exit under the libasan preload (libp11-kit freelocale deadlock)"; exit 77 ;;
esac
# postgres refuses to run as root: the server runs as the postgres user
# (runuser keeps the environment: LD_PRELOAD and XSOCK_* survive)
as_pg=
[ "$(id -u)" = 0 ] && as_pg="runuser -u postgres --"

xs_scratch
xs_capture_ok transactions
chmod 711 "$tmp"
# The server runs as postgres: ld.so must be able to read the preloaded
# libraries as that user, or it ignores the preload (one line on stderr)
# and the server runs plain.  A build tree in a private directory (CI's
# `mktemp -d` clone is 0700) is not readable to it: then the server gets
# copies in the scratch directory.
srv_iwarp=iwarp_run srv_plain=plain_run srv_roce=roce_run
if [ -n "$as_pg" ] && ! $as_pg test -r "$socklib"; then
    mkdir "$tmp/lib"
    cp "${XS_TOP_BUILDDIR:-.}/verbs/.libs/libiwarp.so.0" "$socklib" "$tmp/lib/"
    chmod 755 "$tmp/lib"; chmod 644 "$tmp/lib/"*
    srvlibs="$tmp/lib/libiwarp.so.0 $tmp/lib/libxsock.so.0"
    srv_iwarp=srv_iwarp_copy srv_plain=srv_plain_copy srv_roce=srv_roce_copy
fi
srv_iwarp_copy() {
    LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$srvlibs" XSOCK_IWARP=all XSOCK_RULES= XSOCK_CONFIG= "$@"
}
srv_roce_copy() {
    XSOCK_TRANSPORT=roce srv_iwarp_copy "$@"
}
srv_plain_copy() {
    LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$srvlibs" XSOCK_IWARP= XSOCK_RULES= XSOCK_CONFIG= "$@"
}
pgdata=$tmp/pg
mkdir "$pgdata" "$tmp/sock"
[ -n "$as_pg" ] && chown postgres "$pgdata" "$tmp/sock"
if ! $as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --no-sync \
    >"$tmp/initdb.log" 2>&1; then
    echo "FAIL: initdb"; cat "$tmp/initdb.log"; exit 1
fi

# pg_stop NAME: the server must still run; a fast shutdown (SIGINT to the
# postmaster: killing xsock-run's timeout does not reach it through runuser)
pg_stop() {
    if ! kill -0 "$srv" 2>/dev/null; then
        echo "FAIL $1: server died"; cat "$tmp/$1.srv"; fail=1
    fi
    pm=$(head -1 "$pgdata/postmaster.pid" 2>/dev/null)
    [ -n "$pm" ] && kill -INT "$pm" 2>/dev/null
    i=0
    while [ -f "$pgdata/postmaster.pid" ] && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
    [ -f "$pgdata/postmaster.pid" ] && { echo "FAIL $1: postgres did not stop"; fail=1; kill -9 "$pm"; }
    xs_reap "$srv"; srv=
}

# pg_case NAME SERVER-RUN CLIENT-RUN MODE: sets tps_rw, tps_ro
pg_case() {
    name=pg-$1; crun=$3; port=$(xs_free_port); tps_rw=0 tps_ro=0
    capture_begin "$name" "$port"
    # shellcheck disable=SC2086
    $2 timeout 80 $as_pg "$pgbin/postgres" -D "$pgdata" -c listen_addresses=127.0.0.1 \
        -c port="$port" -c unix_socket_directories="$tmp/sock" -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: postgres did not listen"; fail=1; }
    i=0 # ready for connections (the listener comes before recovery ends)
    until $crun "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc 'select 1' \
        >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.1
    done
    c="-h 127.0.0.1 -p $port -U postgres"
    # shellcheck disable=SC2086
    if ! $crun timeout 60 "$pgbin/pgbench" $c -i -q postgres >"$tmp/$name.init" 2>&1; then
        echo "FAIL $name: pgbench -i"; cat "$tmp/$name.init"; fail=1
        echo "---- the server's log"; tail -20 "$tmp/$name.srv"
    fi
    for k in rw ro; do
        s=; [ $k = ro ] && s=-S
        # shellcheck disable=SC2086
        $crun timeout 60 "$pgbin/pgbench" $c -c 4 -j 2 -T 3 $s postgres >"$tmp/$name.$k" 2>&1
        rc=$?
        t=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/$name.$k" | tail -1)
        failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$tmp/$name.$k")
        if [ $rc = 0 ] && [ -n "$t" ] && [ "$failed" = 0 ]; then
            echo "$name: pgbench $k ${t} tps, 0 failed"
            eval "tps_$k=$t"
        else
            echo "FAIL $name: pgbench $k (exit $rc, failed '$failed')"; cat "$tmp/$name.$k"; fail=1
        fi
    done
    # shellcheck disable=SC2086
    got=$($crun timeout 30 "$pgbin/psql" $c -tAq postgres -c "
        set client_min_messages = warning;
        create table if not exists xs_t (k text primary key, v text);
        insert into xs_t values ('$1', 'xsock-$1-ok') on conflict (k) do update set v = excluded.v;
        select v || ' ' || (select count(*) from pgbench_accounts) from xs_t where k = '$1';" 2>&1)
    if [ "$got" = "xsock-$1-ok 100000" ]; then
        echo "$name: psql row written and read back, 100000 accounts"
    else
        echo "FAIL $name: psql got '$got'"; fail=1
        # what each server process was doing (a hang's place)
        LD_PRELOAD= ps -eo pid,ppid,stat,wchan:24,args | grep "[p]ostgres" | head -20
        for p in $(LD_PRELOAD= pgrep -u postgres postgres | head -8); do
            echo "-- $p: $(tr '\0' ' ' </proc/$p/cmdline)"
            for t in /proc/$p/task/*; do echo "  $(basename "$t") $(cat "$t/comm") $(cat "$t/wchan" 2>/dev/null)"; done
        done
        tail -20 "$tmp/$name.srv"
    fi
    pg_stop "$name"
    if grep -q "cannot be preloaded" "$tmp/$name.srv"; then
        echo "FAIL $name: the server ran without the preload"; grep "cannot be preloaded" "$tmp/$name.srv"; fail=1
    fi
    capture_end "$name" "$4"
}

pg_case iwarp $srv_iwarp iwarp_run iwarp; a_rw=$tps_rw a_ro=$tps_ro
pg_case mixed $srv_iwarp plain_run plain; m_rw=$tps_rw m_ro=$tps_ro
pg_case plain $srv_plain plain_run plain; p_rw=$tps_rw p_ro=$tps_ro
pg_case roce $srv_roce roce_run roce; r_rw=$tps_rw r_ro=$tps_ro
tps_rw=$p_rw tps_ro=$p_ro
awk -v a="$a_rw" -v b="$a_ro" -v m="$m_rw" -v n="$m_ro" -v p="$tps_rw" -v q="$tps_ro" 'BEGIN {
    printf "pgbench tps xsock/plain: TPC-B %.2fx (%.0f/%.0f), select-only %.2fx (%.0f/%.0f); mixed %.2fx, %.2fx\n",
        (p > 0 ? a / p : 0), a, p, (q > 0 ? b / q : 0), b, q, (p > 0 ? m / p : 0), (q > 0 ? n / q : 0) }'
awk -v a="$r_rw" -v b="$r_ro" -v p="$p_rw" -v q="$p_ro" 'BEGIN {
    printf "pgbench tps roce/plain: TPC-B %.2fx (%.0f/%.0f), select-only %.2fx (%.0f/%.0f)\n",
        (p > 0 ? a / p : 0), a, p, (q > 0 ? b / q : 0), b, q }'
exit $fail
