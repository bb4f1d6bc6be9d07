// Package instrumented holds, in budget/, a copy of package budget as
// cmd/budgetcheck rewrites it (fields included), so that one benchmark
// binary can run a plain budget.TokenBucket and an instrumented one side by
// side: BenchmarkInstrumented. The copy is generated; TestCopyIsCurrent
// fails when it no longer matches the rewrite of package budget, and
// regenerates it with -update:
//
//	go test ./internal/instrumented -run TestCopyIsCurrent -update
package instrumented
