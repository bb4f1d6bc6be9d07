package instrument

import (
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

import "sync"

func P[T any](x T) T { return x }
func Point() {}

type Mutex struct{ m *sync.Mutex }

func M(m *sync.Mutex) Mutex { return Mutex{m} }
func (m Mutex) Lock()         { m.m.Lock() }
func (m Mutex) Unlock()       { m.m.Unlock() }
func (m Mutex) TryLock() bool { return m.m.TryLock() }

type RWMutex struct{ m *sync.RWMutex }

func RW(m *sync.RWMutex) RWMutex       { return RWMutex{m} }
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
func Mark() bool                           { return true }
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
	replaced := []string{"<-"}
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
// again); and that, read with out's line directive, every line of out
// names src's file and its own line.
func checkLines(t *testing.T, src, out string, replaced ...string) {
	t.Helper()
	if got, want := lineCount(out), lineCount(src)+1; got != want {
		t.Errorf("the rewritten file has %d lines, want %d", got, want)
	}
	before, _ := tokenLines(src)
	after, adjusted := tokenLines(out)
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

// tokenLines returns the tokens of src by line, and the position each
// line's first token reports once line directives apply.
func tokenLines(src string) (map[int][]string, map[int]token.Position) {
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
	footer = "var _ = ryield.Mark()\n"
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
	ryield.M(&b.mu).Lock()
	defer ryield.M(&b.mu).Unlock()
	b.n++
}

func f(b *B, l *locked, lp lockedPointer, mu *sync.Mutex) bool {
	ryield.M(&l.Mutex).Lock()
	l.n++
	ryield.M(&l.Mutex).Unlock()
	ryield.M(lp.Mutex).Lock()
	ryield.M(lp.Mutex).Unlock()
	unlock := ryield.M(&b.mu).Unlock
	_ = unlock
	return ryield.M(mu).TryLock()
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
	ryield.RW(c.RWMutex).RLock()
	defer ryield.RW(c.RWMutex).RUnlock()
	ryield.RW(&rw).Lock()
	ryield.RW(&rw).Unlock()
	_ = ryield.RW(&rw).TryRLock()
	_ = ryield.RW(&rw).RLocker()
	return c.m["x"], ryield.RW(&rw).TryLock()
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
	ryield.P(&once).Do(init)
	ryield.P(l.once).Do(init)
	ryield.P(&e.Once).Do(init)
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
	ryield.Point(); select {
	case v := <-ch:
		_ = v
	case v, ok := <-ch:
		_, _ = v, ok
	case out <- atomic.AddInt64(ryield.P(n), 1):
	case <-done:
	case ch <- ryield.Recv(ch):
	default:
	}
loop:
	for {
	ryield.Point(); wait: select {
		case <-done:
			break loop
		default:
			break wait
		}
	}
	switch tag {
	case 1: ryield.Point(); select {}
	}
}
`,
			points: 5,
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
	ryield.M(&ryield.P(&b.next).Load().mu).Lock()
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
	for range ch {
	}
	for v := range ch {
		_ = v
	}
	go generic(ch)
	l.Lock()
	wg.Wait()
	_ = (*sync.Mutex).Lock
}
`,
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
				"\n\nimport \"sync\"\n\nvar mu sync.Mutex\n\nfunc f() { ryield.M(&mu).Lock() }\nvar _ = ryield.Mark()\n",
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
				"\n\nimport \"sync\"\n\nvar ryield2 int\n\nfunc f(mu *sync.Mutex) {\n\tryield := 1\n\t_ = ryield\n\tryield3.M(mu).Lock()\n}\nvar _ = ryield3.Mark()\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := rewrite(t, tc.src); got != tc.want {
				t.Errorf("File() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestFileRejectsOtherSource(t *testing.T) {
	src := "package p\n\nfunc f(ch chan int) { <-ch }\n"
	fset, f, info := check(t, src)
	if _, _, err := File(fset, f, []byte(src+"\n"), info); err == nil {
		t.Error("File with a source longer than the parsed file's succeeded")
	}
}
