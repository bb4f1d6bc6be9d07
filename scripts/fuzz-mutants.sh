#!/usr/bin/env bash
# Times how long fuzzing takes to find each slot-arithmetic mutant of the
# ratio window. For each mutant it copies FuzzRatioWindow's seed corpus,
# drops the seeds that already fail on that mutant (its own crashers), and
# fuzzes from what is left, with an empty fuzz cache, until the first
# failure or the time limit.
#
# usage: scripts/fuzz-mutants.sh [seconds per mutant, default 60] [mutant ...]
set -euo pipefail
limit=${1:-60}
shift || true
mutants=("$@")
if [ ${#mutants[@]} -eq 0 ]; then
	mutants=(EarlyEviction NegativeModulo SlotStartOverflow)
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go test -c -fuzz '^FuzzRatioWindow$' -o "$work/fuzz.test" "$root/internal/fuzzops"
status=0
for m in "${mutants[@]}"; do
	dir="$work/$m"
	mkdir -p "$dir/testdata/fuzz"
	cp -r "$root/internal/fuzzops/testdata/fuzz/FuzzRatioWindow" "$dir/testdata/fuzz/"
	dropped=()
	for seed in "$dir"/testdata/fuzz/FuzzRatioWindow/*; do
		name=$(basename "$seed")
		if ! (cd "$dir" && RETRYBUDGET_FUZZ_RATIO=$m "$work/fuzz.test" -test.run="^FuzzRatioWindow\$/^$name\$" >/dev/null 2>&1); then
			rm "$seed"
			dropped+=("$name")
		fi
	done
	out=$(cd "$dir" && RETRYBUDGET_FUZZ_RATIO=$m timeout $((limit + 30)) "$work/fuzz.test" \
		-test.run='^$' -test.fuzz='^FuzzRatioWindow$' -test.fuzztime="${limit}s" \
		-test.fuzzcachedir="$dir/cache" 2>&1 || true)
	if found=$(grep -m1 -oE -- '--- FAIL: FuzzRatioWindow \([0-9.]+s\)' <<<"$out"); then
		secs=$(grep -oE '[0-9.]+s' <<<"$found")
		printf '%-18s found in %-8s (seeds dropped: %s)\n' "$m" "$secs" "${dropped[*]:-none}"
		grep -m1 -E 'want|panicked' <<<"$out" | sed 's/^/    /' || true
	else
		printf '%-18s NOT found in %ss (seeds dropped: %s)\n' "$m" "$limit" "${dropped[*]:-none}"
		status=1
	fi
done
exit $status
