// Package inmodule holds packages of this module, under testdata so that
// no pattern of the module names them, that the instrument package's tests
// rewrite and run with the overlay: their tests drive the controlled
// scheduler (internal/sched) directly, which a module of its own cannot
// import.
package inmodule
