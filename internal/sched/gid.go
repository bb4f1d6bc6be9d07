package sched

import "runtime"

// A goroutine under control is told apart from every other goroutine by
// curG, which returns an identity of the calling goroutine that no other
// live goroutine has: where the platform allows it, the address of the
// runtime's descriptor of the goroutine, read in one instruction (gid_*.s);
// elsewhere its id, read from the first line of its stack, which costs a
// traceback. A descriptor is reused by a goroutine started after its owner
// has returned, so a run forgets the goroutine holding the baton as soon as
// it is done (see pickLocked).

// goid returns the calling goroutine's id, from the first line of its
// stack: "goroutine 18 [running]:".
func goid() uintptr {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uintptr
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}

// Current returns an identity of the calling goroutine that no other live
// goroutine has (see curG). It is for attributing work to goroutines of a
// run, under control or not.
func Current() uintptr { return curG() }
