package yield

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/internal/sched"
)

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

// The hooks of rewritten code that are not generic were functions of this
// package before they became methods of Hook. Each is kept for one release,
// for code that calls them by hand.

// Point is Hook.Point.
//
// Deprecated: use Hook.Point.
func Point() { sched.Hook.Point() }

// Tag is Hook.Tag.
//
// Deprecated: use Hook.Tag.
func Tag(v int64) { sched.Hook.Tag(v) }

// Boundary is Hook.Boundary.
//
// Deprecated: use Hook.Boundary.
func Boundary() { sched.Hook.Boundary() }

// PointAt is Hook.PointAt.
//
// Deprecated: use Hook.PointAt.
func PointAt(x any) { sched.Hook.PointAt(x) }

// Outside is Hook.Outside.
//
// Deprecated: use Hook.Outside.
func Outside(f func()) { sched.Hook.Outside(f) }

// Mark is Hook.Mark.
//
// Deprecated: use Hook.Mark.
func Mark() bool { return sched.Hook.Mark() }

// Go is Hook.Go.
//
// Deprecated: use Hook.Go.
func Go(fn func()) { sched.Hook.Go(fn) }

// Gosched is Hook.Gosched.
//
// Deprecated: use Hook.Gosched.
func Gosched() { sched.Hook.Gosched() }

// Spin is Hook.Spin.
//
// Deprecated: use Hook.Spin.
func Spin(f func()) func() { return sched.Hook.Spin(f) }

// Sleep is Hook.Sleep.
//
// Deprecated: use Hook.Sleep.
func Sleep(d time.Duration) { sched.Hook.Sleep(d) }

// Sleeper is Hook.Sleeper.
//
// Deprecated: use Hook.Sleeper.
func Sleeper(f func(time.Duration)) func(time.Duration) { return sched.Hook.Sleeper(f) }

// Mutex is what Hook.M returns.
//
// Deprecated: use Hook.M.
type Mutex = sched.Mutex

// M is Hook.M.
//
// Deprecated: use Hook.M.
func M(m *sync.Mutex) Mutex { return sched.Hook.M(m) }

// RWMutex is what Hook.RW returns.
//
// Deprecated: use Hook.RW.
type RWMutex = sched.RWMutex

// RW is Hook.RW.
//
// Deprecated: use Hook.RW.
func RW(m *sync.RWMutex) RWMutex { return sched.Hook.RW(m) }

// Once is what Hook.O returns.
//
// Deprecated: use Hook.O.
type Once = sched.Once

// O is Hook.O.
//
// Deprecated: use Hook.O.
func O(o *sync.Once) Once { return sched.Hook.O(o) }

// Cond is what Hook.C returns.
//
// Deprecated: use Hook.C.
type Cond = sched.Cond

// C is Hook.C.
//
// Deprecated: use Hook.C.
func C(c *sync.Cond) Cond { return sched.Hook.C(c) }

// WaitGroup is what Hook.WG returns.
//
// Deprecated: use Hook.WG.
type WaitGroup = sched.WaitGroup

// WG is Hook.WG.
//
// Deprecated: use Hook.WG.
func WG(wg *sync.WaitGroup) WaitGroup { return sched.Hook.WG(wg) }

// Case is a case of Hook.Select.
//
// Deprecated: use R and S, and Hook.Select.
type Case = sched.Case

// RecvCase is what R returns.
//
// Deprecated: use R.
type RecvCase[T any] = sched.RecvCase[T]

// SendCase is what S returns.
//
// Deprecated: use S.
type SendCase[T any] = sched.SendCase[T]

// Select is Hook.Select.
//
// Deprecated: use Hook.Select.
func Select(hasDefault bool, cases ...Case) int { return sched.Hook.Select(hasDefault, cases...) }
