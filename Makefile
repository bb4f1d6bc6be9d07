# Targets for developers and CI. `make check` is what CI runs.
GO ?= go
BENCHTIME ?= 1s
RAPIDCHECKS ?= 2000

.PHONY: test race bench lint check props

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

# The sequential checks at the acceptance level (-rapid.checks=2000).
props:
	$(GO) test ./budget -count=1 -v -run 'MatchesModel' -rapid.checks=$(RAPIDCHECKS)

# One run, both CPU counts, so ratios compare numbers from the same binary.
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -cpu 1,2 ./budget

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

check: lint race
