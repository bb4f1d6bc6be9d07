package instrument

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// fieldsDecls are the declarations the cases of TestFileFields share,
// after "package p" and their imports.
const fieldsDecls = `
type inner struct{ n int }

func (*inner) method() {}

type B struct {
	tokens int64
	other  int64
	s      inner
	p      *inner
	next   *B
	arr    [4]int64
	m      map[string]int64
	buf    []byte
	err    error
	f      func() int
	fns    []func()
	ch     chan int64
	ok     bool
}
`

func TestFileFields(t *testing.T) {
	for _, tc := range []struct {
		name    string
		imports string // after "package p"
		src     string // after fieldsDecls
		want    string // the rewritten src; "" if File changes nothing
		points  int
	}{
		{
			name: "Reads",
			src: `
func use(...any) {}

func f(b *B, i int) int64 {
	x := b.tokens
	use(b.s.n, b.p.n, b.next.tokens, b.arr[i], b.m["k"], (b.other))
	for range b.ch {
	}
	switch b.ok {
	}
	return x + b.tokens
}
`,
			want: `
func use(...any) {}

func f(b *B, i int) int64 {
	x := ryield.P(b.tokens)
	use(ryield.P(b.s.n), ryield.P(b.p.n), ryield.P(b.next.tokens), ryield.P(b.arr[i]), ryield.P(b.m["k"]), (ryield.P(b.other)))
	for range ryield.Range(ryield.P(b.ch)) {
	}
	switch ryield.P(b.ok) {
	}
	return x + ryield.P(b.tokens)
}
`,
			points: 11, // the range over b.ch is one too
		},
		{
			name: "ReadsLeft",
			imports: `
import "unsafe"
`,
			src: `
func f(b *B, i int) {
	_ = &b.tokens
	_ = &b.arr[i]
	b.s.method()
	b.p.method()
	_ = b.s.method
	_ = b.buf[:1]
	_ = b.arr[1:]
	_ = b.f()
	b.fns[i]()
	_ = map[int64]bool{b.tokens: true}
	_ = B{tokens: 1}
	_ = unsafe.Offsetof(b.tokens)
	_ = unsafe.Sizeof(b.arr)
	const n = len(b.arr)
	var a [len(b.arr)]int
	_ = a
	defer b.get(b.tokens)()
	v, ok := b.m["k"]
	var w, ok2 = b.m["k"]
	v, ok = b.m["k"]
	_, _, _, _ = v, ok, w, ok2
}

func (b *B) get(int64) func() { return func() {} }
`,
		},
		{
			name: "Writes",
			src: `
func f(b *B, x, c int64, s uint) {
	b.tokens = x - c
	b.tokens = b.other
	b.tokens = b.tokens - c
	b.tokens = 0
	b.tokens = 1 << s
	b.ok = x == c
	b.s.n = int(x)
	b.m["k"] = x
	b.arr[1] = x
	b.buf = nil
}
`,
			want: `
func f(b *B, x, c int64, s uint) {
	ryield.Hook.Point(); b.tokens = ryield.W(x - c)
	ryield.Hook.Point(); b.tokens = ryield.W(b.other)
	ryield.Hook.Point(); b.tokens = ryield.W(ryield.P(b.tokens) - c)
	ryield.Hook.Point(); b.tokens = ryield.W[int64](0)
	ryield.Hook.Point(); b.tokens = ryield.W[int64](1 << s)
	ryield.Hook.Point(); b.ok = ryield.W[bool](x == c)
	ryield.Hook.Point(); b.s.n = ryield.W(int(x))
	ryield.Hook.Point(); b.m["k"] = ryield.W(x)
	ryield.Hook.Point(); b.arr[1] = ryield.W(x)
	ryield.Hook.Point(); b.buf = ryield.W[[]byte](nil)
}
`,
			points: 21,
		},
		{
			name: "AssignmentOperationsSpelledAgain",
			src: `
func f(b *B, c, d int64) {
	b.tokens -= c
	b.tokens++
	b.tokens--
	b.tokens += c - d
	b.tokens <<= 1
	b.s.n *= 2
	b.p.n++
	b.next.next.tokens -= b.other
	(b.tokens) += -c
	b.tokens -= /* cost */ c
	b.tokens-=-c
	b.tokens -=
		c
}
`,
			want: `
func f(b *B, c, d int64) {
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - c)
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens + 1)
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - 1)
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens + (c - d))
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens << 1)
	ryield.Hook.Point(); b.s.n = ryield.W(b.s.n * 2)
	ryield.Hook.Point(); b.p.n = ryield.W(b.p.n + 1)
	ryield.Hook.Point(); b.next.next.tokens = ryield.W(b.next.next.tokens - ryield.P(b.other))
	ryield.Hook.Point(); (b.tokens) = ryield.W((b.tokens) + -c)
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - /* cost */ c)
	ryield.Hook.Point(); b.tokens= ryield.W(b.tokens - -c)
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens -
		c)
}
`,
			points: 25,
		},
		{
			name: "AssignmentOperationsWithSideEffectsOnlyPointed",
			src: `
func get(b *B) *B { return b }

func f(b *B, bs []B, i int, c int64) {
	b.arr[i]++
	b.m["k"] -= c
	get(b).tokens++
	bs[i].tokens -= c
	(*b).tokens++
}
`,
			want: `
func get(b *B) *B { return b }

func f(b *B, bs []B, i int, c int64) {
	ryield.Hook.Point(); b.arr[i]++
	ryield.Hook.Point(); b.m["k"] -= c
	ryield.Hook.Point(); get(b).tokens++
	ryield.Hook.Point(); bs[i].tokens -= c
	ryield.Hook.Point(); (*b).tokens++
}
`,
			points: 5,
		},
		{
			name: "InitAndPostStatementsLeft",
			src: `
func f(b *B, ch chan int64) {
	if b.tokens = 3; b.tokens > 0 {
	}
	for b.other = b.tokens; b.other > 0; b.other-- {
	}
	switch b.tokens++; {
	}
	for b.tokens = range 3 {
	}
	select {
	case b.tokens = <-ch:
	}
}
`,
			want: `
func f(b *B, ch chan int64) {
	if b.tokens = 3; ryield.P(b.tokens) > 0 {
	}
	for b.other = ryield.P(b.tokens); ryield.P(b.other) > 0; b.other-- {
	}
	switch b.tokens++; {
	}
	for b.tokens = range 3 {
	}
	switch ryield_0 := ryield.R(/*line /src/p/p.go:33:20*/ch); ryield.Hook.Select(false, ryield_0)/*line /src/p/p.go:32:8*/ {
	default: b.tokens = ryield_0.V;
	}
}
`,
			points: 4,
		},
		{
			name: "MultipleAssignmentsOnlyPointed",
			src: `
func two() (int64, int64) { return 0, 0 }

func f(a *B, x int64) {
	a.tokens, a.other = a.other, a.tokens
	a.tokens, x = two()
	a.s.n, x = 1, 2
	var ok bool
	a.tokens, ok = a.m["k"]
	_, _ = x, ok
}
`,
			want: `
func two() (int64, int64) { return 0, 0 }

func f(a *B, x int64) {
	ryield.Hook.Point(); a.tokens, a.other = ryield.W(a.other), ryield.W(a.tokens)
	ryield.Hook.Point(); a.tokens, x = two()
	ryield.Hook.Point(); a.s.n, x = 1, 2
	var ok bool
	ryield.Hook.Point(); a.tokens, ok = a.m["k"]
	_, _ = x, ok
}
`,
			points: 6,
		},
		{
			name: "InterfaceFieldGetsTypeArgument",
			imports: `
import "errors"
`,
			src: `
type myErr struct{}

func (*myErr) Error() string { return "" }

func f(b *B) {
	b.err = errors.New("x")
	b.err = &myErr{}
	b.err = nil
}

func shadowed(b *B) {
	type error = int
	b.err = &myErr{}
}
`,
			want: `
type myErr struct{}

func (*myErr) Error() string { return "" }

func f(b *B) {
	ryield.Hook.Point(); b.err = ryield.W(errors.New("x"))
	ryield.Hook.Point(); b.err = ryield.W[error](&myErr{})
	ryield.Hook.Point(); b.err = ryield.W[error](nil)
}

func shadowed(b *B) {
	type error = int
	ryield.Hook.Point(); b.err = &myErr{}
}
`,
			points: 7,
		},
		{
			name: "Generic",
			src: `
type box[T any] struct{ v T }

func id[T any](x T) T { return x }

type funcs struct{ f func(int) int }

func set[T any](b *box[T], x T) T {
	b.v = x
	return b.v
}

func f(fs *funcs) {
	fs.f = id
	fs.f = id[int]
}
`,
			want: `
type box[T any] struct{ v T }

func id[T any](x T) T { return x }

type funcs struct{ f func(int) int }

func set[T any](b *box[T], x T) T {
	ryield.Hook.Point(); b.v = ryield.W(x)
	return ryield.P(b.v)
}

func f(fs *funcs) {
	ryield.Hook.Point(); fs.f = ryield.W[func(int) int](id)
	ryield.Hook.Point(); fs.f = ryield.W[func(int) int](id[int])
}
`,
			points: 7,
		},
		{
			name: "LabelsAndCases",
			src: `
func f(b *B, k int, ch chan int) {
L:
	b.tokens++
	switch k {
	case 1:
		b.tokens = 1
		goto L
	}
	select {
	case <-ch:
		b.other--
	}
}
`,
			want: `
func f(b *B, k int, ch chan int) {
L:
	ryield.Hook.Point(); b.tokens = ryield.W(b.tokens + 1)
	switch k {
	case 1:
		ryield.Hook.Point(); b.tokens = ryield.W[int64](1)
		goto L
	}
	switch ryield_0 := ryield.R(/*line /src/p/p.go:32:9*/ch); ryield.Hook.Select(false, ryield_0)/*line /src/p/p.go:31:8*/ {
	default:
		ryield.Hook.Point(); b.other = ryield.W(b.other - 1)
	}
}
`,
			points: 7,
		},
		{
			name: "Nested",
			imports: `
import (
	"sync"
	"sync/atomic"
)
`,
			src: `
type counted struct {
	mu    sync.Mutex
	pmu   *sync.Mutex
	hits  atomic.Int64
	raw   int64
	total int64
	ch    chan int64
}

func f(c *counted) {
	c.mu.Lock()
	c.total = <-c.ch
	c.total += <-c.ch
	c.ch <- c.total
	c.total = atomic.AddInt64(&c.raw, c.total)
	c.hits.Store(c.total)
	mu := c.pmu
	mu.Unlock()
}
`,
			want: `
type counted struct {
	mu    sync.Mutex
	pmu   *sync.Mutex
	hits  atomic.Int64
	raw   int64
	total int64
	ch    chan int64
}

func f(c *counted) {
	ryield.Hook.M(&c.mu).Lock()
	ryield.Hook.Point(); c.total = ryield.W(ryield.Recv(ryield.P(c.ch)))
	ryield.Hook.Point(); c.total = ryield.W(c.total + ryield.Recv(ryield.P(c.ch)))
	ryield.Send(ryield.P(c.ch), ryield.P(c.total))
	ryield.Hook.Point(); c.total = ryield.W(atomic.AddInt64(ryield.P(&c.raw), ryield.P(c.total)))
	ryield.P(&c.hits).Store(ryield.P(c.total))
	mu := c.pmu
	ryield.Hook.M(mu).Unlock()
}
`,
			points: 19,
		},
		{
			name: "PackageVariables",
			src: `
var count int64

var global B

func f() {
	count++
	global.tokens++
	_ = count + global.other
}
`,
			want: `
var count int64

var global B

func f() {
	count++
	ryield.Hook.Point(); global.tokens = ryield.W(global.tokens + 1)
	_ = count + ryield.P(global.other)
}
`,
			points: 3,
		},
		{
			name: "OtherPackagesFieldsLeft",
			imports: `
import "image"
`,
			src: `
type rect struct {
	min image.Point
	max *image.Point
}

func f(p *image.Point, r image.Rectangle) int {
	p.X++
	p.Y = r.Min.X
	return p.X + r.Max.Y
}

func g(r *rect) int {
	r.min.X++
	r.max.Y = 1
	return r.min.Y + r.max.X
}
`,
			want: `
type rect struct {
	min image.Point
	max *image.Point
}

func f(p *image.Point, r image.Rectangle) int {
	p.X++
	p.Y = r.Min.X
	return p.X + r.Max.Y
}

func g(r *rect) int {
	ryield.Hook.Point(); r.min.X = ryield.W(r.min.X + 1)
	ryield.Hook.Point(); r.max.Y = ryield.W[int](1)
	return ryield.P(r.min.Y) + ryield.P(r.max.X)
}
`,
			points: 6,
		},
		{
			name: "GoAndSelect",
			src: `
func use(...any) {}

func (b *B) get(int64) func() { return func() {} }

func f(b *B, out chan int64) {
	go use(b.tokens, b.s.n)
	go b.get(b.other)()
	go b.f()
	select {
	case b.ch <- b.tokens:
	case v := <-b.ch:
		b.other = v
	case out <- b.arr[b.s.n]:
	case b.other = <-out:
	}
}
`,
			want: `
func use(...any) {}

func (b *B) get(int64) func() { return func() {} }

func f(b *B, out chan int64) {
	{ ryield_0, ryield_1 := ryield.P(b.tokens), ryield.P(b.s.n); ryield.Hook.Go(func() { use(ryield_0, ryield_1) }) }
	ryield.Hook.Go(b.get(b.other))
	{ ryield_f := b.f; ryield.Hook.Go(func() { ryield_f() }) }
	switch ryield_0, ryield_1, ryield_2, ryield_3 := ryield.S(/*line /src/p/p.go:32:7*/ryield.P(b.ch), ryield.P(b.tokens)), ryield.R(/*line /src/p/p.go:33:14*/ryield.P(b.ch)), ryield.S(/*line /src/p/p.go:35:7*/out, ryield.P(b.arr[ryield.P(b.s.n)])), ryield.R(/*line /src/p/p.go:36:19*/out); ryield.Hook.Select(false, ryield_0, ryield_1, ryield_2, ryield_3)/*line /src/p/p.go:31:8*/ {
	case 0:
	case 1: v := ryield_1.V;
		ryield.Hook.Point(); b.other = ryield.W(v)
	case 2:
	default: b.other = ryield_3.V;
	}
}
`,
			points: 13,
		},
		{
			name: "FuncLiterals",
			src: `
func f(b *B) {
	go func() {
		b.tokens--
	}()
	defer func() { _ = b.tokens }()
	b.f = func() int { return int(b.other) }
}
`,
			want: `
func f(b *B) {
	ryield.Hook.Go(func() {
		ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - 1)
	})
	defer func() { _ = ryield.P(b.tokens) }()
	ryield.Hook.Point(); b.f = ryield.W(func() int { return int(ryield.P(b.other)) })
}
`,
			points: 7,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "package p\n" + tc.imports + fieldsDecls
			got, n := rewriteWith(t, prefix+tc.src, Options{Fields: true})
			want := ""
			if tc.want != "" {
				want = header + strings.TrimPrefix(prefix, "package p") + tc.want + footer
			}
			if got != want {
				t.Errorf("FileWith() =\n%s\nwant\n%s", got, want)
			}
			if n != tc.points {
				t.Errorf("FileWith() inserted %d points, want %d", n, tc.points)
			}
			// Without Fields, none of it is rewritten but the
			// synchronization.
			if plain, _ := rewrite(t, prefix+tc.src); strings.Contains(plain, "ryield.P(b.") || strings.Contains(plain, "ryield.Hook.Point(); b.") {
				t.Errorf("File() without Fields rewrote fields:\n%s", plain)
			}
		})
	}
}

// A _test.go file's fields are the test's, not the budget's: Fields
// leaves them, and rewrites the rest.
func TestFileFieldsLeavesTestFiles(t *testing.T) {
	const src = "package p\n\ntype B struct{ n int }\n\nfunc f(b *B, ch chan int) {\n\tb.n++\n\t<-ch\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "/src/p/p_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Implicits:  map[ast.Node]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Scopes:     map[ast.Node]*types.Scope{},
	}
	if _, err := (&types.Config{Importer: testImporter}).Check("example.com/p", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	out, n, err := FileWith(fset, f, []byte(src), info, Options{Fields: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "/*line /src/p/p_test.go:1:1*/package p; import ryield \"github.com/retrybudget/retrybudget/yield\"\n\n" +
		"type B struct{ n int }\n\nfunc f(b *B, ch chan int) {\n\tb.n++\n\tryield.Recv(ch)\n}\n" + footer
	if string(out) != want || n != 1 {
		t.Errorf("FileWith(p_test.go) = %d points,\n%s\nwant 1,\n%s", n, out, want)
	}
}
