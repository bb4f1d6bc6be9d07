package quota

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/yield"
)

func TestInstrumented(t *testing.T) {
	if !yield.Instrumented() {
		t.Fatal("yield.Instrumented() = false: the overlay was not used")
	}
}

func TestConcurrentRetries(t *testing.T) {
	q := New(100)
	start := make(chan struct{})
	done := make(chan bool)
	for range 8 {
		go func() {
			<-start
			for range 10 {
				if q.Retry(budget.Transient) {
					q.Success(budget.Transient)
				}
			}
			done <- true
		}()
	}
	close(start)
	for range 8 {
		<-done
	}
	q.Check()
	// 100 tokens, each grant nets -4: at most 24 grants before the last
	// one with 5 tokens left, at least 24 since every goroutine retries.
	if got := q.Granted(); got < 24 || got > 80 {
		t.Errorf("Granted() = %d, want 24 to 80", got)
	}
	if got := len(q.Events()); int64(got) != q.Granted() {
		t.Errorf("len(Events()) = %d, want Granted() = %d", got, q.Granted())
	}
}

func TestPanicNamesTheOriginalLine(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "quota.go") + ":" + strconv.Itoa(lineOf(t, "quota.go", "panic("))
	defer func() {
		if recover() == nil {
			t.Fatal("Check did not panic")
		}
		if stack := string(debug.Stack()); !strings.Contains(stack, want+" ") {
			t.Errorf("the panic's stack does not name %s:\n%s", want, stack)
		}
	}()
	q := New(0)
	q.tokens = -1
	q.Check()
}

// lineOf returns the number of the first line of file that holds s.
func lineOf(t *testing.T, file, s string) int {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), s) {
			return n
		}
	}
	t.Fatalf("%s has no line holding %q", file, s)
	return 0
}
