package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
)

// A lineage holds what its function started, and what those started after
// they ended, but not a goroutine started meanwhile by another.
func TestLineageFollowsDescendantsOnly(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	started := make(chan struct{})
	other := make(chan struct{})
	go func() { <-other; go func() { <-stop }(); close(started) }()
	l := harness.Descend(func() {
		close(other)
		<-started
		go func() { // ends at once, after starting a grandchild
			go func() { <-stop }()
		}()
	})
	if err := l.Gone(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "1 goroutine(s) still running") ||
		!strings.Contains(err.Error(), "leak_test.go:") {
		t.Fatalf("Gone = %v, want the one grandchild, in this file's lines", err)
	}
	if n, _ := l.Alive(); n != 1 {
		t.Fatalf("Alive = %d, want 1", n)
	}
	if err := harness.Descend(func() {}).Gone(time.Second); err != nil {
		t.Fatalf("a lineage that started nothing: Gone = %v", err)
	}
}

// Gone waits for a goroutine that ends late.
func TestLineageGoneWaits(t *testing.T) {
	l := harness.Descend(func() { go time.Sleep(30 * time.Millisecond) })
	if err := l.Gone(harness.GoneWait); err != nil {
		t.Fatalf("Gone = %v, want nil once the sleeper ends", err)
	}
}
