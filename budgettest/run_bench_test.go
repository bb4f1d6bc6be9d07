package budgettest_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkRun times a whole budgettest.Run of each reference budget as a
// team's go test meets it: a test process of its own, since the suite
// takes a *testing.T, that runs one subtest of TestReferenceBudgetsConform.
// "plain" is -budgettest.control=off, the free runs alone; "control" is
// the default, with the controlled stages, their children built before
// the timing starts (a team's second go test finds them cached).
func BenchmarkRun(b *testing.B) {
	for _, name := range []string{"TokenBucket", "TokenBucketRefill", "Ratio", "RatioReserve", "RatioFloorAndReserve", "Throttle", "InFlight"} {
		for _, mode := range []string{"plain", "control"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				args := []string{"-test.run=^TestReferenceBudgetsConform$/^" + name + "$", "-test.count=1"}
				if mode == "plain" {
					args = append(args, "-budgettest.control=off")
				}
				run := func() {
					out, err := exec.Command(os.Args[0], args...).CombinedOutput()
					if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("PASS")) || bytes.Contains(out, []byte("no tests to run")) {
						b.Fatalf("%s %v: %v\n%s", os.Args[0], args, err, out)
					}
				}
				run() // warm: the controlled stages' child is built, or found
				for b.Loop() {
					run()
				}
			})
		}
	}
}
