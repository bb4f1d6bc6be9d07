package wild

import (
	"flag"
	"strings"
	"testing"
)

var runs = flag.Int("wild.runs", 0, "how many times TestWildCaught puts each case through the suite (0: the test is skipped)")

// TestWildCaught puts every broken budget through budgettest.Verify and
// fails for each one the suite lets through.
// It is a measurement, run by hand or by make wild: some cases escape the
// suite today, and that is what it reports.
func TestWildCaught(t *testing.T) {
	t.Parallel()
	if *runs <= 0 {
		t.Skip("a measurement: run with -wild.runs=N")
	}
	for _, c := range Cases() {
		t.Run(strings.TrimPrefix(c.Name, "wild."), func(t *testing.T) {
			caught := 0
			for i := 0; i < *runs; i++ {
				err := c.Verify(t)
				if err == nil {
					t.Logf("run %d: escaped", i+1)
					continue
				}
				caught++
				first, _, _ := strings.Cut(err.Error(), "\n")
				t.Logf("run %d: caught: %s", i+1, first)
			}
			t.Logf("%s (%s): caught %d/%d", c.Name, c.Class, caught, *runs)
			if caught < *runs {
				t.Errorf("%s escaped %d of %d runs: %s", c.Name, *runs-caught, *runs, c.Bug)
			}
		})
	}
}
