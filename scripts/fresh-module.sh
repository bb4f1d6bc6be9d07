#!/usr/bin/env bash
# A team's first hour, replayed: testdata/external copied to a new
# directory outside this module, with no go.sum and no tool directive, and
# its replace directive pointed at this checkout. `go mod tidy` and
# `go test ./...` must give the controlled verdict (its test of FastQuota
# requires a schedule to replay), and the tool form from the README must
# install budgetcheck and print its own usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$root"/testdata/external/*.go "$dir"/
cat >"$dir/go.mod" <<MOD
module example.com/fresh

go 1.26.0

require github.com/retrybudget/retrybudget v0.0.0

replace github.com/retrybudget/retrybudget => $root
MOD
cd "$dir"
echo "== fresh module: go mod tidy"
go mod tidy
echo "== fresh module: go test ./..."
go test -count=1 ./...
echo "== fresh module: go test -race ./..."
go test -count=1 -race ./...
echo "== fresh module: the tool form"
go mod edit -tool github.com/retrybudget/retrybudget/cmd/budgetcheck
go mod tidy
out=$(go tool budgetcheck -h)
case "$out" in
"usage: budgetcheck"*) echo "$out" | head -1 ;;
*)
	echo "go tool budgetcheck -h printed something else:" >&2
	echo "$out" >&2
	exit 1
	;;
esac
