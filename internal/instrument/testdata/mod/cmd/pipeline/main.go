// Command pipeline squares the numbers 1 to 12 with three workers, in a
// select loop that feeds, collects and stops by a channel protocol, for the
// instrument package's test that runs it rewritten: its output must be
// the same as it is not rewritten.
package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/retrybudget/retrybudget/yield"
)

type failed struct{ n int }

func (f *failed) Error() string { return fmt.Sprintf("%d failed", f.n) }

type pool struct {
	once    sync.Once
	started int
	wg      sync.WaitGroup
}

func (p *pool) start() { p.started++ }

// work squares the jobs, and fails on the multiples of 5, until jobs is
// closed or quit is.
func (p *pool) work(jobs <-chan int, squares chan<- int, errs chan<- error, quit <-chan struct{}) {
	defer p.wg.Done()
	p.once.Do(p.start)
	for {
		var n int
		var ok bool
		select {
		case n, ok = <-jobs:
		case <-quit:
			return
		}
		if !ok {
			return
		}
		if n%5 == 0 {
			select {
			case errs <- &failed{n}:
			case <-quit:
				return
			}
			continue
		}
		select {
		case squares <- n * n:
		case <-quit:
			return
		}
	}
}

func logf(b *strings.Builder, format string, args ...any) { fmt.Fprintf(b, format, args...) }

func main() {
	p := &pool{}
	jobs := make(chan int)
	squares := make(chan int)
	errs := make(chan error)
	quit := make(chan struct{})
	done := make(chan struct{})
	for range 3 {
		p.wg.Add(1)
		go p.work(jobs, squares, errs, quit)
	}
	go func() {
		p.wg.Wait()
		close(done)
	}()

	var got []int
	var failures []string
	next, feed := 1, jobs
loop:
	for {
		select {
		case feed <- next:
			if next++; next > 12 {
				close(jobs)
				feed = nil
			}
		case sq := <-squares:
			got = append(got, sq)
		case err := <-errs:
			failures = append(failures, err.Error())
		case <-done:
			break loop
		}
	}
	select {
	case <-quit:
		panic("quit is open")
	default:
		close(quit)
	}
	_, open := <-quit
	slices.Sort(got)
	slices.Sort(failures)
	var b strings.Builder
	logf(&b, "squares %v\n", got)
	var wg sync.WaitGroup
	wg.Add(1)
	go func(prefix string, args ...any) {
		defer wg.Done()
		logf(&b, prefix+" %v %v\n", args...)
	}("failures", failures, len(failures))
	wg.Wait()
	logged := make(chan struct{})
	line := []any{p.started, open}
	go func(format string, args ...any) {
		logf(&b, format, args...)
		close(logged)
	}("workers started %d, quit open %v\n", line...)
	<-logged
	fmt.Printf("%sinstrumented %v\n", b.String(), yield.Instrumented())
}
