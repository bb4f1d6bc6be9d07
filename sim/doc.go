// Package sim simulated an outage and measured the load amplification a
// retry budget allows.
//
// Deprecated: the simulation is the engine of budgettest's Amplification
// check (a budget under a 100% outage must grant no more retries than its
// model) and of cmd/budgetsim, and now lives inside the module. The names
// here forward to it for one release.
package sim
