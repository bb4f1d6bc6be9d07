//go:build !(gc && (amd64 || arm64))

package sched

// curG is the goroutine's id, read from its stack.
func curG() uintptr { return goid() }
