# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The OpenSSH tests' kit, sourced by tests/test-prog-sshd.sh and
# tests/test-prog-sshd-iwarp.sh after tests/xs_test_lib.sh: the skips, a
# scratch directory with a host key and a client key, sshd_start.
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 && command -v scp >/dev/null 2>&1 ||
    { echo "SKIP: openssh-server/openssh-client not installed"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: sshd needs root (privilege separation)"; exit 77; }

xs_scratch
xs_capture_ok "the sessions"
mkdir -p /run/sshd
chmod 755 "$tmp"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/hostkey" || exit 99
ssh-keygen -q -t ed25519 -N '' -f "$tmp/id" || exit 99
cp "$tmp/id.pub" "$tmp/authorized_keys"
sftp=$(ls /usr/lib/openssh/sftp-server 2>/dev/null || echo internal-sftp)
ssh_o="-i $tmp/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"

now_ms() { date +%s%3N; }

# sshd_start NAME RUN PORT
sshd_start() {
    cat >"$tmp/sshd_config" <<EOC
Port $3
ListenAddress 127.0.0.1
HostKey $tmp/hostkey
AuthorizedKeysFile $tmp/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile $tmp/sshd.pid
Subsystem sftp $sftp
EOC
    $2 timeout 120 /usr/sbin/sshd -D -e -f "$tmp/sshd_config" >"$tmp/$1.srv" 2>&1 &
    srv=$!
    xs_wait_listen "$3" || { echo "FAIL $1: sshd did not listen"; cat "$tmp/$1.srv"; fail=1; }
}
