package control

import (
	"flag"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/retrybudget/retrybudget/internal/sched"
)

// DefaultSchedules is how many schedules each scenario, stress run or loop
// case explores under control.
const DefaultSchedules = 8

var (
	modeFlag = flag.String("budgettest.control", "auto",
		"controlled runs: auto (an instrumented child process when this binary is not instrumented), off (free runs only), require (fail when the verdict cannot be controlled)")
	schedules = flag.Int("budgettest.schedules", DefaultSchedules,
		"schedules each scenario, stress run or loop case explores under control (0: run freely)")
	seed = flag.Uint64("budgettest.seed", 0,
		"the seed base of the schedules explored: the same base explores the same schedules")
	replay = flag.String("budgettest.replay", "",
		"replay one scenario of the Linearizable check exactly: the JSON a failure prints, or the path of a saved history (.json)")
	instrumentFlag = flag.String("budgettest.instrument", "",
		"more packages to rewrite for the controlled runs, comma-separated (the package of the subject's type is found by itself)")
)

// A Mode is what -budgettest.control asks for.
type Mode string

// The modes.
const (
	Auto    Mode = "auto"
	Off     Mode = "off"
	Require Mode = "require"
)

// CurrentMode returns the mode -budgettest.control sets, or an error for a
// value that is none.
func CurrentMode() (Mode, error) {
	switch m := Mode(strings.TrimSpace(*modeFlag)); m {
	case Auto, Off, Require:
		return m, nil
	case "":
		return Auto, nil
	default:
		return "", fmt.Errorf("budgettest: -budgettest.control=%s: want auto, off or require", *modeFlag)
	}
}

// Schedules is how many schedules a controlled stage explores per
// scenario, stress run or loop case.
func Schedules() int { return max(*schedules, 0) }

// SeedBase is the seed base of the schedules.
func SeedBase() uint64 { return *seed }

// Replay is the -budgettest.replay flag's value, trimmed.
func Replay() string { return strings.TrimSpace(*replay) }

// Controlled reports whether this process runs controlled stages itself:
// its code is instrumented and schedules are asked for.
func Controlled() bool { return sched.Instrumented() && Schedules() > 0 }

// Strategy is the strategy of the k-th schedule of a scenario: PCT of
// depth 2 and 3 (one and two preemptions) and the random walk, in turn.
func Strategy(k int) sched.Strategy {
	switch k % 3 {
	case 0:
		return sched.PCT(2)
	case 1:
		return sched.Walk()
	default:
		return sched.PCT(3)
	}
}

// Options returns the options of the k-th schedule explored for the
// scenario or run of seed s, with length the expected number of yield
// points: distinct for every (base, s, k).
func Options(s uint64, k, length int) sched.Options {
	return sched.Options{Seed: *seed<<32 ^ s<<8 ^ uint64(k), Strategy: Strategy(k), Length: length}
}

// Named is Options for a case known by name rather than by a seed (a loop
// check's case).
func Named(name string, k, length int) sched.Options {
	h := fnv.New64a()
	h.Write([]byte(name))
	return Options(h.Sum64()>>8, k, length)
}

// Flags returns the flags of this family as they are set now, for a child
// process.
func Flags() []string {
	out := []string{
		"-budgettest.schedules=" + strconv.Itoa(*schedules),
		"-budgettest.seed=" + strconv.FormatUint(*seed, 10),
	}
	if r := Replay(); r != "" {
		out = append(out, "-budgettest.replay="+r)
	}
	return out
}

// Describe says how to explore the same schedules again, for a failure.
func Describe() string {
	return fmt.Sprintf("-budgettest.seed=%d -budgettest.schedules=%d", *seed, *schedules)
}
