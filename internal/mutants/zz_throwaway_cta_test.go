package mutants_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budgettest"
)

func TestThrowawayCTA(t *testing.T) {
	var b strings.Builder
	for _, r := range rows() {
		if r.name != "InFlightCheckThenAct" {
			continue
		}
		for _, c := range []budgettest.Check{budgettest.CheckLinearizable, budgettest.CheckRace, budgettest.CheckInvariant} {
			caught := 0
			var total time.Duration
			for range 10 {
				start := time.Now()
				v, _ := runOnce(t, r, c)
				total += time.Since(start)
				if v == "caught" {
					caught++
				}
			}
			fmt.Fprintf(&b, "%-22s %-13s %2d/10 caught  mean %v\n", r.name, c, caught, (total / 10).Round(time.Millisecond))
		}
	}
	t.Log("\n" + b.String())
}
