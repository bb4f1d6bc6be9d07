package control

import (
	"os"
	"testing"
)

// A child removed from the cache while a test process still uses it (by
// another go test pruning the cache an hour into a long run) is built
// again, not spawned from a path that is gone.
func TestBinaryRebuildsARemovedChild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an instrumented test binary twice")
	}
	t.Setenv("RETRYBUDGET_CACHE", t.TempDir())
	c, err := Binary(nil)
	if err != nil {
		t.Skipf("no child can be had here: %v", err)
	}
	if err := os.Remove(c.Path); err != nil {
		t.Fatal(err)
	}
	again, err := Binary(nil)
	if err != nil {
		t.Fatalf("Binary after the child was removed: %v", err)
	}
	if _, err := os.Stat(again.Path); err != nil || !again.Built {
		t.Fatalf("Binary after the child was removed = %+v (stat: %v), want it built again", again, err)
	}
}
