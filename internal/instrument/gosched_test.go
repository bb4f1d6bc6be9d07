package instrument

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRewriteSpinLock rewrites testdata/inmodule's spinlock, whose
// goroutines wait in loops with runtime.Gosched, one of them on a read
// that is not a yield point, and runs its tests with the overlay: under
// the controlled scheduler, with PCT and the random walk, every run ends
// without a fallback, since the rewritten Gosched hands the baton on.
func TestRewriteSpinLock(t *testing.T) {
	requireYield(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "inmodule"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./spinlock"}, Tests: true})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(res.Dir) })
	var overlay struct{ Replace map[string]string }
	data, err := os.ReadFile(res.Overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &overlay); err != nil {
		t.Fatalf("the overlay: %v", err)
	}
	rewritten, err := os.ReadFile(overlay.Replace[filepath.Join(dir, "spinlock", "spinlock.go")])
	if err != nil {
		t.Fatalf("the rewritten spinlock.go: %v", err)
	}
	if n := bytes.Count(rewritten, []byte("ryield.Hook.Spin(runtime.Gosched)()")); n != 2 {
		t.Errorf("the rewritten spinlock.go wraps %d Gosched calls, want 2:\n%s", n, rewritten)
	}
	cmd := exec.Command("go", "test", "-overlay", res.Overlay, "-count=1", "-v", "./spinlock")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -overlay: %v\n%s", err, out)
	}
	for _, test := range []string{"TestCounterUnderControl", "TestFlagUnderControl"} {
		if !bytes.Contains(out, []byte("--- PASS: "+test)) {
			t.Errorf("go test -overlay did not pass %s:\n%s", test, out)
		}
	}
}
