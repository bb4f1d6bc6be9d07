// Command budgetsim simulates an outage for no budget, TokenBucket, Ratio
// and Throttle, prints the load amplification each allows, and writes a plot
// of the load over time.
//
// Usage:
//
//	go run ./cmd/budgetsim [-plot budgetsim.svg] [-seed 1]
//
// The scenarios are those of internal/simcases: the standard one (50 clients ×
// 10 requests a second, the budget package's Retrier with 3 attempts and
// full jitter from 50ms to 2s, each client with its own budget; 20s healthy,
// 60s at 100% errors, 20s of recovery), the outage of the article "Retry budget in TypeScript" as far as its
// tells, and low traffic. The simulation runs on the virtual clock of a
// testing/synctest bubble, which needs a *testing.T, so budgetsim runs the
// TestBudgetsim of internal/simcases through go test and prints what it measured.
// It needs the Go toolchain and a checkout of this module. The same seed
// prints the same tables.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/internal/sim"
	"github.com/retrybudget/retrybudget/internal/simcases"
)

type report struct {
	Scenarios []struct {
		Name    string       `json:"name"`
		Names   []string     `json:"names"`
		Results []sim.Result `json:"results"`
	} `json:"scenarios"`
}

func main() {
	plot := flag.String("plot", "budgetsim.svg", "write the plot of the standard scenario to `file` (SVG); empty for none")
	seed := flag.Uint64("seed", 1, "the simulation's seed")
	flag.Parse()
	start := time.Now()

	root, err := moduleRoot()
	if err != nil {
		fail(err)
	}
	out, err := os.CreateTemp("", "budgetsim-*.json")
	if err != nil {
		fail(err)
	}
	out.Close()
	defer os.Remove(out.Name())
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestBudgetsim$", "./internal/simcases",
		"-args", "-budgetsim.out="+out.Name(), fmt.Sprintf("-budgetsim.seed=%d", *seed))
	cmd.Dir = root
	if text, err := cmd.CombinedOutput(); err != nil {
		fail(fmt.Errorf("go test ./internal/simcases: %v\n%s", err, text))
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		fail(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		fail(err)
	}
	for i, s := range rep.Scenarios {
		if i > 0 {
			fmt.Println()
		}
		fmt.Println(s.Name)
		fmt.Printf("  %-34s %14s %9s %9s %18s\n", "budget", "amplification", "granted", "denied", "recovery success")
		for j, r := range s.Results {
			fmt.Printf("  %-34s %13.3fx %9d %9d %17.1f%%\n", s.Names[j], r.Amplification, r.Granted, r.Denied, 100*r.RecoverySuccess)
		}
	}
	fmt.Println("\namplification: attempts ÷ first attempts at the dependency during the outage; granted and denied: retries, during the outage")
	if *plot != "" && len(rep.Scenarios) > 0 {
		s := rep.Scenarios[0]
		if err := os.WriteFile(*plot, simcases.SVG(s.Names, s.Results), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("plot of the standard scenario: %s\n", *plot)
	}
	fmt.Fprintf(os.Stderr, "budgetsim: %v\n", time.Since(start).Round(time.Millisecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "budgetsim:", err)
	os.Exit(1)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	data, err := os.ReadFile(mod)
	if mod == "" || err != nil || !strings.Contains(string(data), "module github.com/retrybudget/retrybudget\n") {
		return "", fmt.Errorf("run budgetsim inside a checkout of github.com/retrybudget/retrybudget")
	}
	return filepath.Dir(mod), nil
}
