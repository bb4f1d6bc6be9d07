package yield

import "github.com/retrybudget/retrybudget/internal/sched"

// The scheduler's API, which the module's own harness now reaches
// internally. Each name is kept for one release.

// Run runs fs as goroutines under control.
//
// Deprecated: the scheduler is internal; use budgettest, or cmd/budgetcheck.
func Run(opt Options, fs ...func()) Report { return sched.Run(opt, fs...) }

// Report is what a controlled run did.
//
// Deprecated: the scheduler is internal.
type Report = sched.Report

// Step is one step of a traced run.
//
// Deprecated: the scheduler is internal.
type Step = sched.Step

// Site is the stack of a yield point.
//
// Deprecated: the scheduler is internal.
type Site = sched.Site

// Choice is one choice of a run.
//
// Deprecated: the scheduler is internal.
type Choice = sched.Choice

// Strategy chooses who runs at each yield point.
//
// Deprecated: the scheduler is internal; Options still carries one.
type Strategy = sched.Strategy

// PCT returns the PCT strategy of depth.
//
// Deprecated: the scheduler is internal.
func PCT(depth int) Strategy { return sched.PCT(depth) }

// Walk returns the random-walk strategy.
//
// Deprecated: the scheduler is internal.
func Walk() Strategy { return sched.Walk() }

// Serial returns the strategy that never preempts.
//
// Deprecated: the scheduler is internal.
func Serial() Strategy { return sched.Serial() }

// ParseOptions parses the form Options.String prints.
//
// Deprecated: the scheduler is internal; a replay carries Options as JSON.
func ParseOptions(s string) (Options, error) { return sched.ParseOptions(s) }

// ErrOptions is wrapped by ParseOptions's errors.
//
// Deprecated: the scheduler is internal.
var ErrOptions = sched.ErrOptions

// DefaultMaxSteps is the steps a run takes at most when Options.MaxSteps
// is zero.
//
// Deprecated: the scheduler is internal.
const DefaultMaxSteps = sched.DefaultMaxSteps
