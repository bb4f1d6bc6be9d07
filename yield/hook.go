package yield

import (
	"iter"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// Hook holds the hooks of rewritten code that are not generic: Point, M,
// RW, O, C, WG, Go, Select, Gosched, Spin, Sleep, Sleeper and Mark, and
// the four a harness calls (Tag, PointAt, Boundary, Outside).
var Hook = sched.Hook

// P is a read of x, a field a budget shares or the address of one, at a
// yield point: x is returned as it is.
func P[T any](x T) T { return sched.P(x) }

// W is the value stored into a shared field, at a yield point: x is
// returned as it is.
func W[T any](x T) T { return sched.W(x) }

// Send is ch <- v.
func Send[T any](ch chan<- T, v T) { sched.Send(ch, v) }

// Recv is <-ch.
func Recv[T any](ch <-chan T) T { return sched.Recv(ch) }

// Recv2 is v, ok := <-ch.
func Recv2[T any](ch <-chan T) (v T, ok bool) { return sched.Recv2(ch) }

// Range is a range over ch.
func Range[T any](ch <-chan T) iter.Seq[T] { return sched.Range(ch) }

// Close is close(ch).
func Close[T any](ch chan<- T) { sched.Close(ch) }

// R is a receive case of Hook.Select; after Select chose it, its V and OK
// hold what was received.
func R[T any](ch <-chan T) *sched.RecvCase[T] { return sched.R(ch) }

// S is a send case of Hook.Select.
func S[T any](ch chan<- T, v T) *sched.SendCase[T] { return sched.S(ch, v) }

// Instrumented reports whether this binary's code was rewritten: a file
// of it has called Hook.Mark.
func Instrumented() bool { return sched.Instrumented() }

// Options are the options of one controlled run: the strategy and seed
// that choose who runs at each yield point, and the schedule that replays
// a run choice by choice. A failure prints them, and its replay flag
// carries them as JSON.
type Options = sched.Options
