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
echo "== fresh module: no adapter's dependency in its module graph"
heavy=$(go list -m all | grep -E 'aws-sdk-go|smithy-go|go-redis|google.golang.org/grpc|go.opentelemetry.io' || true)
if [ -n "$heavy" ]; then
	echo "importing budgettest and model brought an adapter's dependency into the team's module graph:" >&2
	echo "$heavy" >&2
	exit 1
fi
echo "   go list -m all: $(go list -m all | wc -l) modules, none of the AWS SDK, go-redis, gRPC or OpenTelemetry"
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

# A team's code that used the three adapters awsbudget, redisbudget and
# httpbudget builds once it adds the two that are modules of their own, as
# the README says (go get of their module paths; here a replace directive
# points each at this checkout, as no version is published).
adir=$(mktemp -d)
trap 'rm -rf "$dir" "$adir"' EXIT
cat >"$adir/main.go" <<'GO'
package main

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/redis/go-redis/v9"

	"github.com/retrybudget/retrybudget/awsbudget"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/httpbudget"
	"github.com/retrybudget/retrybudget/redisbudget"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	fleet, err := redisbudget.NewTokenBucket(redisbudget.Config{Client: rdb, Name: "team"}, budget.DefaultTokenBucketConfig())
	if err != nil {
		panic(err)
	}
	_ = retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = awsbudget.New(fleet) })
	_ = &http.Client{Transport: &httpbudget.Transport{Retrier: &budget.Retrier{Budget: fleet}}}
}
GO
cat >"$adir/go.mod" <<MOD
module example.com/adapters

go 1.26.0

replace (
	github.com/retrybudget/retrybudget => $root
	github.com/retrybudget/retrybudget/awsbudget => $root/awsbudget
	github.com/retrybudget/retrybudget/redisbudget => $root/redisbudget
)
MOD
cd "$adir"
echo "== a team's module with the adapters: go get of the module paths, go build"
go get github.com/retrybudget/retrybudget@v0.0.0 github.com/retrybudget/retrybudget/awsbudget@v0.0.0 github.com/retrybudget/retrybudget/redisbudget@v0.0.0
go mod tidy
go build ./...
go vet ./...
echo "   built: $(go list -m all | grep -c retrybudget) retrybudget modules in its graph"
