package budgettest_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain keeps rapid from writing fail files into the source tree: the
// suite's own tests fail the suite on purpose.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := flag.Set("rapid.nofailfile", "true"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
