#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Test driver wrapper: every test gets a wall-clock limit so nothing can hang
# CI (XS_TEST_TIMEOUT seconds, default 300).  Shell tests run under sh.
t="$1"; shift
case "$t" in
*.sh) exec timeout -k 5 "${XS_TEST_TIMEOUT:-300}" sh "$t" "$@" ;;
*) exec timeout -k 5 "${XS_TEST_TIMEOUT:-300}" "$t" "$@" ;;
esac
