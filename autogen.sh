#!/bin/sh
# Regenerate the autotools build system.
set -e
cd "$(dirname "$0")"
autoreconf -fi
