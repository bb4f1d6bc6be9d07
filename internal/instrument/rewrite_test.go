package instrument

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// requireYield skips the test if the go command, which the rewrite and the
// rewritten module's tests need, is not on PATH.
func requireYield(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
}

// TestRewriteModule rewrites testdata/mod, a module of its own, and runs
// its tests with the overlay: they pass, see yield.Instrumented, and see a
// panic's stack name the original file and line.
func TestRewriteModule(t *testing.T) {
	requireYield(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./..."}, Tests: true})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(res.Dir) })

	files := []string{filepath.Join(dir, "cmd", "pipeline", "main.go"), filepath.Join(dir, "quota", "quota.go"), filepath.Join(dir, "quota", "quota_test.go")}
	if !slices.Equal(res.Files, files) {
		t.Errorf("Rewrite().Files = %q, want %q", res.Files, files)
	}
	// main.go: a Once, 5 selects, 4 go statements, 4 closes, 2 receives,
	// 2 WaitGroup waits; quota.go: 3 Lock, 3 Unlock, Add, Load, 2 selects;
	// the test: 2 receives, a send, a go statement, a close.
	if res.Points != 33 {
		t.Errorf("Rewrite().Points = %d, want 33", res.Points)
	}
	var overlay struct{ Replace map[string]string }
	data, err := os.ReadFile(res.Overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &overlay); err != nil {
		t.Fatalf("the overlay: %v", err)
	}
	for _, orig := range files {
		rewritten, ok := overlay.Replace[orig]
		if !ok {
			t.Errorf("the overlay does not replace %s", orig)
			continue
		}
		if filepath.Base(rewritten) != filepath.Base(orig) || !strings.HasPrefix(rewritten, res.Dir) {
			t.Errorf("the overlay replaces %s by %s, want a file of the same name in %s", orig, rewritten, res.Dir)
		}
		before, _ := os.ReadFile(orig)
		after, _ := os.ReadFile(rewritten)
		if got, want := bytes.Count(after, []byte("\n")), bytes.Count(before, []byte("\n"))+1; got != want {
			t.Errorf("%s has %d lines, want %d", rewritten, got, want)
		}
	}

	cmd := exec.Command("go", "test", "-overlay", res.Overlay, "-count=1", "-v", "./...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -overlay: %v\n%s", err, out)
	}
	for _, test := range []string{"TestInstrumented", "TestConcurrentRetries", "TestPanicNamesTheOriginalLine"} {
		if !bytes.Contains(out, []byte("--- PASS: "+test)) {
			t.Errorf("go test -overlay did not pass %s:\n%s", test, out)
		}
	}
}

// TestRewriteModuleFields rewrites testdata/mod with Fields: quota's tests
// still pass with its fields instrumented, and the _test.go files keep
// their fields as they are.
func TestRewriteModuleFields(t *testing.T) {
	requireYield(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./..."}, Tests: true, Fields: true})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(res.Dir) })

	files := []string{filepath.Join(dir, "cmd", "pipeline", "main.go"), filepath.Join(dir, "quota", "quota.go"), filepath.Join(dir, "quota", "quota_test.go")}
	if !slices.Equal(res.Files, files) {
		t.Errorf("Rewrite().Files = %q, want %q", res.Files, files)
	}
	cmd := exec.Command("go", "test", "-overlay", res.Overlay, "-count=1", "-v", "./...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -overlay: %v\n%s", err, out)
	}
	for _, test := range []string{"TestInstrumented", "TestConcurrentRetries", "TestPanicNamesTheOriginalLine"} {
		if !bytes.Contains(out, []byte("--- PASS: "+test)) {
			t.Errorf("go test -overlay did not pass %s:\n%s", test, out)
		}
	}
}

// TestRewriteFieldsSplitsTheReadAndTheWrite rewrites testdata/inmodule's
// naive with Fields: naive.go, a budget with no synchronization whose file
// nothing else rewrites, gets yield points at its fields, and its test
// finds, under the controlled scheduler, the overspend and the lost update
// that they expose; not rewritten, the same test finds neither.
func TestRewriteFieldsSplitsTheReadAndTheWrite(t *testing.T) {
	requireYield(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "inmodule"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./naive"}, Tests: true, Fields: true})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(res.Dir) })

	naive := filepath.Join(dir, "naive", "naive.go")
	if !slices.Equal(res.Files, []string{naive}) {
		t.Errorf("Rewrite().Files = %q, want %q", res.Files, naive)
	}
	var overlay struct{ Replace map[string]string }
	data, err := os.ReadFile(res.Overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &overlay); err != nil {
		t.Fatalf("the overlay: %v", err)
	}
	before, err := os.ReadFile(naive)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(overlay.Replace[naive])
	if err != nil {
		t.Fatalf("the rewritten naive.go: %v", err)
	}
	if got, want := bytes.Count(after, []byte("\n")), bytes.Count(before, []byte("\n"))+1; got != want {
		t.Errorf("the rewritten naive.go has %d lines, want %d", got, want)
	}
	for _, line := range []string{
		"\tc := ryield.P(n.cost)\n",
		"\tif ryield.P(n.tokens) < c {\n",
		"\tryield.Hook.Point(); n.tokens = ryield.W(n.tokens - c)\n",
		"\tryield.Hook.Point(); n.tokens = ryield.W(n.tokens + 1)\n",
		"func (n *Naive) Tokens() int64 { return ryield.P(n.tokens) }\n",
	} {
		if !bytes.Contains(after, []byte(line)) {
			t.Errorf("the rewritten naive.go has no line %q:\n%s", line, after)
		}
	}

	// The test logs each of the two when it finds it.
	for _, run := range []struct {
		args  []string
		found bool
	}{{[]string{"-overlay", res.Overlay}, true}, {nil, false}} {
		cmd := exec.Command("go", append(append([]string{"test"}, run.args...), "-count=1", "-v", "./naive")...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go test %q: %v\n%s", run.args, err, out)
		}
		if !bytes.Contains(out, []byte("--- PASS: TestControlledRunsSplitTheReadAndTheWrite")) {
			t.Errorf("go test %q did not pass TestControlledRunsSplitTheReadAndTheWrite:\n%s", run.args, out)
		}
		for _, log := range []string{"both retries granted", "two successes earned"} {
			if bytes.Contains(out, []byte(log)) != run.found {
				t.Errorf("go test %q: logged %q %v, want %v:\n%s", run.args, log, !run.found, run.found, out)
			}
		}
	}
}

// TestRewriteProgram rewrites testdata/mod's cmd/pipeline, whose workers
// are started by go statements, fed, collected and stopped by select
// statements, closes and a Once, and runs it with the overlay, outside
// controlled runs: it prints what it prints when not rewritten.
func TestRewriteProgram(t *testing.T) {
	requireYield(t)
	dir, err := filepath.Abs(filepath.Join("testdata", "mod"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./cmd/pipeline"}})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(res.Dir) })
	main := filepath.Join(dir, "cmd", "pipeline", "main.go")
	if !slices.Equal(res.Files, []string{main}) {
		t.Fatalf("Rewrite().Files = %q, want %q", res.Files, main)
	}
	var overlay struct{ Replace map[string]string }
	data, err := os.ReadFile(res.Overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &overlay); err != nil {
		t.Fatalf("the overlay: %v", err)
	}
	rewritten, err := os.ReadFile(overlay.Replace[main])
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"ryield.Hook.Go(", "ryield.Hook.Select(false, ", "ryield.Hook.Select(true, ", "ryield.S[error](", "ryield.Close(", "ryield.Hook.O(&p.once).Do(", "ryield_1...)"} {
		if !bytes.Contains(rewritten, []byte(hook)) {
			t.Errorf("the rewritten main.go does not call %s:\n%s", hook, rewritten)
		}
	}
	if bytes.Contains(rewritten, []byte("select {")) || bytes.Contains(rewritten, []byte("\tgo ")) {
		t.Errorf("the rewritten main.go has a select or go statement left:\n%s", rewritten)
	}

	cmd := exec.Command("go", "run", "-overlay", res.Overlay, "./cmd/pipeline")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run -overlay: %v\n%s", err, out)
	}
	const want = "squares [1 4 9 16 36 49 64 81 121 144]\n" +
		"failures [10 failed 5 failed] 2\n" +
		"workers started 1, quit open false\n" +
		"instrumented true\n"
	if string(out) != want {
		t.Errorf("go run -overlay printed\n%s\nwant\n%s", out, want)
	}
}

// TestRewriteLeavesPackageYield rewrites package yield, and the packages
// of this module that do not use it, by pattern: the first is left alone,
// and only files that synchronize are rewritten.
func TestRewriteLeavesPackageYield(t *testing.T) {
	requireYield(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Rewrite(Config{Dir: root, Patterns: []string{YieldPath}, Tests: true})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	defer os.RemoveAll(res.Dir)
	if len(res.Files) != 0 || res.Points != 0 {
		t.Errorf("Rewrite(yield) rewrote %q (%d points), want nothing", res.Files, res.Points)
	}
}

// TestRewriteLeavesOtherModules names, from testdata/mod, a package of the
// standard library and one of this module, both of which synchronize: the
// go command would not overlay their files, so neither is rewritten.
func TestRewriteLeavesOtherModules(t *testing.T) {
	requireYield(t)
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: filepath.Join("testdata", "mod"), Patterns: []string{"sync/atomic", "github.com/retrybudget/retrybudget/budget"}})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	defer os.RemoveAll(res.Dir)
	if len(res.Files) != 0 {
		t.Errorf("Rewrite().Files = %q, want none", res.Files)
	}
}

func TestRewriteWithoutTests(t *testing.T) {
	requireYield(t)
	dir := filepath.Join("testdata", "mod")
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: dir, Patterns: []string{"./quota"}})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	defer os.RemoveAll(res.Dir)
	if len(res.Files) != 1 || filepath.Base(res.Files[0]) != "quota.go" {
		t.Errorf("Rewrite().Files = %q, want quota.go alone", res.Files)
	}
}

func TestRewriteReportsLoadErrors(t *testing.T) {
	requireYield(t)
	t.Setenv("GOWORK", "off")
	res, err := Rewrite(Config{Dir: filepath.Join("testdata", "mod"), Patterns: []string{"./nosuchpackage"}})
	if err == nil {
		os.RemoveAll(res.Dir)
		t.Fatal("Rewrite of a missing package succeeded")
	}
}
