package linearizability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// interleaving replays s, a scenario with a controlled schedule
// (s.Control), once more with its steps traced, and tells how its
// goroutines' calls met: a line for each call a goroutine began, ended or
// was inside of between two switches, saying where in the budget's own
// code (file:line, the function, the source line) it was preempted and
// where it resumed, and what each call answered. A call the model answers
// otherwise, at the point where no order of the history works, is marked
// with the model's answer. The lines are those of the budget's source files
// even in rewritten code, whose /*line*/ directives point back to them.
//
// The places come from the yield points of rewritten code (see package
// yield), which a test binary built by budgetcheck or by budgettest's
// controlled stage has; without them the story tells the calls' order
// only. interleaving returns an error if the replay does not follow the
// schedule, or no longer violates the model: the story would not be the
// failure's.
func interleaving[S any](ctx context.Context, m model.Model[S], s Scenario, newBudget func(budget.Clock) budget.Budget) (string, error) {
	if s.Control == nil {
		return "", errors.New("linearizability: interleaving of a scenario without a controlled schedule")
	}
	opt := *s.Control
	opt.Trace = true
	s.Control = &opt
	h, rep, err := recordControlled(ctx, s, newBudget)
	if err != nil {
		return "", err
	}
	if rep.Diverged || rep.Free {
		return "", errors.New("linearizability: the traced replay did not follow the schedule")
	}
	res := Check(m, h, 10*time.Second)
	if res.Verdict != Violation {
		return "", fmt.Errorf("linearizability: the traced replay gave a %v history", res.Verdict)
	}
	return tell(h, res.Stuck, rep.Trace), nil
}

// tell writes the story of a traced run whose history is h; stuck are the
// operations that could not come next after the longest order the model
// accepts.
func tell(h model.History, stuck []Stuck, trace []sched.Step) string {
	byCall := make(map[int64]model.Operation, len(h))
	for _, o := range h {
		byCall[o.Call] = o
	}
	wrong := map[int64]bool{}
	for _, s := range stuck {
		if s.Op.Op == model.Retry && s.Granted != s.ModelGranted {
			wrong[s.Call] = s.ModelGranted
		}
	}
	src := sources{}
	done := map[int64]bool{} // the calls told as returned
	var st story
	st.add("how the calls met, switch by switch (where each goroutine was preempted and resumed, in the budget's code):")
	for i := 0; i < len(trace); {
		g := trace[i].G
		j := i + 1
		for j < len(trace) && trace[j].G == g {
			j++
		}
		// The goroutine's next step, where it resumes, holds where this
		// stretch stopped; if it has none, the goroutine returned.
		end := -1
		for k := j; k < len(trace); k++ {
			if trace[k].G == g {
				end = k
				break
			}
		}
		last := j - 1
		if end >= 0 {
			last = end
		}
		// The calls this stretch began, ended or was inside of, by their
		// call stamps, in order.
		var calls []int64
		for k := i; k <= last; k++ {
			if k >= j && k != end {
				continue
			}
			if tag := trace[k].Tag; tag != 0 && (len(calls) == 0 || calls[len(calls)-1] != tag) {
				calls = append(calls, tag)
			}
		}
		if len(calls) == 0 && end >= 0 {
			// A stretch inside no call: the budget being built, or a
			// goroutine the budget started.
			if stopped := src.user(trace[end].Site); stopped != nil {
				st.add(fmt.Sprintf("  %-4s %-20s runs, is preempted at %s in %s", fmt.Sprintf("#%d", g), "(no call)", stopped.at(), stopped.fn))
			}
		}
		for n, call := range calls {
			o, ok := byCall[call]
			if !ok || done[call] {
				continue
			}
			line := fmt.Sprintf("  %-4s %-20s", clientName(o.Client), o.Op)
			var resumed, stopped *frame
			if n == 0 && trace[i].Tag == call {
				resumed = src.user(trace[i].Site)
			}
			if n == len(calls)-1 && end >= 0 && trace[end].Tag == call {
				stopped = src.user(trace[end].Site)
			}
			if resumed != nil {
				line += fmt.Sprintf(" resumes at %s,", resumed.at())
			} else {
				line += " starts,"
			}
			if stopped != nil {
				st.add(line + fmt.Sprintf(" is preempted at %s in %s", stopped.at(), stopped.fn))
				if stopped.text != "" {
					st.add(fmt.Sprintf("  %25s %5d | %s", "", stopped.line, stopped.text))
				}
				continue
			}
			done[call] = true
			line += " returns" + returned(o)
			if want, ok := wrong[call]; ok {
				line += "   <- the model answers " + answer(want)
			}
			st.add(line)
		}
		i = j
	}
	return st.String()
}

// A story is the lines of an interleaving's telling; a line the same as
// the one before it (a goroutine's run of calls that no other interrupts,
// such as the calls before the goroutines start) is counted there.
type story struct {
	lines []string
	same  []int // how many times each line was told
}

func (st *story) add(line string) {
	if n := len(st.lines); n > 0 && st.lines[n-1] == line {
		st.same[n-1]++
		return
	}
	st.lines = append(st.lines, line)
	st.same = append(st.same, 1)
}

func (st *story) String() string {
	var b strings.Builder
	for i, l := range st.lines {
		b.WriteString(l)
		if st.same[i] > 1 {
			fmt.Fprintf(&b, "   (×%d)", st.same[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// returned is what o gave its caller, after a space; nothing but for a
// Retry.
func returned(o model.Operation) string {
	if o.Op.Op == model.Retry {
		return " " + answer(o.Granted)
	}
	return ""
}

// A frame is a place in the budget's code.
type frame struct {
	file string // as the story shows it
	line int
	fn   string // the function, without its package path
	text string // the source line, trimmed, if the file could be read
}

func (f *frame) at() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

// sources reads the budget's files once each.
type sources map[string][]string

// user returns the innermost frame of site in the budget's code, or nil if
// the goroutine stood in the recorder's, between two calls. Frames of the
// runtime and of package yield are passed over.
func (src sources) user(site sched.Site) *frame {
	if len(site) == 0 {
		return nil
	}
	frames := runtime.CallersFrames(site)
	for {
		f, more := frames.Next()
		switch {
		case strings.HasPrefix(f.Function, "runtime."),
			strings.HasPrefix(f.Function, modulePath+"/yield."),
			strings.HasPrefix(f.Function, modulePath+"/internal/sched."),
			strings.HasPrefix(f.Function, modulePath+"/budget.(*ManualClock)."),
			strings.HasPrefix(f.Function, modulePath+"/linearizability.(*readClock)."):
			// The scheduler, and the suite's clock, read by the budget's
			// code in the frame outside it.
		case strings.HasPrefix(f.Function, modulePath+"/linearizability."),
			strings.HasPrefix(f.Function, modulePath+"/internal/harness."):
			return nil
		default:
			if f.Function == "" {
				return nil
			}
			return &frame{file: shownPath(f.File), line: f.Line, fn: shortFunc(f.Function), text: src.line(f.File, f.Line)}
		}
		if !more {
			return nil
		}
	}
}

// modulePath is this module's path, whose recorder and scheduler frames a
// story leaves out.
const modulePath = "github.com/retrybudget/retrybudget"

// line returns line n of file, trimmed, or "" if it cannot be read.
func (src sources) line(file string, n int) string {
	lines, ok := src[file]
	if !ok {
		if data, err := os.ReadFile(file); err == nil {
			lines = strings.Split(string(data), "\n")
		}
		src[file] = lines
	}
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}

// shownPath returns file relative to the working directory (a test's
// package directory) when it is there or one level up, else its
// directory's name and its own.
func shownPath(file string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, ".."+string(filepath.Separator)+"..") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(file)), filepath.Base(file)))
}

// shortFunc drops the package path from a function's name:
// "example.com/p.(*Bucket).Retry" is "(*Bucket).Retry".
func shortFunc(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		fn = fn[i+1:]
	}
	if i := strings.Index(fn, "."); i >= 0 {
		fn = fn[i+1:]
	}
	return fn
}

// clientName names a client of a history as model.Operation's String does:
// "pre" for client 0, which runs before the concurrent part, and "g1",
// "g2", … for the others.
func clientName(c int) string {
	if c == 0 {
		return "pre"
	}
	return fmt.Sprintf("g%d", c)
}
