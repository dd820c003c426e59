#!/bin/sh
# A stand-in for a nightly export, to run under `leasekeeper exec` (README.md,
# docs/cli.md): exec holds the lock while this runs and hands it the lease's
# fencing token, with which it writes each part to the lock's fenced store,
# so that a run that stalled past its lease cannot overwrite the parts of the
# run that took over.
set -eu

case "${LEASEKEEPER_PREDECESSOR_ENDED:-}" in
lapsed | revoked)
	# The last holder lost its lease rather than release it: it may have
	# stopped half-way. A real job would check its parts here first.
	echo "the last holder did not release the lock (its lease was $LEASEKEEPER_PREDECESSOR_ENDED): its parts may be half written" >&2
	;;
esac

for part in 1 2 3; do
	rows="rows $(((part - 1) * 100 + 1))-$((part * 100))"
	leasekeeper write "$LEASEKEEPER_LOCK" "part-$part" "$rows" --token "$LEASEKEEPER_TOKEN" >/dev/null
	echo "exported part-$part ($rows) of $LEASEKEEPER_LOCK with token $LEASEKEEPER_TOKEN"
done
