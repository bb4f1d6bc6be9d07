package instrument

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"
)

// fakeYield is the hook API of package yield, enough to type-check the
// rewritten sources.
const fakeYield = `package yield

import (
	"sync"
	"time"
)

func P[T any](x T) T { return x }
func W[T any](x T) T { return x }
func (hooks) Point() {}

type Mutex struct{ m *sync.Mutex }

func (hooks) M(m *sync.Mutex) Mutex { return Mutex{m} }
func (m Mutex) Lock()         { m.m.Lock() }
func (m Mutex) Unlock()       { m.m.Unlock() }
func (m Mutex) TryLock() bool { return m.m.TryLock() }

type RWMutex struct{ m *sync.RWMutex }

func (hooks) RW(m *sync.RWMutex) RWMutex       { return RWMutex{m} }
func (m RWMutex) Lock()                 { m.m.Lock() }
func (m RWMutex) Unlock()               { m.m.Unlock() }
func (m RWMutex) RLock()                { m.m.RLock() }
func (m RWMutex) RUnlock()              { m.m.RUnlock() }
func (m RWMutex) TryLock() bool         { return m.m.TryLock() }
func (m RWMutex) TryRLock() bool        { return m.m.TryRLock() }
func (m RWMutex) RLocker() sync.Locker  { return m.m.RLocker() }

func Send[T any](ch chan<- T, v T)         { ch <- v }
func Recv[T any](ch <-chan T) T            { return <-ch }
func Recv2[T any](ch <-chan T) (T, bool)   { v, ok := <-ch; return v, ok }
func Range[T any](ch <-chan T) func(func(T) bool) { return func(func(T) bool) {} }
func (hooks) Mark() bool                           { return true }

func (hooks) Go(fn func())             { go fn() }
func (hooks) Gosched()                 {}
func (hooks) Spin(f func()) func()     { return f }
func (hooks) Sleeper(f func(time.Duration)) func(time.Duration) { return f }
func Close[T any](ch chan<- T) { close(ch) }

type Once struct{ o *sync.Once }

func (hooks) O(o *sync.Once) Once     { return Once{o} }
func (h Once) Do(f func())    { h.o.Do(f) }

type Cond struct{ c *sync.Cond }

func (hooks) C(c *sync.Cond) Cond   { return Cond{c} }
func (h Cond) Wait()        { h.c.Wait() }
func (h Cond) Signal()      { h.c.Signal() }
func (h Cond) Broadcast()   { h.c.Broadcast() }

type WaitGroup struct{ wg *sync.WaitGroup }

func (hooks) WG(wg *sync.WaitGroup) WaitGroup { return WaitGroup{wg} }
func (h WaitGroup) Go(f func())       { h.wg.Go(f) }
func (h WaitGroup) Wait()             { h.wg.Wait() }

type Case interface{ isCase() }

type RecvCase[T any] struct {
	ch <-chan T
	V  T
	OK bool
}

func R[T any](ch <-chan T) *RecvCase[T] { return &RecvCase[T]{ch: ch} }
func (*RecvCase[T]) isCase()             {}

type SendCase[T any] struct {
	ch chan<- T
	v  T
}

func S[T any](ch chan<- T, v T) *SendCase[T] { return &SendCase[T]{ch, v} }
func (*SendCase[T]) isCase()                 {}

func (hooks) Select(hasDefault bool, cases ...Case) int { return -1 }

type hooks struct{}

var Hook hooks
`

// testImporter imports the standard library from export data and package
// yield from fakeYield. The tests share it, and do not run in parallel.
var testImporter = func() types.Importer {
	std := importer.Default()
	var yield *types.Package
	return importerFunc(func(path string) (*types.Package, error) {
		if path != YieldPath {
			return std.Import(path)
		}
		if yield == nil {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "yield.go", fakeYield, 0)
			if err != nil {
				return nil, err
			}
			conf := types.Config{Importer: std}
			if yield, err = conf.Check(YieldPath, fset, []*ast.File{f}, nil); err != nil {
				return nil, err
			}
		}
		return yield, nil
	})
}()

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

const testPath = "/src/p/p.go"

// check parses and type-checks src as the file testPath of package p.
func check(t *testing.T, src string) (*token.FileSet, *ast.File, *types.Info) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, testPath, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Implicits:  map[ast.Node]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Scopes:     map[ast.Node]*types.Scope{},
	}
	conf := types.Config{Importer: testImporter}
	if _, err := conf.Check("example.com/p", fset, []*ast.File{f}, info); err != nil {
		t.Fatalf("type-check: %v\n%s", err, src)
	}
	return fset, f, info
}

// rewrite runs File on src and checks that the output type-checks and
// keeps every token of src on its line.
func rewrite(t *testing.T, src string) (string, int) {
	t.Helper()
	return rewriteWith(t, src, Options{})
}

// rewriteWith is rewrite with FileWith and opt.
func rewriteWith(t *testing.T, src string, opt Options) (string, int) {
	t.Helper()
	fset, f, info := check(t, src)
	out, n, err := FileWith(fset, f, []byte(src), info, opt)
	if err != nil {
		t.Fatalf("File: %v", err)
	}
	if out == nil {
		if n != 0 {
			t.Errorf("File returned no source and %d points", n)
		}
		return "", 0
	}
	check(t, string(out))
	replaced := []string{"<-", "close"}
	if opt.Fields {
		replaced = append(replaced, "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "&^=")
	}
	checkLines(t, src, string(out), replaced...)
	return string(out), n
}

// checkLines checks that out has the lines of src and one more, the
// marker's, and that the tokens of each line of src are on the same line
// of out, in order, save the tokens replaced (the arrows of the channel
// operations, the operators of the assignments Options.Fields spells
// again) and those the go and select rewrites replace or move (see
// moving); and that, read with out's line directive, every line of out
// names src's file and its own line.
func checkLines(t *testing.T, src, out string, replaced ...string) {
	t.Helper()
	if got, want := lineCount(out), lineCount(src)+1; got != want {
		t.Errorf("the rewritten file has %d lines, want %d", got, want)
	}
	before, _ := tokenLines(src, moving(t, src))
	after, adjusted := tokenLines(out, nil)
	for line, toks := range before {
		toks = slices.DeleteFunc(toks, func(s string) bool { return slices.Contains(replaced, s) })
		if !isSubsequence(toks, after[line]) {
			t.Errorf("line %d: tokens %q are not all on the line after the rewrite: %q", line, toks, after[line])
		}
	}
	for line, pos := range adjusted {
		if pos.Filename != testPath || pos.Line != line {
			t.Errorf("line %d of the rewritten file is at %s:%d", line, pos.Filename, pos.Line)
		}
	}
}

func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// moving returns the offsets of src's tokens that the go and select
// rewrites may replace or move to another line: the go keyword, the
// parentheses, commas and ellipsis of its call, its function and its
// arguments when they are on one line and not function literals; the
// select keyword, and the case headers of its communications but the
// left-hand sides of their assignments.
func moving(t *testing.T, src string) func(int) bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, testPath, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	tf := fset.File(f.FileStart)
	var ranges [][2]int
	add := func(from, to token.Pos) { ranges = append(ranges, [2]int{tf.Offset(from), tf.Offset(to)}) }
	oneLine := func(n ast.Node) bool {
		_, lit := n.(*ast.FuncLit)
		return !lit && tf.Line(n.Pos()) == tf.Line(n.End())
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			c := n.Call
			add(n.Go, c.Fun.Pos())
			if oneLine(c.Fun) {
				add(c.Fun.Pos(), c.Fun.End())
			}
			from := c.Lparen
			for _, a := range c.Args {
				add(from, a.Pos())
				if oneLine(a) {
					add(a.Pos(), a.End())
				}
				from = a.End()
			}
			add(from, c.Rparen+1)
		case *ast.SelectStmt:
			add(n.Select, n.Select+6)
		case *ast.CommClause:
			if n.Comm == nil {
				break
			}
			if a, ok := n.Comm.(*ast.AssignStmt); ok {
				add(n.Case, a.Pos())
				add(a.TokPos+token.Pos(len(a.Tok.String())), n.Colon+1)
			} else {
				add(n.Case, n.Colon+1)
			}
		}
		return true
	})
	return func(off int) bool {
		for _, r := range ranges {
			if r[0] <= off && off < r[1] {
				return true
			}
		}
		return false
	}
}

// tokenLines returns the tokens of src by line, save those at the offsets
// skip reports, and the position each line's first token reports once
// line directives apply.
func tokenLines(src string, skip func(int) bool) (map[int][]string, map[int]token.Position) {
	fset := token.NewFileSet()
	file := fset.AddFile(testPath, -1, len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), nil, 0)
	lines := map[int][]string{}
	adjusted := map[int]token.Position{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		raw := fset.PositionFor(pos, false).Line
		if _, ok := adjusted[raw]; !ok {
			adjusted[raw] = fset.Position(pos)
		}
		if skip != nil && skip(file.Offset(pos)) {
			continue
		}
		if lit == "" {
			lit = tok.String()
		}
		lines[raw] = append(lines[raw], lit)
	}
	return lines, adjusted
}

func isSubsequence(sub, seq []string) bool {
	for _, s := range seq {
		if len(sub) > 0 && sub[0] == s {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

// header and footer are what File adds to a file of package p whose
// import name is ryield.
const (
	header = `/*line /src/p/p.go:1:1*/package p; import ryield "github.com/retrybudget/retrybudget/yield"`
	footer = "var _ = ryield.Hook.Mark()\n"
)

func TestFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string // after "package p"
		want   string // after the header, before the footer; "" if File changes nothing
		points int
	}{
		{
			name: "AtomicFunctionsAliased",
			src: `
import (
	at "sync/atomic"
	"unsafe"
)

type B struct{ n int64 }

func f(b *B, u *uint32, p *unsafe.Pointer, i int32) {
	at.AddInt64(&b.n, 1)
	_ = at.LoadUint32(u)
	at.CompareAndSwapPointer(p, nil, nil)
	at.StoreInt64(&b.n, 2)
	at.SwapInt32(&i, 3)
	at.AndInt32(&i, 1)
	at.OrUint32(u, 1)
}
`,
			want: `
import (
	at "sync/atomic"
	"unsafe"
)

type B struct{ n int64 }

func f(b *B, u *uint32, p *unsafe.Pointer, i int32) {
	at.AddInt64(ryield.P(&b.n), 1)
	_ = at.LoadUint32(ryield.P(u))
	at.CompareAndSwapPointer(ryield.P(p), nil, nil)
	at.StoreInt64(ryield.P(&b.n), 2)
	at.SwapInt32(ryield.P(&i), 3)
	at.AndInt32(ryield.P(&i), 1)
	at.OrUint32(ryield.P(u), 1)
}
`,
			points: 7,
		},
		{
			name: "AtomicFunctionsDotImported",
			src: `
import . "sync/atomic"

var n int64

func f() int64 { return AddInt64(&n, 1) }
`,
			want: `
import . "sync/atomic"

var n int64

func f() int64 { return AddInt64(ryield.P(&n), 1) }
`,
			points: 1,
		},
		{
			name: "AtomicFunctionValueLeft",
			src: `
import "sync/atomic"

var n int64

func f() {
	add := atomic.AddInt64
	add(&n, 1)
}
`,
		},
		{
			name: "AtomicMethods",
			src: `
import "sync/atomic"

type counter struct {
	n    atomic.Int64
	ok   atomic.Bool
	v    atomic.Value
	last atomic.Pointer[int]
}

type embeds struct{ atomic.Int64 }

type embedsPointer struct{ *atomic.Uint32 }

type outer struct{ embeds }

func f(c *counter, p *atomic.Int64, e embeds, ep embedsPointer, o *outer, x int) {
	c.n.Add(1)
	_ = c.n.Load()
	c.ok.Store(true)
	c.v.Store(x)
	c.last.Store(&x)
	p.Add(1)
	e.Add(1)
	ep.Add(1)
	o.Add(1)
	load := c.n.Load
	_ = load
}
`,
			want: `
import "sync/atomic"

type counter struct {
	n    atomic.Int64
	ok   atomic.Bool
	v    atomic.Value
	last atomic.Pointer[int]
}

type embeds struct{ atomic.Int64 }

type embedsPointer struct{ *atomic.Uint32 }

type outer struct{ embeds }

func f(c *counter, p *atomic.Int64, e embeds, ep embedsPointer, o *outer, x int) {
	ryield.P(&c.n).Add(1)
	_ = ryield.P(&c.n).Load()
	ryield.P(&c.ok).Store(true)
	ryield.P(&c.v).Store(x)
	ryield.P(&c.last).Store(&x)
	ryield.P(p).Add(1)
	ryield.P(&e.Int64).Add(1)
	ryield.P(ep.Uint32).Add(1)
	ryield.P(&o.embeds.Int64).Add(1)
	load := ryield.P(&c.n).Load
	_ = load
}
`,
			points: 10,
		},
		{
			name: "Mutex",
			src: `
import "sync"

type B struct {
	mu sync.Mutex
	n  int
}

type locked struct {
	sync.Mutex
	n int
}

type lockedPointer struct{ *sync.Mutex }

func (b *B) inc() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
}

func f(b *B, l *locked, lp lockedPointer, mu *sync.Mutex) bool {
	l.Lock()
	l.n++
	l.Unlock()
	lp.Lock()
	lp.Unlock()
	unlock := b.mu.Unlock
	_ = unlock
	return mu.TryLock()
}
`,
			want: `
import "sync"

type B struct {
	mu sync.Mutex
	n  int
}

type locked struct {
	sync.Mutex
	n int
}

type lockedPointer struct{ *sync.Mutex }

func (b *B) inc() {
	ryield.Hook.M(&b.mu).Lock()
	defer ryield.Hook.M(&b.mu).Unlock()
	b.n++
}

func f(b *B, l *locked, lp lockedPointer, mu *sync.Mutex) bool {
	ryield.Hook.M(&l.Mutex).Lock()
	l.n++
	ryield.Hook.M(&l.Mutex).Unlock()
	ryield.Hook.M(lp.Mutex).Lock()
	ryield.Hook.M(lp.Mutex).Unlock()
	unlock := ryield.Hook.M(&b.mu).Unlock
	_ = unlock
	return ryield.Hook.M(mu).TryLock()
}
`,
			points: 8,
		},
		{
			name: "RWMutex",
			src: `
import "sync"

type cache struct {
	*sync.RWMutex
	m map[string]int
}

func f(c cache, rw sync.RWMutex) (int, bool) {
	c.RLock()
	defer c.RUnlock()
	rw.Lock()
	rw.Unlock()
	_ = rw.TryRLock()
	_ = rw.RLocker()
	return c.m["x"], rw.TryLock()
}
`,
			want: `
import "sync"

type cache struct {
	*sync.RWMutex
	m map[string]int
}

func f(c cache, rw sync.RWMutex) (int, bool) {
	ryield.Hook.RW(c.RWMutex).RLock()
	defer ryield.Hook.RW(c.RWMutex).RUnlock()
	ryield.Hook.RW(&rw).Lock()
	ryield.Hook.RW(&rw).Unlock()
	_ = ryield.Hook.RW(&rw).TryRLock()
	_ = ryield.Hook.RW(&rw).RLocker()
	return c.m["x"], ryield.Hook.RW(&rw).TryLock()
}
`,
			points: 7,
		},
		{
			name: "Once",
			src: `
import "sync"

var once sync.Once

type lazy struct{ once *sync.Once }

type embedsOnce struct{ sync.Once }

func f(l lazy, e *embedsOnce, init func()) {
	once.Do(init)
	l.once.Do(init)
	e.Do(init)
}
`,
			want: `
import "sync"

var once sync.Once

type lazy struct{ once *sync.Once }

type embedsOnce struct{ sync.Once }

func f(l lazy, e *embedsOnce, init func()) {
	ryield.Hook.O(&once).Do(init)
	ryield.Hook.O(l.once).Do(init)
	ryield.Hook.O(&e.Once).Do(init)
}
`,
			points: 3,
		},
		{
			name: "Cond",
			src: `
import "sync"

type monitor struct {
	mu   sync.Mutex
	cond *sync.Cond
	c    sync.Cond
}

func f(m *monitor) {
	m.cond.Wait()
	m.cond.Signal()
	m.c.Broadcast()
	wake := m.cond.Broadcast
	wake()
	_ = m.cond.L
}
`,
			want: `
import "sync"

type monitor struct {
	mu   sync.Mutex
	cond *sync.Cond
	c    sync.Cond
}

func f(m *monitor) {
	ryield.Hook.C(m.cond).Wait()
	ryield.Hook.C(m.cond).Signal()
	ryield.Hook.C(&m.c).Broadcast()
	wake := ryield.Hook.C(m.cond).Broadcast
	wake()
	_ = m.cond.L
}
`,
			points: 4,
		},
		{
			name: "Sleep",
			src: `
import (
	"time"
	t2 "time"
)

func f(d time.Duration) {
	time.Sleep(d)
	t2.Sleep(time.Millisecond)
	defer time.Sleep(d)
	sleep := time.Sleep
	sleep(d)
}
`,
			want: `
import (
	"time"
	t2 "time"
)

func f(d time.Duration) {
	ryield.Hook.Sleeper(time.Sleep)(d)
	ryield.Hook.Sleeper(t2.Sleep)(time.Millisecond)
	defer ryield.Hook.Sleeper(time.Sleep)(d)
	sleep := time.Sleep
	sleep(d)
}
`,
			points: 3,
		},
		{
			name: "Send",
			src: `
type myErr struct{}

func (*myErr) Error() string { return "" }

type C chan int

func f(ch chan int, out chan<- int, c C, errs chan error, anys chan any, x int) {
	ch <- x
	out <- 1
	c <- x + 1
	errs <- nil
	errs <- &myErr{}
	anys <- x
	anys <- 2
	ch <- -x
	ch <-
		x
	ch <- /* the value */ x
}
`,
			want: `
type myErr struct{}

func (*myErr) Error() string { return "" }

type C chan int

func f(ch chan int, out chan<- int, c C, errs chan error, anys chan any, x int) {
	ryield.Send(ch, x)
	ryield.Send(out, 1)
	ryield.Send(c, x + 1)
	ryield.Send(errs, nil)
	ryield.Send[error](errs, &myErr{})
	ryield.Send[any](anys, x)
	ryield.Send[any](anys, 2)
	ryield.Send(ch, -x)
	ryield.Send(ch ,
		x)
	ryield.Send(ch , /* the value */ x)
}
`,
			points: 10,
		},
		{
			name: "SendOfAnUnspellableTypeLeft",
			src: `
import "io"

func f(readers chan io.Reader, r *myReader) {
	type io int
	readers <- r
}

type myReader struct{}

func (*myReader) Read([]byte) (int, error) { return 0, nil }
`,
		},
		{
			name: "Recv",
			src: `
func use(int) {}

func f(ch chan int, in <-chan int, done chan struct{}) int {
	x := <-ch
	use(<-in)
	<-done
	x += <-ch
	return x + <- in
}
`,
			want: `
func use(int) {}

func f(ch chan int, in <-chan int, done chan struct{}) int {
	x := ryield.Recv(ch)
	use(ryield.Recv(in))
	ryield.Recv(done)
	x += ryield.Recv(ch)
	return x + ryield.Recv( in)
}
`,
			points: 5,
		},
		{
			name: "Recv2",
			src: `
type myBool bool

func f(ch chan int) {
	v, ok := <-ch
	v, ok = <-ch
	var w, ok2 = <-ch
	_, ok3 := <-ch
	var x, y any = <-ch
	u, ok4 := (<-ch)
	var mb myBool
	v, mb = <-ch
	_, _, _, _, _, _, _, _, _ = v, ok, w, ok2, ok3, x, y, u, ok4
	_ = mb
}
`,
			want: `
type myBool bool

func f(ch chan int) {
	v, ok := ryield.Recv2(ch)
	v, ok = ryield.Recv2(ch)
	var w, ok2 = ryield.Recv2(ch)
	_, ok3 := ryield.Recv2(ch)
	var x, y any = ryield.Recv2(ch)
	u, ok4 := (ryield.Recv2(ch))
	var mb myBool
	v, mb = <-ch
	_, _, _, _, _, _, _, _, _ = v, ok, w, ok2, ok3, x, y, u, ok4
	_ = mb
}
`,
			points: 6,
		},
		{
			name: "Select",
			src: `
import "sync/atomic"

func f(ch chan int, out chan int64, done chan struct{}, n *int64, tag int) {
	select {
	case v := <-ch:
		_ = v
	case v, ok := <-ch:
		_, _ = v, ok
	case out <- atomic.AddInt64(n, 1):
	case <-done:
	case ch <- <-ch:
	default:
	}
loop:
	for {
	wait: select {
		case <-done:
			break loop
		default:
			break wait
		}
	}
	switch tag {
	case 1: select {}
	}
}
`,
			want: `
import "sync/atomic"

func f(ch chan int, out chan int64, done chan struct{}, n *int64, tag int) {
	switch ryield_0, ryield_1, ryield_2, ryield_3, ryield_4 := ryield.R(/*line /src/p/p.go:7:14*/ch), ryield.R(/*line /src/p/p.go:9:18*/ch), ryield.S(/*line /src/p/p.go:11:7*/out, atomic.AddInt64(ryield.P(n), 1)), ryield.R(/*line /src/p/p.go:12:9*/done), ryield.S(/*line /src/p/p.go:13:7*/ch, ryield.Recv(ch)); ryield.Hook.Select(true, ryield_0, ryield_1, ryield_2, ryield_3, ryield_4)/*line /src/p/p.go:6:8*/ {
	case 0: v := ryield_0.V;
		_ = v
	case 1: v, ok := ryield_1.V, ryield_1.OK;
		_, _ = v, ok
	case 2:
	case 3:
	case 4:
	default:
	}
loop:
	for {
	wait: switch ryield_0 := ryield.R(/*line /src/p/p.go:19:10*/done); ryield.Hook.Select(true, ryield_0)/*line /src/p/p.go:18:14*/ {
		case 0:
			break loop
		default:
			break wait
		}
	}
	switch tag {
	case 1: ryield.Hook.Point(); select {}
	}
}
`,
			points: 5,
		},
		{
			name: "Close",
			src: `
type C chan int

func generic[T ~chan int](c T) { close(c) }

func f(ch chan int, out chan<- string, c C) {
	close(ch)
	defer close(out)
	close(c)
	go close(ch)
	func() {
		close := func(chan int) {}
		close(ch)
	}()
}
`,
			want: `
type C chan int

func generic[T ~chan int](c T) { close(c) }

func f(ch chan int, out chan<- string, c C) {
	ryield.Close(ch)
	defer ryield.Close(out)
	ryield.Close(c)
	go close(ch)
	func() {
		close := func(chan int) {}
		close(ch)
	}()
}
`,
			points: 3,
		},
		{
			name: "Gosched",
			src: `
import (
	rt "runtime"
	"sync/atomic"
)

type flag struct{ held atomic.Bool }

func (f *flag) lock() {
	for !f.held.CompareAndSwap(false, true) {
		rt.Gosched()
	}
	defer rt.Gosched()
	(rt.Gosched)()
	go rt.Gosched()
	yield := rt.Gosched
	yield()
	func() {
		rt := struct{ Gosched func() }{func() {}}
		rt.Gosched()
	}()
}
`,
			want: `
import (
	rt "runtime"
	"sync/atomic"
)

type flag struct{ held atomic.Bool }

func (f *flag) lock() {
	for !ryield.P(&f.held).CompareAndSwap(false, true) {
		ryield.Hook.Spin(rt.Gosched)()
	}
	defer rt.Gosched()
	ryield.Hook.Spin((rt.Gosched))()
	ryield.Hook.Go(rt.Gosched)
	yield := rt.Gosched
	yield()
	func() {
		rt := struct{ Gosched func() }{func() {}}
		rt.Gosched()
	}()
}
`,
			points: 4,
		},
		{
			name: "GoschedDotImported",
			src: `
import . "runtime"

func spin(done func() bool) {
	for !done() {
		Gosched()
	}
}
`,
			want: `
import . "runtime"

func spin(done func() bool) {
	for !done() {
		ryield.Hook.Spin(Gosched)()
	}
}
`,
			points: 1,
		},
		{
			name: "Go",
			src: `
import (
	"fmt"
	"sync"
	"sync/atomic"
)

type counter struct{ n int }

func (c *counter) inc(d int) { c.n += d }
func (c counter) get() int   { return c.n }
func (c *counter) run()      {}

func g[T any](v T)             {}
func h[T, U any](t T, u U) int { return 0 }
func variadic(xs ...int)       {}
func pair(a, b int)            {}
func fn(f func(int))           {}

const N = 3

func f(c counter, pc *counter, x int, xs []int, o *sync.Once, mu *sync.Mutex, n *atomic.Int64, a int) {
	go c.inc(x)
	go pc.inc(1)
	go c.get()
	go c.run()
	go pc.run()
	go variadic(xs...)
	go variadic(x, N, x)
	go pair(N, 2)
	go g(1)
	go g(x)
	go g[int](x)
	go h[int](x, "s")
	go fn(g)
	go fmt.Println("x", x, nil)
	go func(v int) {
		_ = v
	}(x)
	go func() {
		fmt.Println(x)
	}()
	go o.Do(func() {})
	go mu.Unlock()
	go n.Add(1)
	go atomic.AddInt64(new(int64), 1)
L:
	go pair(x,
		a, // the second
	)
	goto L
}
`,
			want: `
import (
	"fmt"
	"sync"
	"sync/atomic"
)

type counter struct{ n int }

func (c *counter) inc(d int) { c.n += d }
func (c counter) get() int   { return c.n }
func (c *counter) run()      {}

func g[T any](v T)             {}
func h[T, U any](t T, u U) int { return 0 }
func variadic(xs ...int)       {}
func pair(a, b int)            {}
func fn(f func(int))           {}

const N = 3

func f(c counter, pc *counter, x int, xs []int, o *sync.Once, mu *sync.Mutex, n *atomic.Int64, a int) {
	{ ryield_f, ryield_0 := c.inc, x; ryield.Hook.Go(func() { ryield_f(ryield_0) }) }
	{ ryield_f := pc.inc; ryield.Hook.Go(func() { ryield_f(1) }) }
	{ ryield_f := c.get; ryield.Hook.Go(func() { ryield_f() }) }
	ryield.Hook.Go(c.run)
	ryield.Hook.Go(pc.run)
	{ ryield_0 := xs; ryield.Hook.Go(func() { variadic(ryield_0...) }) }
	{ ryield_0, ryield_2 := x, x; ryield.Hook.Go(func() { variadic(ryield_0, N, ryield_2) }) }
	ryield.Hook.Go(func() { pair(N, 2) })
	ryield.Hook.Go(func() { g(1) })
	{ ryield_0 := x; ryield.Hook.Go(func() { g(ryield_0) }) }
	{ ryield_0 := x; ryield.Hook.Go(func() { g[int](ryield_0) }) }
	{ ryield_0 := x; ryield.Hook.Go(func() { h[int](ryield_0, "s") }) }
	ryield.Hook.Go(func() { fn(g) })
	{ ryield_1 := x; ryield.Hook.Go(func() { fmt.Println("x", ryield_1, nil) }) }
	{ ryield_f, ryield_0 := func(v int) {
		_ = v
	}, x; ryield.Hook.Go(func() { ryield_f(ryield_0) }) }
	ryield.Hook.Go(func() {
		fmt.Println(x)
	})
	{ ryield_f, ryield_0 := ryield.Hook.O(o).Do, func() {}; ryield.Hook.Go(func() { ryield_f(ryield_0) }) }
	ryield.Hook.Go(ryield.Hook.M(mu).Unlock)
	{ ryield_f := ryield.P(n).Add; ryield.Hook.Go(func() { ryield_f(1) }) }
	{ ryield_0 := ryield.P(new(int64)); ryield.Hook.Go(func() { atomic.AddInt64(ryield_0, 1) }) }
L:
	{ ryield_0, ryield_1 := x,
		a // the second
	; ryield.Hook.Go(func() { pair(ryield_0, ryield_1) }) }
	goto L
}
`,
			points: 25,
		},
		{
			name: "GoLeft",
			src: `
type myBool bool

func two() (int, int)  { return 0, 0 }
func pair(a, b int)    {}
func takes(b myBool)   {}
func shift(v int64)    {}

const N = 3

func f(ch chan int, a, b int, s uint) {
	go println(a)
	go close(ch)
	go pair(two())
	go takes(a == b)
	go shift(1 << s)
	go pair(a, N +
		1)
}
`,
		},
		{
			name: "GoTemps",
			src: `
var ryield_f int

func use(int) {}

func f(x int) {
	go use(x)
}
`,
			want: `
var ryield_f int

func use(int) {}

func f(x int) {
	{ ryieldx2_0 := x; ryield.Hook.Go(func() { use(ryieldx2_0) }) }
}
`,
			points: 1,
		},
		{
			name: "SelectForms",
			src: `
type myErr struct{}

func (*myErr) Error() string { return "" }

func use(...any) {}

func f(a, c, d chan int, b chan<- int, x int, errs chan error, cc chan chan int) {
	var w int
	var ok bool
	select {
	case v := <-a:
		use(v)
	case b <- x:
		use(1)
	case w, ok = <-c:
		use(w, ok)
	case <-d:
	default:
		use(2)
	}
L:
	select {
	case errs <- &myErr{}: // a comment
		break L
	// between the cases

	case v, ok := <-(<-cc):
		use(v, ok)
	case (<-a):
	case _, _ = <-a:
	case w = <-c:
		go use(w)
	}
}

func loop(a, c, d chan int) int {
	for {
		select {
		case <-a:
			continue
		case v := <-c:
			select {
			case d <- v:
			case <-a:
				return v
			}
		}
	}
}

func last(a chan int) int {
	select {
	case v := <-a:
		return v
	case <-a:
		return 0
	}
}

func oneLine(a chan int) { select { case v := <-a: use(v) } }
`,
			want: `
type myErr struct{}

func (*myErr) Error() string { return "" }

func use(...any) {}

func f(a, c, d chan int, b chan<- int, x int, errs chan error, cc chan chan int) {
	var w int
	var ok bool
	switch ryield_0, ryield_1, ryield_2, ryield_3 := ryield.R(/*line /src/p/p.go:13:14*/a), ryield.S(/*line /src/p/p.go:15:7*/b, x), ryield.R(/*line /src/p/p.go:17:17*/c), ryield.R(/*line /src/p/p.go:19:9*/d); ryield.Hook.Select(true, ryield_0, ryield_1, ryield_2, ryield_3)/*line /src/p/p.go:12:8*/ {
	case 0: v := ryield_0.V;
		use(v)
	case 1:
		use(1)
	case 2: w, ok = ryield_2.V, ryield_2.OK;
		use(w, ok)
	case 3:
	default:
		use(2)
	}
L:
	switch ryield_0, ryield_1, ryield_2, ryield_3, ryield_4 := ryield.S[error](/*line /src/p/p.go:25:7*/errs, &myErr{}), ryield.R(/*line /src/p/p.go:29:18*/(ryield.Recv(cc))), ryield.R(/*line /src/p/p.go:31:10*/a), ryield.R(/*line /src/p/p.go:32:16*/a), ryield.R(/*line /src/p/p.go:33:13*/c); ryield.Hook.Select(false, ryield_0, ryield_1, ryield_2, ryield_3, ryield_4)/*line /src/p/p.go:24:8*/ {
	case 0: // a comment
		break L
	// between the cases

	case 1: v, ok := ryield_1.V, ryield_1.OK;
		use(v, ok)
	case 2:
	case 3: _, _ = ryield_3.V, ryield_3.OK;
	default: w = ryield_4.V;
		{ ryield_0 := w; ryield.Hook.Go(func() { use(ryield_0) }) }
	}
}

func loop(a, c, d chan int) int {
	for {
		switch ryield_0, ryield_1 := ryield.R(/*line /src/p/p.go:41:10*/a), ryield.R(/*line /src/p/p.go:43:15*/c); ryield.Hook.Select(false, ryield_0, ryield_1)/*line /src/p/p.go:40:9*/ {
		case 0:
			continue
		default: v := ryield_1.V;
			switch ryield_0, ryield_1 := ryield.S(/*line /src/p/p.go:45:9*/d, v), ryield.R(/*line /src/p/p.go:46:11*/a); ryield.Hook.Select(false, ryield_0, ryield_1)/*line /src/p/p.go:44:10*/ {
			case 0:
			default:
				return v
			}
		}
	}
}

func last(a chan int) int {
	switch ryield_0, ryield_1 := ryield.R(/*line /src/p/p.go:55:14*/a), ryield.R(/*line /src/p/p.go:57:9*/a); ryield.Hook.Select(false, ryield_0, ryield_1)/*line /src/p/p.go:54:8*/ {
	case 0: v := ryield_0.V;
		return v
	default:
		return 0
	}
}

func oneLine(a chan int) { switch ryield_0 := ryield.R(a); ryield.Hook.Select(false, ryield_0) { default: v := ryield_0.V; use(v) } }
`,
			points: 8,
		},
		{
			name: "SelectLeft",
			src: `
import "io"

type myBool bool

func use(...any) {}

func f(a chan int, get func() chan int, mb myBool) {
	var v int
	select {
	case <-get(
	):
	}
	select {
	case v, mb = <-a:
		use(v)
	}
	select {}
	select {
	default:
	}
}

func generic[C ~chan int](c C, a chan int) {
	select {
	case <-c:
	case <-a:
	}
}

type myReader struct{}

func (*myReader) Read([]byte) (int, error) { return 0, nil }

func unspellable(readers chan io.Reader, r *myReader, a chan int) {
	type io int
	select {
	case readers <- r:
	case <-a:
	}
}
`,
			want: `
import "io"

type myBool bool

func use(...any) {}

func f(a chan int, get func() chan int, mb myBool) {
	var v int
	ryield.Hook.Point(); select {
	case <-get(
	):
	}
	ryield.Hook.Point(); select {
	case v, mb = <-a:
		use(v)
	}
	ryield.Hook.Point(); select {}
	ryield.Hook.Point(); select {
	default:
	}
}

func generic[C ~chan int](c C, a chan int) {
	ryield.Hook.Point(); select {
	case <-c:
	case <-a:
	}
}

type myReader struct{}

func (*myReader) Read([]byte) (int, error) { return 0, nil }

func unspellable(readers chan io.Reader, r *myReader, a chan int) {
	type io int
	ryield.Hook.Point(); select {
	case readers <- r:
	case <-a:
	}
}
`,
			points: 6,
		},
		{
			name: "SelectNested",
			src: `
func use(...any) {}

func f(a chan int, x int) {
	select {
	case <-func() chan int { go use(x, 1); select { case v := <-a: use(v) }; return a }():
	}
}
`,
			want: `
func use(...any) {}

func f(a chan int, x int) {
	switch ryield_0 := ryield.R(/*line /src/p/p.go:7:9*/func() chan int { { ryield_0 := x; ryield.Hook.Go(func() { use(ryield_0, 1) }) }; switch ryield_0 := ryield.R(a); ryield.Hook.Select(false, ryield_0) { default: v := ryield_0.V; use(v) }; return a }()); ryield.Hook.Select(false, ryield_0)/*line /src/p/p.go:6:8*/ {
	default:
	}
}
`,
			points: 3,
		},
		{
			name: "Nested",
			src: `
import (
	"sync"
	"sync/atomic"
)

type box struct {
	mu   sync.Mutex
	next atomic.Pointer[box]
}

func f(ch chan int64, pch chan *int64, chch chan chan int64, n *int64, b *box) {
	ch <- atomic.AddInt64(n, 1)
	atomic.AddInt64(<-pch, 1)
	_ = <-<-chch
	b.next.Load().mu.Lock()
	ch <- <-ch
}
`,
			want: `
import (
	"sync"
	"sync/atomic"
)

type box struct {
	mu   sync.Mutex
	next atomic.Pointer[box]
}

func f(ch chan int64, pch chan *int64, chch chan chan int64, n *int64, b *box) {
	ryield.Send(ch, atomic.AddInt64(ryield.P(n), 1))
	atomic.AddInt64(ryield.P(ryield.Recv(pch)), 1)
	_ = ryield.Recv(ryield.Recv(chch))
	ryield.Hook.M(&ryield.P(&b.next).Load().mu).Lock()
	ryield.Send(ch, ryield.Recv(ch))
}
`,
			points: 10,
		},
		{
			name: "Left",
			src: `
import "sync"

func generic[C ~chan int](c C) {
	c <- 1
	<-c
}

func f(ch chan int, l sync.Locker, wg *sync.WaitGroup) {
	l.Lock()
	wg.Add(1)
	wg.Done()
	_ = (*sync.Mutex).Lock
}
`,
		},
		{
			name: "Range",
			src: `
type events chan string

func f(ch chan int, in <-chan int, ev events) (n int) {
	for range ch {
	}
loop:
	for v := range in {
		if v < 0 {
			break loop
		}
		n += v
	}
	var s string
	for s = range ev {
		_ = s
	}
	return n
}
`,
			want: `
type events chan string

func f(ch chan int, in <-chan int, ev events) (n int) {
	for range ryield.Range(ch) {
	}
loop:
	for v := range ryield.Range(in) {
		if v < 0 {
			break loop
		}
		n += v
	}
	var s string
	for s = range ryield.Range(ev) {
		_ = s
	}
	return n
}
`,
			points: 3,
		},
		{
			name: "WaitGroup",
			src: `
import "sync"

type pool struct{ wg sync.WaitGroup }

func f(p *pool, wg *sync.WaitGroup, work func()) {
	p.wg.Go(work)
	wg.Add(1)
	defer wg.Wait()
	wait := p.wg.Wait
	wait()
	wg.Done()
}
`,
			want: `
import "sync"

type pool struct{ wg sync.WaitGroup }

func f(p *pool, wg *sync.WaitGroup, work func()) {
	ryield.Hook.WG(&p.wg).Go(work)
	wg.Add(1)
	defer ryield.Hook.WG(wg).Wait()
	wait := ryield.Hook.WG(&p.wg).Wait
	wait()
	wg.Done()
}
`,
			points: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := rewrite(t, "package p\n"+tc.src)
			want := ""
			if tc.want != "" {
				want = header + "\n" + tc.want + footer
			}
			if got != want {
				t.Errorf("File() =\n%s\nwant\n%s", got, want)
			}
			if n != tc.points {
				t.Errorf("File() inserted %d points, want %d", n, tc.points)
			}
		})
	}
}

func TestFileHeaderAndFooter(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{
			name: "BuildConstraintAndDoc",
			src:  "//go:build !nothing\n\n// Package p is p.\npackage p\n\nimport \"sync\"\n\nvar mu sync.Mutex\n\nfunc f() { mu.Lock() }\n",
			want: "//go:build !nothing\n\n// Package p is p.\n" +
				`/*line /src/p/p.go:4:1*/package p; import ryield "github.com/retrybudget/retrybudget/yield"` +
				"\n\nimport \"sync\"\n\nvar mu sync.Mutex\n\nfunc f() { ryield.Hook.M(&mu).Lock() }\nvar _ = ryield.Hook.Mark()\n",
		},
		{
			name: "NoFinalNewline",
			src:  "package p\n\nfunc f(ch chan int) { <-ch } // ends here",
			want: header + "\n\nfunc f(ch chan int) { ryield.Recv(ch) } // ends here\n" + footer,
		},
		{
			name: "NameInUse",
			src:  "package p\n\nimport \"sync\"\n\nvar ryield2 int\n\nfunc f(mu *sync.Mutex) {\n\tryield := 1\n\t_ = ryield\n\tmu.Lock()\n}\n",
			want: `/*line /src/p/p.go:1:1*/package p; import ryield3 "github.com/retrybudget/retrybudget/yield"` +
				"\n\nimport \"sync\"\n\nvar ryield2 int\n\nfunc f(mu *sync.Mutex) {\n\tryield := 1\n\t_ = ryield\n\tryield3.Hook.M(mu).Lock()\n}\nvar _ = ryield3.Hook.Mark()\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := rewrite(t, tc.src); got != tc.want {
				t.Errorf("File() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// A file that imports package yield calls its hooks itself, where it wants
// them, and is left as it is.
func TestFileLeavesCodeThatCallsTheHooks(t *testing.T) {
	src := "package p\n\nimport (\n\t\"sync/atomic\"\n\n\t\"" + YieldPath + "\"\n)\n\nfunc f(n *atomic.Int64, ch chan int) int64 {\n\tyield.Hook.Point()\n\tch <- 1\n\treturn yield.P(n).Load()\n}\n"
	fset, f, info := check(t, src)
	out, n, err := File(fset, f, []byte(src), info)
	if err != nil || out != nil || n != 0 {
		t.Errorf("File = %q, %d, %v; want the file left as it is", out, n, err)
	}
}

func TestFileRejectsOtherSource(t *testing.T) {
	src := "package p\n\nfunc f(ch chan int) { <-ch }\n"
	fset, f, info := check(t, src)
	if _, _, err := File(fset, f, []byte(src+"\n"), info); err == nil {
		t.Error("File with a source longer than the parsed file's succeeded")
	}
}

// The channel and value expressions a select's rewrite moves up to the
// switch's line keep their lines, by the /*line*/ directives around them
// (a case's first expression its column too), and the text after them
// gets the select's line back.
func TestFileSelectKeepsPositions(t *testing.T) {
	const src = `package p

func f(chA chan int, chB chan<- int, val int) {
	select {
	case v := <-chA:
		_ = v
	case chB <- val:
	}
	_ = val + 1
}
`
	out, _ := rewrite(t, src)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, testPath, out, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"chA": {"3:8", "5:14"},
		"chB": {"3:22", "7:7"},
		"val": {"3:38", "7", "9:6"},
	}
	got := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && want[id.Name] != nil {
			p := fset.Position(id.Pos())
			if p.Filename != testPath {
				t.Errorf("%s is in %s", id.Name, p.Filename)
			}
			at := fmt.Sprintf("%d:%d", p.Line, p.Column)
			if id.Name == "val" && p.Line == 7 {
				at = fmt.Sprint(p.Line) // after chB, on its line
			}
			got[id.Name] = append(got[id.Name], at)
		}
		return true
	})
	for name, pos := range want {
		if !slices.Equal(got[name], pos) {
			t.Errorf("%s is at %q in the rewritten file, want %q:\n%s", name, got[name], pos, out)
		}
	}
	if sw := f.Decls[1].(*ast.FuncDecl).Body.List[0].(*ast.SwitchStmt); fset.Position(sw.Body.Lbrace).Line != 4 {
		t.Errorf("the switch's { is at %s, want line 4:\n%s", fset.Position(sw.Body.Lbrace), out)
	}
}
