// Package mutants holds deliberately broken budgets. Each one carries a bug
// that real retry-budget code has shipped or that its specification invites,
// and names the check of the harness that must catch it. The harness proves
// itself by catching every mutant while passing every reference budget.
//
// The in-flight mutants (inflight.go) break a budget.InFlightBudget with
// Envoy's rule; the kill matrix checks them against model.EnvoyDefaults()
// beside the reference budget.InFlight.
//
// Mutants are built from model parameters, so a check can run a mutant and
// the model it breaks side by side. They are small on purpose: each is the
// simplest correct design with one bug put in, so that a failing check can
// only mean the bug.
package mutants
