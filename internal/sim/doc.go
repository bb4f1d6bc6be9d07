// Package sim simulates an outage and measures the load amplification a
// retry budget allows: how many attempts a failing dependency receives for
// every request its clients make.
//
// Linearizability proves that a budget is safe; it does not prove that the
// budget does its job, which is to bound the extra load that retries put on
// a failing dependency. Run drives many clients, each with its own budget
// and the budget package's Retrier, against a dependency whose failure rate
// follows a script (healthy, an outage at a given error rate, recovery), on
// the virtual clock of a testing/synctest bubble, and records per second of
// virtual time the attempts and first attempts the dependency receives and
// the retries granted and denied.
//
// The run is deterministic: every goroutine wakes at an instant of its own
// (each request's waits end at instants that no other request uses), every
// random choice comes from a generator seeded per request, and the same
// Config gives the same numbers on every run.
//
// budgettest's Amplification check turns this into a check of a budget:
// under a 100% outage, the retries a budget grants must stay within what
// its model grants in the same run.
package sim
