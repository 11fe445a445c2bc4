#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A connection exec'd as a program's stdin and stdout (issue 30, item 3):
# two or more descriptors of one IWARP connection handed across execve,
# and the new program using them with stdio (xsock(7) EXEC).  Every end
# under `xsock-run --iwarp`; each case's traffic is checked in the stack's
# own log (stack_check: an iWARP connection on its port, data both ways).
#   git: Debian's git daemon and git clone (the daemon forks and execs
#     `git daemon --serve` with the connection as stdin and stdout, which
#     forks and execs git upload-pack on them and closes its own: the
#     upload-pack's fflush(stdout) failed with EINVAL); the clone's
#     content is checked;
#   inetd styles (tests/xsock-exec-check): dup2 onto 0 and 1 then close;
#     the parent keeping its copies open; accepted close-on-exec and
#     dup2'ed onto 0, 1 and 2, the original left to the exec;
#     close + dup; each with a stdio echo (fread/fwrite/fflush) exec'd
#     directly, through git daemon --serve's fork + exec (spawn), and
#     through a second exec (env);
#   socat TCP-LISTEN,fork EXEC:...,nofork (socat dup2s the connection onto
#     0 and 1 and execs a shell that greets and execs the stdio echo).
# A missing tool is a failure.
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
chk=${XS_TOP_BUILDDIR:-.}/tests/xsock-exec-check
[ -x "$chk" ] || { echo "FAIL: $chk missing"; exit 99; }
for t in git socat; do
    command -v $t >/dev/null 2>&1 || { echo "FAIL: $t not installed (scripts/install-deps.sh)"; exit 99; }
done
xs_scratch
chk=$(cd "$(dirname "$chk")" && pwd)/xsock-exec-check

# ---- git daemon + git clone ----
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git init -q --bare "$tmp/r.git"
git init -q "$tmp/w"
head -c 300000 /dev/urandom >"$tmp/w/big"
echo one >"$tmp/w/small"
git -C "$tmp/w" add big small
git -C "$tmp/w" -c user.email=t@x -c user.name=t commit -qm one
echo two >>"$tmp/w/small"
git -C "$tmp/w" -c user.email=t@x -c user.name=t commit -qam two
git -C "$tmp/w" push -q "$tmp/r.git" HEAD:refs/heads/master
git -C "$tmp/r.git" symbolic-ref HEAD refs/heads/master
want=$(git -C "$tmp/w" rev-parse HEAD)
port=$(xs_free_port)
stack_mark git "$port"
iwarp_run timeout 120 git daemon --reuseaddr --base-path="$tmp" --export-all \
    --port="$port" --listen=127.0.0.1 --informative-errors >"$tmp/git.srv" 2>&1 &
srv=$!
xs_wait_listen "$port" || { echo "FAIL git: no listener"; cat "$tmp/git.srv"; fail=1; }
for i in 1 2; do
    if iwarp_run timeout 60 git clone -q "git://127.0.0.1:$port/r.git" "$tmp/c$i" >"$tmp/git.cli" 2>&1 &&
        [ "$(git -C "$tmp/c$i" rev-parse HEAD)" = "$want" ] &&
        cmp -s "$tmp/w/big" "$tmp/c$i/big" && cmp -s "$tmp/w/small" "$tmp/c$i/small"; then
        echo "git clone $i: HEAD $want, both files identical"
    else
        echo "FAIL git clone $i"; cat "$tmp/git.cli"; xs_tail "$tmp/git.srv"; fail=1
    fi
done
xs_reap "$srv"; srv=
stack_check git iwarp

# ---- inetd styles, the stdio echo ----
# case_inetd NAME STYLE SERVICE...: 2 clients of 300 kB each
case_inetd() {
    name=$1; style=$2; shift 2
    port=$(xs_free_port)
    stack_mark "$name" "$port"
    iwarp_run timeout 60 "$chk" "$style" "$port" 2 "$@" >"$tmp/$name.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$port" || { echo "FAIL $name: no listener"; fail=1; }
    for i in 1 2; do
        if iwarp_run timeout 30 "$chk" client "$port" 300000 >"$tmp/$name.cli" 2>&1; then
            echo "$name: $(cat "$tmp/$name.cli")"
        else
            echo "FAIL $name: client $i"; cat "$tmp/$name.cli"; fail=1
        fi
    done
    wait "$srv"; rc=$?; srv=
    [ "$rc" = 0 ] || { echo "FAIL $name: inetd exit $rc"; xs_tail "$tmp/$name.srv"; fail=1; }
    stack_check "$name" iwarp
}

for style in inetd inetd-keep inetd-cloexec inetd-dup; do
    case_inetd "$style" "$style" "$chk" stdio-echo
    case_inetd "$style-spawn" "$style" "$chk" spawn "$chk" stdio-echo
done
case_inetd chain inetd-keep env XSOCK_X=1 "$chk" spawn "$chk" stdio-echo

# ---- socat EXEC, nofork ----
printf '#!/bin/sh\necho HELLO 0\nexec "%s" stdio-echo\n' "$chk" >"$tmp/svc.sh"
chmod +x "$tmp/svc.sh"
port=$(xs_free_port)
stack_mark socat "$port"
iwarp_run timeout 60 socat TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr,fork \
    EXEC:"$tmp/svc.sh",nofork >"$tmp/socat.srv" 2>&1 &
srv=$!
xs_wait_listen "$port" || { echo "FAIL socat: no listener"; fail=1; }
for i in 1 2; do
    if iwarp_run timeout 30 "$chk" client "$port" 300000 >"$tmp/socat.cli" 2>&1; then
        echo "socat EXEC nofork: $(cat "$tmp/socat.cli")"
    else
        echo "FAIL socat EXEC nofork: client $i"; cat "$tmp/socat.cli"; xs_tail "$tmp/socat.srv"; fail=1
    fi
done
xs_reap "$srv"; srv=
stack_check socat iwarp
exit $fail
