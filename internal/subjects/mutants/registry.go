package mutants

import (
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The checks of the suite, as a mutant names the one that must catch it:
// the names of budgettest's Check constants (a budgettest.Check is a
// string), spelt here so that the test subjects do not import the suite
// that judges them. The kill matrix's tests fail on a name the suite does
// not have.
const (
	Sequential    = "Sequential"
	Linearizable  = "Linearizable"
	Race          = "Race" // go test -race; a mutant caught by it runs only in a child process
	Invariant     = "Invariant"
	Replay        = "Replay"
	Amplification = "Amplification"
	Edges         = "Edges"
)

// Refill says what a token-bucket mutant needs of its parameters.
type Refill int

const (
	AnyRefill      Refill = iota // works with or without refill
	NoRefill                     // implements no refill: check it without
	RequiresRefill               // its bug is in the refill: check it with
)

// A Mutant is one deliberately broken budget. Exactly one constructor is set,
// for the family of the budget it breaks.
type Mutant struct {
	Name     string
	CaughtBy string // the check that must catch it, by its budgettest.Check name
	// Interleaving says the bug shows only when two calls interleave
	// inside a method, race-free: on two busy cores freely that happens
	// too seldom for a check to see it every time. The controlled stage
	// of its check (an instrumented child process, on plain go test too)
	// chooses the interleaving, and the kill matrix requires the catch on
	// every run.
	Interleaving bool

	TokenBucket func(model.TokenBucket, budget.Clock) budget.Budget
	Refill      Refill // for TokenBucket mutants
	Ratio       func(model.Ratio, budget.Clock) budget.Budget
	Throttle    func(model.Throttle, budget.Clock) budget.Budget
	// InFlight builds an in-flight mutant (a budget.InFlightBudget) with
	// Envoy's rule from the model's PPM and MinConcurrency; the kill
	// matrix checks it against model.EnvoyDefaults().
	InFlight func(model.InFlight, budget.Clock) budget.Budget
}

// Budgets returns every budget mutant.
func Budgets() []Mutant {
	return []Mutant{
		{Name: "CheckThenAct", CaughtBy: Linearizable, Interleaving: true, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, _ budget.Clock) budget.Budget { return NewCheckThenAct(m) }},
		{Name: "MissingLock", CaughtBy: Race, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, _ budget.Clock) budget.Budget { return NewMissingLock(m) }},
		{Name: "UnclampedRefund", CaughtBy: Sequential, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, _ budget.Clock) budget.Budget { return NewUnclampedRefund(m) }},
		{Name: "WrongKindRefund", CaughtBy: Sequential, Refill: AnyRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewWrongKindRefund(m, c) }},
		{Name: "DoubleRefill", CaughtBy: Sequential, Refill: RequiresRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewDoubleRefill(m, c) }},
		{Name: "PerCallSite", CaughtBy: Amplification, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewPerCallSite(m, c) }},
		{Name: "RefundAlways", CaughtBy: Amplification, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewRefundAlways(m, c) }},
		{Name: "FloorAdded", CaughtBy: Sequential,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewFloorAdded(m, c) }},
		{Name: "NeverEvicted", CaughtBy: Sequential,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewNeverEvicted(m, c) }},
		{Name: "EarlyEviction", CaughtBy: Sequential,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewEarlyEviction(m, c) }},
		{Name: "NegativeModulo", CaughtBy: Edges,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewNegativeModulo(m, c) }},
		{Name: "SlotStartOverflow", CaughtBy: Edges,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewSlotStartOverflow(m, c) }},
		{Name: "LostFraction", CaughtBy: Sequential, Refill: RequiresRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewLostFraction(m, c) }},
		{Name: "OverflowingRefill", CaughtBy: Replay, Refill: RequiresRefill,
			TokenBucket: func(m model.TokenBucket, c budget.Clock) budget.Budget { return NewOverflowingRefill(m, c) }},
		{Name: "LostCredit", CaughtBy: Linearizable, Interleaving: true, Refill: NoRefill,
			TokenBucket: func(m model.TokenBucket, _ budget.Clock) budget.Budget { return NewLostCredit(m) }},
		{Name: "WrappingCount", CaughtBy: Replay,
			Ratio: func(m model.Ratio, c budget.Clock) budget.Budget { return NewWrappingCount(m, c) }},
		{Name: "ThresholdOffByOne", CaughtBy: Sequential,
			Throttle: func(m model.Throttle, _ budget.Clock) budget.Budget { return NewThresholdOffByOne(m) }},
		{Name: "InFlightCheckThenAct", CaughtBy: Invariant, Interleaving: true,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewInFlightCheckThenAct(m) }},
		{Name: "ReleaseOnSuccessOnly", CaughtBy: Sequential,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewReleaseOnSuccessOnly(m) }},
		{Name: "DoubleRelease", CaughtBy: Sequential,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewDoubleRelease(m) }},
		{Name: "PendingMiscounted", CaughtBy: Replay,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewPendingMiscounted(m) }},
		{Name: "FloorNotMax", CaughtBy: Sequential,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewFloorNotMax(m) }},
		{Name: "UnlockedCallEnd", CaughtBy: Race,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewUnlockedCallEnd(m) }},
		{Name: "StaleLimit", CaughtBy: Sequential,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewStaleLimit(m) }},
		{Name: "ProductOverflow32", CaughtBy: Replay,
			InFlight: func(m model.InFlight, _ budget.Clock) budget.Budget { return NewProductOverflow32(m) }},
	}
}
