# Targets for developers and CI. `make check` is what CI runs.
GO ?= go
BENCHTIME ?= 1s
RAPIDCHECKS ?= 2000

SCENARIOS ?= 200
CATCHRUNS ?= 3
REFREPS ?= 20
STRESSRUNS ?= 50
FUZZTIME ?= 30s
FUZZTARGETS = FuzzRatioWindow FuzzRatio FuzzTokenBucket FuzzThrottle FuzzConfig
MUTANTTIME ?= 60
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test race bench lint check props lin killmatrix catchrates stress fuzz fuzz-mutants bench-instrumented routes

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

# The sequential checks at the acceptance level (-rapid.checks=2000).
props:
	$(GO) test ./budget -count=1 -v -run 'MatchesModel' -rapid.checks=$(RAPIDCHECKS)

# Concurrent scenarios per reference budget, under the race detector.
lin:
	$(GO) test -race ./linearizability -count=1 -v -run 'TestReferenceBudgetsAreLinearizable' -scenarios=$(SCENARIOS)

# Every check of budgettest against every reference budget and mutant, under
# -race (the Race column needs it); prints the matrices. budgetcheck -matrix
# runs the same cells faster (the Race column under -race, the others
# without it, in two go tests at once) and formats them.
killmatrix:
	$(GO) test -race -timeout 60m ./internal/subjects/mutants -count=1 -v -run 'TestKillMatrix|TestLoopKillMatrix' -catch.runs=$(CATCHRUNS) -ref.reps=$(REFREPS) -matrix.full

# How often budgettest.Run catches each broken budget of internal/subjects/wild and
# internal/subjects/mutants, CATCHRATERUNS runs each, with and without -race; the
# tables are in the log (the test fails whenever a check does, which is how
# a caught run shows).
CATCHRATERUNS ?= 20
catchrates:
	-$(GO) test -race -timeout 120m ./internal/subjects/wild -count=1 -v -run 'TestCatchRates' -catch.runs=$(CATCHRATERUNS) | grep -E 'caught'
	-$(GO) test -timeout 120m ./internal/subjects/wild -count=1 -v -run 'TestCatchRates' -catch.runs=$(CATCHRATERUNS) | grep -E 'caught'

# The tests of testdata/unseen and testdata/classes run both ways, plain go
# test and cmd/budgetcheck: each subtest must give the same verdict, and
# each broken budget be caught by the same checks.
ROUTES ?= unseen,classes
routes:
	$(GO) test -timeout 90m ./cmd/budgetcheck -count=1 -v -run 'TestRoutesGiveTheSameCells' -routes=$(ROUTES)

# Stress runs of every reference budget under the race detector.
stress:
	$(GO) test -race ./internal/stressrun -count=1 -v -run 'TestReferenceBudgetsHoldTheirInvariants' -stress.runs=$(STRESSRUNS)

# Every fuzz target in turn (go test -fuzz takes one target per run); see
# scripts/fuzz.sh for the end-of-fuzztime race of Go 1.26 it tells apart.
fuzz:
	scripts/fuzz.sh $(FUZZTIME) $(FUZZTARGETS)

# Time to first failure for each slot-arithmetic mutant, fuzzed from the
# seed corpus without its own crashers.
fuzz-mutants:
	scripts/fuzz-mutants.sh $(MUTANTTIME)

# One run, both CPU counts, so ratios compare numbers from the same binary;
# the exhaustive stage's schedules a second (BenchmarkExhaust, on the
# rewritten TokenBucket); and a whole budgettest.Run of each reference
# budget, without and with the controlled stages (BenchmarkRun, one run
# each: a run takes seconds).
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -cpu 1,2 ./budget
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./linearizability
	$(GO) run ./cmd/budgetcheck -run '^$$' -bench Exhaust -benchtime $(BENCHTIME) ./linearizability -instrument ./budget
	$(GO) test -run '^$$' -bench Run -benchtime 1x ./budgettest
	cd awsbudget && $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -cpu 1,2 ./...

# What budgetcheck's rewrite costs: the retry/success loop of the plain
# budget, then of the budget as rewritten (outside a controlled run), each
# beside the floor of a compare-and-swap word in its own binary; and the exhaustive search on
# the rewritten TokenBucket (BenchmarkExhaust skips without the rewrite).
bench-instrumented:
	$(GO) test -run '^$$' -bench 'RetrySuccess/(TokenBucket|CASFloor)$$' -cpu 1 -count 5 ./budget
	$(GO) run ./cmd/budgetcheck -run '^$$' -bench 'RetrySuccess/(TokenBucket|CASFloor)$$' -cpu 1 -count 5 ./budget
	$(GO) run ./cmd/budgetcheck -run '^$$' -bench Exhaust -count 5 ./linearizability -instrument ./budget

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...

check: lint test race

# Mutation testing of each package by its own tests, with gremlins v0.6.0
# (installed into GOBIN, or GOPATH/bin, if that version is not there), one
# worker: a run on ./budget takes minutes, one on ./budgettest much longer.
# GOFLAGS=-count=1: gremlins times each mutant's run against its first,
# coverage run, and a cached first run makes every mutant time out.
.PHONY: gremlins
gremlins:
	@bin=$$($(GO) env GOBIN); [ -n "$$bin" ] || bin=$$($(GO) env GOPATH)/bin; \
	if ! $(GO) version -m "$$bin/gremlins" 2>/dev/null | grep -q 'mod[[:space:]]*github.com/go-gremlins/gremlins[[:space:]]*v0.6.0'; then \
		echo "installing gremlins v0.6.0"; \
		$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0 || exit 1; \
	fi; \
	for p in ./budget ./model ./budgettest; do \
		echo "gremlins unleash $$p"; \
		GOFLAGS=-count=1 "$$bin/gremlins" unleash --workers 1 --timeout-coefficient 5 $$p || exit 1; \
	done
