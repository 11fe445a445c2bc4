#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# rdma-core's own Python bindings (Debian's python3-pyverbs) as an
# unmodified consumer under xsock-run: the device's identity through every
# query (query_gid_ex crashed the process once), objects, QP transitions,
# and a CMID connection with data checked (tests/pyverbs_consumer.py).
set -u
. "${XS_TOP_SRCDIR:-.}/tests/xs_test_lib.sh"
[ -x "$XS_RUN" ] || { echo "FAIL: $XS_RUN missing"; exit 99; }
# Debian's interpreter: the one python3-pyverbs is built for (a PATH python
# may be another build without it)
py=/usr/bin/python3
"$py" -c 'import pyverbs.cmid' 2>/dev/null ||
    { echo "SKIP: python3-pyverbs not installed"; exit 77; }
port=$(xs_free_port)
timeout 60 "$XS_RUN" "$py" "${XS_TOP_SRCDIR:-.}/tests/pyverbs_consumer.py" "$port"
rc=$?
[ $rc = 0 ] || echo "FAIL: pyverbs consumer exited $rc"
exit $rc
