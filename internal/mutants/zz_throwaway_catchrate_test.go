package mutants_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestThrowawayInFlightCatchRates(t *testing.T) {
	names := "InFlightCheckThenAct ReleaseOnSuccessOnly DoubleRelease PendingMiscounted FloorNotMax UnlockedCallEnd StaleLimit ProductOverflow32"
	var b strings.Builder
	for _, r := range rows() {
		if !strings.Contains(" "+names+" ", " "+r.name+" ") {
			continue
		}
		caught := 0
		verdicts := map[string]int{}
		var total time.Duration
		for range 10 {
			start := time.Now()
			v, _ := runOnce(t, r, r.must)
			total += time.Since(start)
			verdicts[v]++
			if v == "caught" {
				caught++
			}
		}
		fmt.Fprintf(&b, "%-22s %-13s %2d/10 caught  %v  mean %v\n", r.name, r.must, caught, verdicts, (total / 10).Round(time.Millisecond))
	}
	t.Log("\n" + b.String())
}
