//go:build gc && (amd64 || arm64)

package sched

// getg returns the address of the calling goroutine's descriptor, the
// runtime's g: its register on arm64, its thread-local slot on amd64.
func getg() uintptr

// curG is getg: one instruction.
func curG() uintptr { return getg() }
