// Package fuzzops decodes a fuzzer's bytes into operation sequences
// ([Ops], [Encode], [Instants]), for budgettest.Fuzz, which is the way to
// fuzz a budget of your own against its model. Its tests hold the native
// Go fuzz targets of the harness, on the reference budgets:
//
//   - FuzzRatioWindow drives the Ratio budget's slot arithmetic with
//     arbitrary windows, slot counts and clock readings (negative, near
//     math.MaxInt64, going backwards, jumping past the window) and compares
//     it with the model after every step.
//   - FuzzTokenBucket, FuzzRatio and FuzzThrottle replay an operation
//     sequence decoded from the fuzzer's bytes on a reference budget and on
//     its model, and compare every answer (and the balance, where there is
//     one).
//   - FuzzConfig checks that the constructors never panic and accept
//     exactly the configurations their documentation allows.
//
// Seed corpora live in testdata/fuzz/<Target>/, and plain go test replays
// them. Fuzz one target at a time:
//
//	go test ./internal/fuzzops -run '^$' -fuzz '^FuzzRatioWindow$' -fuzztime 30s
//
// or all of them in turn with make fuzz FUZZTIME=30s. Setting
// RETRYBUDGET_FUZZ_RATIO to the name of a ratio mutant points FuzzRatio and
// FuzzRatioWindow at that mutant instead of the reference budget; the
// fuzz-mutants make target uses it to time how long fuzzing takes to find
// each one.
package fuzzops
