package harness

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// leakKey is the profiler label that Descend puts on the goroutines it
// follows. Go copies a goroutine's labels to every goroutine it starts, so
// the label reaches the goroutines a budget or loop starts, and those they
// start, even after the starter has ended.
const leakKey = "retrybudget-descend"

var leakMarks atomic.Uint64

// A Lineage names the goroutines that one run of Descend started,
// directly or through others.
type Lineage struct{ mark string }

// Descend runs f on the calling goroutine with a label of its own, and
// returns the lineage of the goroutines f started. A leak check that
// compares goroutines before and after (as goleak.IgnoreCurrent does)
// counts, as the budget's, every goroutine that a test running in
// parallel starts meanwhile (a t.Parallel test, or the suite's own child
// process of another subtest); the lineage counts only f's.
//
// What it cannot follow: a goroutine that replaces its labels
// (pprof.SetGoroutineLabels, or pprof.Do on a context without them)
// starts goroutines outside the lineage, and work handed to a goroutine
// that existed before f (a package-level worker) is not f's.
func Descend(f func()) Lineage {
	l := Lineage{mark: strconv.FormatUint(leakMarks.Add(1), 10)}
	pprof.Do(context.Background(), pprof.Labels(leakKey, l.mark), func(context.Context) { f() })
	return l
}

// Alive returns how many goroutines of the lineage are running, and their
// stacks as the goroutine profile prints them (one entry per distinct
// stack, with its count, the function and file:line of each frame).
func (l Lineage) Alive() (int, string) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return 0, ""
	}
	want := fmt.Sprintf("%q:%q", leakKey, l.mark)
	var n int
	var out strings.Builder
	_, prof, _ := strings.Cut(buf.String(), "\n") // "goroutine profile: total N"
	// Entries are separated by blank lines; each starts "N @ addrs",
	// then "# labels: {...}" when it has labels, then "#\taddr func file:line".
	for entry := range strings.SplitSeq(prof, "\n\n") {
		lines := strings.Split(strings.TrimSpace(entry), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "# labels:") || !strings.Contains(lines[1], want) {
			continue
		}
		count, _, _ := strings.Cut(lines[0], " ")
		c, err := strconv.Atoi(count)
		if err != nil {
			continue
		}
		n += c
		fmt.Fprintf(&out, "%d goroutine(s):\n", c)
		for _, fr := range lines[2:] {
			f := strings.Fields(strings.TrimPrefix(fr, "#"))
			if len(f) >= 3 { // addr func+off file:line
				fn, _, _ := strings.Cut(f[1], "+0x")
				fmt.Fprintf(&out, "    %s\n        %s\n", fn, f[2])
			}
		}
	}
	return n, out.String()
}

// GoneWait is how long the leak checks wait, after a budget's Close or
// the end of a loop's call, for the goroutines it started to end: a
// goroutine told to stop may not be scheduled at once on a loaded machine,
// and under the race detector.
const GoneWait = 5 * time.Second

// Gone waits up to limit for every goroutine of the lineage to end, the
// wait growing from 1ms to 100ms between looks (a goroutine that was told
// to stop may take a moment to), and returns nil when they have, or an
// error with the count and stacks of those still running.
func (l Lineage) Gone(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		n, stacks := l.Alive()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutine(s) still running after %v:\n%s", n, limit, strings.TrimRight(stacks, "\n"))
		}
		time.Sleep(wait)
	}
}
