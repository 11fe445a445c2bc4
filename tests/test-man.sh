#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Every man page renders without groff warnings, and its footer names this
# version of xsock (PACKAGE_VERSION, from configure.ac); the settings table
# is documented (below).
set -u
top=${XS_TOP_SRCDIR:-.}
command -v groff >/dev/null 2>&1 || { echo "SKIP: no groff"; exit 77; }
fail=0
ver=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "${XS_TOP_BUILDDIR:-.}/config.h")
[ -n "$ver" ] || { echo "FAIL: no PACKAGE_VERSION in config.h"; exit 1; }
for p in "$top"/man/*.[0-9]; do
    grep -q "^\.TH .* \"xsock $ver\"" "$p" || { echo "FAIL $p: .TH does not say \"xsock $ver\""; fail=1; }
done
for p in "$top"/man/*.[0-9]; do
    [ -e "$p" ] || continue
    out=$(groff -man -Tutf8 -ww -z "$p" 2>&1)
    if [ -n "$out" ]; then
        echo "FAIL $p:"; echo "$out"; fail=1
    else
        echo "ok $p"
    fi
done
# Every XSOCK_* setting (verbs/xs_settings.h, printed by
# tests/xsock-settings-dump) has an entry in xsock-run(1) or xsock(7) that
# gives its default (and a number's range), and xsock-run --help shows the
# user-facing ones line for line as the table says.
build=${XS_TOP_BUILDDIR:-.}
dump="$build/tests/xsock-settings-dump"
[ -x "$dump" ] || { echo "FAIL: no $dump"; exit 1; }
rows=$("$dump" --tsv) || { echo "FAIL: $dump --tsv"; exit 1; }
missing=$(printf '%s\n' "$rows" | awk -F'\t' '
function flush(   i, k, nt, t, tk) {
	if (tag == "")
		return
	gsub(/\\-/, "-", body)
	nt = split(body, t, /[^A-Za-z0-9._\/-]+/)
	k = split(tag, tk, /[^A-Z0-9_]+/)
	for (i = 1; i <= k; i++)
		if (tk[i] ~ /^XSOCK_/) {
			seen[tk[i]] = 1
			for (j = 1; j <= nt; j++) {
				sub(/\.$/, "", t[j])
				has[tk[i], t[j]] = 1
			}
		}
	tag = ""
}
FNR == NR { n++; name[n] = $1; kind[n] = $2; dflt[n] = $3; lo[n] = $4; hi[n] = $5; internal[n] = $6; next }
/^\.TP/ { flush(); tagnext = 1; next }
/^\.(PP|SH|SS|LP|P)( |$)/ { flush(); next }
tagnext { tag = $0; body = ""; tagnext = 0; next }
tag != "" { body = body " " $0 }
END {
	flush()
	for (i = 1; i <= n; i++) {
		v = name[i]
		if (!seen[v])
			print v ": no entry"
		else if (dflt[i] != "" && !has[v, dflt[i]])
			print v ": default " dflt[i] " not said"
		else if (kind[i] == "uint" && !internal[i] && (!has[v, lo[i]] || !has[v, hi[i]]))
			print v ": range " lo[i] " to " hi[i] " not said"
	}
}' - "$top/man/xsock-run.1" "$top/man/xsock.7")
if [ -n "$missing" ]; then
    echo "FAIL: settings not documented in xsock-run.1 or xsock.7:"; echo "$missing"; fail=1
else
    echo "ok every setting documented with its default"
fi
help=$(sh "$build/tools/xsock-run" --help 2>&1)
want=$("$dump" --help) || { echo "FAIL: $dump --help"; exit 1; }
printf '%s\n' "$want" | while IFS= read -r line; do
    printf '%s\n' "$help" | grep -qxF -- "$line" || echo "xsock-run --help lacks: $line"
done > "${TMPDIR:-/tmp}/test-man-help.$$"
if [ -s "${TMPDIR:-/tmp}/test-man-help.$$" ]; then
    echo "FAIL: xsock-run --help is not the table's (paste tests/xsock-settings-dump --help into tools/xsock-run.in):"
    cat "${TMPDIR:-/tmp}/test-man-help.$$"; fail=1
else
    echo "ok xsock-run --help lists the settings"
fi
rm -f "${TMPDIR:-/tmp}/test-man-help.$$"
exit $fail
