#!/bin/sh
# Usage: check.sh BINARY REFERENCE [REQUESTS]
# Runs both demo-service binaries on the same requests and compares their
# checksums.  Exit 0 if they match, 1 if not, 2 on a usage error.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "usage: check.sh BINARY REFERENCE [REQUESTS]" >&2
	exit 2
fi
n=${3:-200000}
got=$("$1" --requests "$n" 2>/dev/null | grep '^checksum:')
want=$("$2" --requests "$n" 2>/dev/null | grep '^checksum:')
if [ -n "$want" ] && [ "$got" = "$want" ]; then
	echo "check: ok: $1: $got ($n requests)"
	exit 0
fi
echo "check: FAILED: $1: '${got}', $2: '${want}' ($n requests)" >&2
exit 1
