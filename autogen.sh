#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Regenerate the autotools build system.
set -e
cd "$(dirname "$0")"
autoreconf -fi
