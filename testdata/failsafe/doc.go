// Package failsafe puts failsafe-go's retry budget (github.com/failsafe-go/failsafe-go/budget,
// v0.9.8) through the conformance suite. It is a module of its own, so that
// failsafe-go is never a requirement of the retrybudget module; its tests
// pin what the suite says about that budget (see the README's "What the
// suite says about failsafe-go").
package failsafe
